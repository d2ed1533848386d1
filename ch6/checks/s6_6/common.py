"""6.6 の演習チェックで共有する道具: 隠し乱数、メッシュ、spec の読み方。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, hidden_rng


def exercise_rng(tag: int) -> np.random.Generator:
    """6.6-k の隠し入力の乱数（seed は 66_000 + k）。"""
    return hidden_rng(66_000 + tag)


def shuffled_mesh(rng: np.random.Generator, names: tuple[str, str], n: int | None = None):
    """:func:`ch6.meshes.mesh_2d_shape` の形で、先頭の n 個（既定はすべて）のデバイスの並びを入れ替えた 2 次元のメッシュ。
    複数のチップの TPU でも入れ替えた並びのまま（:func:`ch6.checks.specs.mesh_in_order`）。"""
    import jax

    from ... import meshes
    from ..specs import mesh_in_order

    n = jax.device_count() if n is None else n
    order = rng.permutation(n)
    if n > 1 and (order == np.arange(n)).all():
        order = np.roll(order, 1)   # 既定の並びのメッシュとは必ず違うように
    devices = [jax.devices()[i] for i in order]
    return mesh_in_order(meshes.mesh_2d_shape(n), names, devices)


def as_int(value, what: str, hint: str = "") -> int:
    """学習者の値を整数として読む（bool、浮動小数点数、文字列は説明つきで不正解）。"""
    if isinstance(value, (bool, np.bool_)):
        raise Fail(f"{what}は整数のはずが、真偽値 {value} でした。{hint}".strip())
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        raise Fail(f"{what}は整数のはずが、浮動小数点数 {float(value):g} でした。割り算は // で書きます。")
    raise Fail(f"{what}は整数のはずが、{type(value).__name__} でした。{hint}".strip())
