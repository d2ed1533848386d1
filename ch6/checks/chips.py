"""チップの行と数の返り値を扱う道具。6.7 と 6.8b のチェックが共有します。"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..checking import Fail


def hidden_chip(r: np.random.Generator, kind: str, name: str, *, torus_axes: int = 3):
    """実在しない数値のチップの行（ch6.hardware.Chip そのもの: 導いた量 axis_bw・all_axes_bw・link_oneway も同じ式）。

    値はおよそ 1 桁の範囲で揺らすので、公表値の表を書き込んだ答えは通りません。"""
    from ..hardware import Chip

    base = dict(name=name, kind=kind, flops=float(r.uniform(2e14, 2e15)), hbm_bw=float(r.uniform(8e11, 8e12)),
                hbm_bytes=float(r.uniform(16e9, 192e9)), source="隠しの行", url="", link_source="隠しの行", link_url="")
    if kind == "TPU":
        return Chip(**base, ici_link_oneway=float(r.uniform(3e10, 2e11)), torus_axes=torus_axes,
                    dcn_bw_per_host=float(r.uniform(1e10, 5e10)), chips_per_host=4)
    return Chip(**base, nvlink_oneway=float(r.uniform(2e11, 1e12)), nvlink_domain=8, ib_bw=float(r.uniform(2e10, 1e11)))


def with_values(hw, **values):
    """チップの行の一部の値だけを変えた行（導いた量もその値から）。"""
    return dataclasses.replace(hw, **values)


def number(x, what: str) -> float:
    """学習者が返した値を有限の実数に（数でなければ、何が返ったかを言って不合格）。"""
    if isinstance(x, bool) or x is None:
        raise Fail(f"{what}は数値のはずが、{type(x).__name__} が返りました。")
    try:
        v = float(np.asarray(x))
    except Exception:
        raise Fail(f"{what}は数値のはずが、{type(x).__name__} が返りました。") from None
    if not np.isfinite(v):
        raise Fail(f"{what}が {v} です（有限の数のはずです）。")
    return v
