"""6.10 のチェックで共有するもの: 隠し乱数、整数の戻り値の確かめ、KV キャッシュの式。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, hidden_rng

AXIS = "model"


def exercise_rng(tag: int) -> np.random.Generator:
    return hidden_rng(610_000 + tag)


def whole_number(x, what: str) -> int:
    """学習者が返した値を整数に（bool・None・小数・文字列なら、何が返ったかを言って不合格）。"""
    if isinstance(x, (bool, np.bool_)) or x is None:
        raise Fail(f"{what}は整数のはずが、{type(x).__name__} が返りました。int で返してください。")
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)) and np.isfinite(x):
        if float(x) != int(x):
            raise Fail(f"{what}は整数のはずが、小数 {float(x):.4g} が返りました。切り捨てか切り上げで整数にしてください。")
        raise Fail(f"{what}は int のはずが、float の {float(x):.4g} が返りました。int(...) で整数にしてください。")
    raise Fail(f"{what}は整数のはずが、{type(x).__name__} が返りました。int で返してください。")


def kv_bytes_per_seq(model: dict, seq_len: int, bytes_per_value: float, *, kv_factor: int = 2,
                     heads_key: str = "n_kv_heads", layers: bool = True) -> float:
    """1 系列の KV キャッシュのバイト（kv_factor=1 は K だけ、heads_key="n_heads" はクエリのヘッドで数えた誤り、
    layers=False は層の数を掛け忘れた誤り）。"""
    n_layers = model["n_layers"] if layers else 1
    return n_layers * kv_factor * model[heads_key] * model["head_dim"] * seq_len * bytes_per_value
