"""6.2 の演習チェックで共有する道具: 隠し乱数と、jaxpr に現れるプリミティブ。"""
from __future__ import annotations

import numpy as np

from ...checking import hidden_rng, traced_eqns


def exercise_rng(tag: int) -> np.random.Generator:
    """6.2-k の隠し入力の乱数（seed は 62_000 + k）。"""
    return hidden_rng(62_000 + tag)


def primitives(fn, *args) -> set[str]:
    """fn(*args) をトレースした jaxpr（入れ子も含む）に現れるプリミティブの名前。"""
    return {e.primitive.name for e in traced_eqns(fn, *args)}
