"""6.4 の演習チェックで共有する道具: 隠し乱数、形の取り出し、一致するかの判定。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, expect_close, hidden_rng


def exercise_rng(tag: int) -> np.random.Generator:
    return hidden_rng(64_000 + tag)


def shape_of(x):
    shape = getattr(x, "shape", None)
    return tuple(shape) if shape is not None else None


def matches(got, want, rtol=1e-4, atol=1e-5) -> bool:
    """expect_close（共通の比較）が通るか。誤りの種類を見分けるために使う。"""
    try:
        expect_close(got, want, rtol=rtol, atol=atol)
    except Fail:
        return False
    return True
