"""6.3b-1 masked_mean: 有効な行だけの平均を psum で。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, exercise, expect_close, expect_shape, f32 as _f32, jaxpr_primitives, n_devices as _n
from ._common import AXIS, GATHER, PSUM, _close, _expect_no_row_loop, _forbid, _mesh, _put, _rng, _run, _wrap


# 6.3b-1 ------------------------------------------------------------------------------
# 必須: 集団通信は psum（pmean も可）だけ、all_gather なし、行の Python ループなし、結果は全デバイスで同じ値。
# 自由: 和と個数を 1 回の psum にまとめるか 2 回か、mask @ x か sum(x * mask)。

def _mean_data(rng, n, rows, k=3):
    x = _f32(rng.normal(size=(n * rows, k)) + 2.0)
    mask = np.zeros(n * rows, np.float32)
    for d in range(n):  # デバイスごとに有効な行の数を変える（1, 2, …, rows, 1, 2, …）
        keep = rng.permutation(rows)[: d % rows + 1]
        mask[d * rows + keep] = 1.0
    return x, mask


@exercise("6.3b-1", "masked_mean")
def check_masked_mean(fn):
    from jax.sharding import PartitionSpec as P

    n, mesh, rows, k, rng = _n(), _mesh(), 6, 3, _rng(1)
    x, mask = _mean_data(rng, n, rows, k)
    specs = (P(AXIS, None), P(AXIS))
    g = _wrap(fn, mesh, specs, P())
    args = (_put(mesh, x, specs[0]), _put(mesh, mask, specs[1]))
    got = _run(g, *args, replicated_hint="psum で全デバイスの和を取ると、全員が同じ値を持ちます。")

    want = (x * mask[:, None]).sum(0) / mask.sum()
    blocks = [slice(d * rows, (d + 1) * rows) for d in range(n)]
    local = [(x[b] * mask[b, None]).sum(0) / mask[b].sum() for b in blocks]
    expect_shape(got, want.shape, "masked_mean の結果", "列ごとの平均 (k,) を返します。")
    if n > 1 and _close(got, np.mean(local, 0)) and not _close(got, want):
        raise Fail("デバイスごとの平均をさらに平均しています（平均の平均）。有効な行の数はデバイスごとに違うので、"
                   "局所的な「和」と「個数」をそれぞれ psum してから、最後に割りましょう。")
    if _close(got, x.mean(0)) and not _close(got, want):
        raise Fail("mask を無視して全部の行の平均を取っています。mask が 1 の行だけを足し、個数も mask の和にします。")
    expect_close(got, want, "masked_mean の結果",
                 hint="和 = psum(sum(x * mask[:, None], 0))、個数 = psum(sum(mask)) として 和 / 個数 です。")

    prims = jaxpr_primitives(g, *args)
    _forbid(prims, GATHER, "all_gather で集めています。この問題の集団通信は psum です。局所的な和と個数（小さな値）だけを "
                           "psum すれば、データ本体も各デバイスの値の一覧も送らずに済みます。")
    if not prims & PSUM:
        raise Fail("jaxpr に psum が見つかりません。局所的な和と個数を lax.psum(…, 'x') で全デバイス分足しましょう。")

    def make(r):
        xr, mr = _mean_data(_rng(11), n, r, k)
        return g, _put(mesh, xr, specs[0]), _put(mesh, mr, specs[1])

    _expect_no_row_loop(make)
    return f"隠し入力（{n} デバイス × {rows} 行、有効な行の数はデバイスごとに違う）で一致し、psum で和と個数を集めています。"
