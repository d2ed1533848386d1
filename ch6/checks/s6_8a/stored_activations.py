"""6.8a-2 peak_activations: スケジュールの表から、ステージごとに持っておく活性化の数の最大を数える。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, call, exercise, fmt, n_devices
from .common import exercise_rng, gpipe_order, one_f_one_b_order, peak_stored, simulate, warmup_order


def _as_counts(got, n_stages: int, what: str) -> list[int]:
    """学習者の返り値を、ステージごとの整数の列にする（違えば何が返ったかを言って不合格）。"""
    if isinstance(got, (bool, np.bool_)) or isinstance(got, (int, np.integer)):
        raise Fail(f"{what}: ステージごとの数の列（長さ {n_stages}）のはずですが、整数 1 つ（{got}）が返りました。"
                   "全ステージの最大ではなく、ステージごとに数えて並べましょう。")
    try:
        arr = np.asarray(got)
    except Exception:
        raise Fail(f"{what}: ステージごとの数の列のはずですが、{type(got).__name__} が返りました。") from None
    if arr.dtype == object or arr.ndim != 1:
        raise Fail(f"{what}: 長さ {n_stages} の整数の列のはずですが、形 {fmt(tuple(arr.shape))} の"
                   f" {type(got).__name__} が返りました。")
    if len(arr) != n_stages:
        raise Fail(f"{what}: 長さ {n_stages}（ステージの数）の列のはずですが、長さ {len(arr)} が返りました。"
                   "表の 1 行が 1 ステージです。")
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)) or arr.dtype == np.bool_:
        raise Fail(f"{what}: 整数の列のはずですが、要素の型が {arr.dtype} です。")
    if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr) & (arr == np.round(arr))):
        raise Fail(f"{what}: 活性化の数は整数のはずですが、{fmt(tuple(float(v) for v in arr[:4]))} … が返りました。")
    return [int(v) for v in arr]


def _forward_counts(table) -> list[int]:
    return [sum(e.startswith("F") for e in row) for row in table]


def _final_counts(table) -> list[int]:
    """表の最後のティックの後に持っている数（途中の最大ではない。すべて逆伝播が済めば 0）。"""
    return [sum(e.startswith("F") for e in row) - sum(e.startswith("B") for e in row) for row in table]


def _busy_counts(table) -> list[int]:
    return [sum(bool(e) for e in row) for row in table]


@exercise("6.8a-2", "peak_activations")
def check_peak_activations(fn):
    rng = exercise_rng(2)
    n = max(3, min(6, n_devices()))  # 1 デバイスでも 3 ステージ以上の表で確かめる
    m = 11  # 2 桁の番号（"F10"）も出てくる
    warm = sorted((int(w) for w in rng.integers(0, m, size=n)), reverse=True)
    cases = [("GPipe", simulate(gpipe_order(n, m))),
             ("1F1B", simulate(one_f_one_b_order(n, m))),
             (f"順伝播を先に {warm} 個ずつ", simulate(warmup_order(m, warm)))]
    for name, table in cases:
        want = peak_stored(table)
        what = f"{name} の表（{n} ステージ × {len(table[0])} ティック、M = {m}）"
        got = _as_counts(call(fn, [list(row) for row in table]), n, what)
        if got == want:
            continue
        if got == _forward_counts(table) and want != got:
            raise Fail(f"{what}: 期待 {want}、実際 {got}（各ステージの順伝播の数）。"
                       "逆伝播 B m が済んだマイクロバッチの活性化は捨てられるので、そこで 1 減らします。")
        if got == [max(want)] * n and want != got:
            raise Fail(f"{what}: 期待 {want}、実際 {got}（全ステージで同じ最大値）。ステージごとに別々に数えましょう。")
        if got == _final_counts(table):
            raise Fail(f"{what}: 期待 {want}、実際 {got}（表の最後に持っている数）。"
                       "ティックを進めながら持っている数を数え、その途中の最大を返します。")
        if got == _busy_counts(table):
            raise Fail(f"{what}: 期待 {want}、実際 {got}（空きでないマスの数）。順伝播で 1 増え、逆伝播で 1 減ります。")
        if got == [w - 1 for w in want]:
            raise Fail(f"{what}: 期待 {want}、実際 {got}（どのステージも 1 少ない）。"
                       "順伝播のティックで数を増やしてから最大を更新しましょう。")
        raise Fail(f"{what}: 期待 {want}、実際 {got}。"
                   "各ステージの行を左から読み、F で 1 増やして最大を更新し、B で 1 減らします（空き \"\" は何もしない）。")
    return (f"隠しの {n} ステージ × M = {m} の 3 つの表（GPipe、1F1B、順伝播を先に {warm} 個ずつ）で一致しました"
            f"（1F1B は {peak_stored(cases[1][1])}、GPipe はどのステージも {m}）。")

