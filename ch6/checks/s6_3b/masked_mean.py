"""6.3b-1 masked_mean: 有効な行だけの平均を psum で。"""
from __future__ import annotations

import numpy as np

from ...checking import (
    PSUM_NAMES,
    Fail,
    cannot_tell,
    exercise,
    expect_close,
    expect_shape,
    f32,
    is_close,
    jaxpr_primitives,
    n_devices,
)
from .common import (
    AXIS,
    GATHER,
    exercise_rng,
    expect_no_row_loop,
    forbid,
    put,
    run_learner,
    section_mesh,
    wrap,
)

# 6.3b-1 ------------------------------------------------------------------------------
# 必須: 集団通信は psum（pmean も可）だけ、all_gather なし、行の Python ループなし、結果は全デバイスで同じ値。
# 自由: 和と個数を 1 回の psum にまとめるか 2 回か、mask @ x か sum(x * mask)。

def _mean_data(rng, n, rows, k=3):
    x = f32(rng.normal(size=(n * rows, k)) + 2.0)
    mask = np.zeros(n * rows, np.float32)
    for d in range(n):  # デバイスごとに有効な行の数を変える（1, 2, …, rows, 1, 2, …）
        keep = rng.permutation(rows)[: d % rows + 1]
        mask[d * rows + keep] = 1.0
    return x, mask


@exercise("6.3b-1", "masked_mean")
def check_masked_mean(fn):
    from jax.sharding import PartitionSpec as P

    n, mesh, rows, k, rng = n_devices(), section_mesh(), 6, 3, exercise_rng(1)
    x, mask = _mean_data(rng, n, rows, k)
    specs = (P(AXIS, None), P(AXIS))
    g = wrap(fn, mesh, specs, P())
    args = (put(mesh, x, specs[0]), put(mesh, mask, specs[1]))
    got = run_learner(g, *args, replicated_hint="有効な行の和と個数を、どちらも lax.psum で全デバイス分にしてください。",
                      loose=wrap(fn, mesh, specs, P(), check_vma=False))

    want = (x * mask[:, None]).sum(0) / mask.sum()
    blocks = [slice(d * rows, (d + 1) * rows) for d in range(n)]
    local = [(x[b] * mask[b, None]).sum(0) / mask[b].sum() for b in blocks]
    expect_shape(got, want.shape, "masked_mean の結果", "列ごとの平均 (k,) を返します。")
    if n > 1 and is_close(got, np.mean(local, 0)) and not is_close(got, want):
        raise Fail("有効な行の数がデバイスごとに違うのに、デバイスごとの平均をさらに平均しています。和と個数をそれぞれ psum してから割ってください。")
    if is_close(got, (x * mask[:, None]).sum(0) / len(mask)) and not is_close(got, want):
        raise Fail(f"有効な行の和を、すべての行の数 {len(mask)} で割っています。割るのは mask の和（有効な行の数）の psum です。")
    if is_close(got, x.mean(0)) and not is_close(got, want):
        raise Fail("mask が使われず、すべての行の平均になっています。mask が 1 の行だけを足し、個数も mask の和にします。")
    expect_close(got, want, "masked_mean の結果",
                 )

    prims = jaxpr_primitives(g, *args)
    forbid(prims, GATHER, "all_gather でデータを集めています。局所的な和と個数だけを psum すれば、データ本体は送らずに済みます。")
    if not prims & PSUM_NAMES:
        raise Fail("jaxpr に psum がありません。局所的な和と個数を lax.psum(…, 'x') で足してください。")

    def make(r):
        xr, mr = _mean_data(exercise_rng(11), n, r, k)
        return g, put(mesh, xr, specs[0]), put(mesh, mr, specs[1])

    expect_no_row_loop(make)
    one = cannot_tell("デバイスごとの平均を平均する誤り") if n == 1 else ""
    return f"デバイス {n} 個 × {rows} 行（有効な行の数はデバイスごとに違う）で一致し、和と個数を psum しています{one}。"
