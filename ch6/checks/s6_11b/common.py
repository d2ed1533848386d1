"""6.11b の演習チェックで共有するもの: 隠し乱数と、数の戻り値の読み方。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, hidden_rng


def exercise_rng(tag: int) -> np.random.Generator:
    """6.11b-k の隠し入力の乱数（seed は 611_200 + k）。"""
    return hidden_rng(611_200 + tag)


def as_int(got, what: str) -> int:
    """学習者が返した並列数を int に（整数でなければ、何が返ったかを言って不合格）。"""
    if isinstance(got, (bool, np.bool_)):
        raise Fail(f"{what}: 並列数は整数のはずが、真偽値 {got} でした。")
    if isinstance(got, (int, np.integer)):
        return int(got)
    if isinstance(got, (float, np.floating)):
        raise Fail(f"{what}: 並列数は整数のはずが、浮動小数 {float(got):.4g} でした。int で返します。")
    raise Fail(f"{what}: 並列数は整数のはずが、{type(got).__name__} でした。")


def as_seconds(got, what: str) -> float:
    """学習者が返した秒を有限の float に（負の数は、名指しする誤りと比べた後でチェックが断る）。"""
    if isinstance(got, (bool, np.bool_)) or got is None:
        raise Fail(f"{what}: 秒（数）のはずが、{type(got).__name__} でした。")
    try:
        v = float(np.asarray(got))
    except Exception:
        raise Fail(f"{what}: 秒（数）のはずが、{type(got).__name__} でした。") from None
    if not np.isfinite(v):
        raise Fail(f"{what}: 秒が {v} でした。有限の数を返します。")
    return v
