"""6.9a の演習チェックで共有する道具: 隠し乱数。"""
from __future__ import annotations

import numpy as np

from ...checking import hidden_rng


def exercise_rng(tag: int) -> np.random.Generator:
    return hidden_rng(69_100 + tag)
