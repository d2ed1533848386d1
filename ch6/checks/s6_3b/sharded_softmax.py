"""6.3b-4 sharded_softmax: pmax と psum の統計量だけで作る、特徴で分けた softmax。"""
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
    ALL_TO_ALL,
    AXIS,
    GATHER,
    MAXMIN,
    collectives_of,
    exercise_rng,
    expect_no_row_loop,
    forbid,
    gather_message,
    gathered_sizes,
    put,
    run_learner,
    section_mesh,
    wrap,
)

# 6.3b-4 ------------------------------------------------------------------------------
# 必須: 各行の本当の最大値を引いてから exp を取る（値の幅が広い入力でもあふれない）、集団通信は最大値の pmax と
#       和の psum だけ（all_gather・all_to_all なし）、行の Python ループなし。
# 自由: 分母を psum で作って割るか、log-sum-exp を作って exp(x - lse) にするか、keepdims の使い方。

def _softmax(z, axis=-1):
    z = np.asarray(z, np.float64)
    e = np.exp(z - z.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _wide_rows(rng, n, rows, f):
    """値の幅が広い行: ほとんどは 0 前後で、行ごとに 1 つのブロックだけに 300 前後の値が 2 つ。
    行全体の本当の最大値を引かないと exp があふれる（float32 の exp は 88.7 を超えると inf）。
    最大値の平均（pmean）を引くと、2 デバイスでも 300 - 151 ≈ 149 が残ってあふれる。"""
    x = 3.0 * rng.normal(size=(rows, n * f))
    for r in range(rows):
        blk = (r * 5 + 3) % n
        cols = blk * f + rng.permutation(f)[:2]
        x[r, cols] = [300.0, 298.0]  # 和は 1 に近い 2 つの値に分かれる（e^-2 ≈ 0.12 と 0.88）
    return f32(x)


def _offset_rows(rng, n, rows, f):
    """行ごとに高さの違う入力: 行 r の値は -150 から 150 まで等間隔の高さのまわりに散らばる。
    行ごとの最大値を引けばどの行も exp(0) = 1 を含むが、全体の最大値を引くと低い行の exp は float32 で 0 になる。"""
    return np.linspace(-150.0, 150.0, rows)[:, None] + 2.0 * rng.normal(size=(rows, n * f))


@exercise("6.3b-4", "sharded_softmax")
def check_sharded_softmax(fn):
    from jax.sharding import PartitionSpec as P

    n, mesh, rng = n_devices(), section_mesh(), exercise_rng(4)
    rows, f = 6, 3
    # 値が大きいので、最大値を引かないと exp があふれる（float32 は exp(89) で inf）
    x = f32(100.0 + 6.0 * rng.normal(size=(rows, n * f)))
    g = wrap(fn, mesh, P(None, AXIS), P(None, AXIS))
    xs = put(mesh, x, P(None, AXIS))
    got = run_learner(g, xs)

    want = _softmax(x)
    expect_shape(got, want.shape, "sharded_softmax の結果（全体）", "各デバイスは受け取ったシャードと同じ形を返します。")
    g_np = np.asarray(got, np.float64)
    if not np.all(np.isfinite(g_np)):
        raise Fail("入力が 100 前後なので exp があふれ、NaN か inf が出ました。先に全体の最大値（lax.pmax(…, 'x')）を引いてください。")
    blocks = [slice(j * f, (j + 1) * f) for j in range(n)]
    local = np.concatenate([_softmax(x[:, b]) for b in blocks], axis=1)
    if n > 1 and is_close(g_np, local):
        raise Fail("シャードごとに和が 1 なので、各デバイスの中だけで正規化しています。分母の exp の和は lax.psum で足します。")
    if n > 1:
        shifted = np.concatenate([np.exp(x[:, b] - x[:, b].max(1, keepdims=True)) for b in blocks], axis=1)
        if is_close(g_np, shifted / shifted.sum(1, keepdims=True)):
            raise Fail("引いている最大値がデバイスごとに違います。lax.pmax(…, 'x') で全体の最大値にそろえてください。")
    if is_close(g_np, _softmax(x, axis=0)):
        raise Fail("列ごと（axis=0）に正規化しているので、各列の和が 1 です。softmax は行ごとに、"
                   "最大値も exp の和も axis=1 で取ります。")
    expect_close(got, want, "sharded_softmax の結果", rtol=1e-4, atol=1e-6,
                 )

    # 値の幅が広い入力: 数式の上では同じ softmax でも、本当の最大値を引かないとあふれる
    xw = _wide_rows(exercise_rng(24), n, rows, f)
    gw = np.asarray(run_learner(g, put(mesh, xw, P(None, AXIS))), np.float64)
    if not np.all(np.isfinite(gw)):
        raise Fail("行に 1 か所だけ 300 前後の値がある入力で NaN か inf が出たので、m が行全体の本当の最大値ではありません。"
                   "m は lax.pmax(…, 'x') で作ってください。")
    expect_close(gw, _softmax(xw), "値の幅が広い隠し入力での結果", rtol=1e-4, atol=1e-6,
                 hint="m は行全体の最大値（lax.pmax）にします。")

    # 行ごとに高さの違う入力: すべての行をまとめた最大値を引くと、低い行の exp が 0 になって 0 / 0 になる
    xo = f32(_offset_rows(exercise_rng(34), n, rows, f))
    go = np.asarray(run_learner(g, put(mesh, xo, P(None, AXIS))), np.float64)
    if not np.all(np.isfinite(go)) or not is_close(go, _softmax(xo)):
        if not np.all(np.isfinite(go)):
            raise Fail("行ごとに値の大きさが違う入力で NaN か inf が出ました。"
                       "全行をまとめた最大値を引くと値の小さい行が 0 / 0 になるので、最大値は行ごとに（axis=1）取ってください。")
        expect_close(go, _softmax(xo), "行ごとに値の大きさが違う隠し入力での結果", rtol=1e-4, atol=1e-6,
                     hint="最大値は行ごとに（axis=1）取り、lax.pmax で全デバイスにそろえます。")

    prims = jaxpr_primitives(g, xs)
    if prims & GATHER:
        raise Fail(gather_message(
            gathered_sizes(g, xs), rows,
            "all_gather で特徴そのものを集めています。最大値と和だけを pmax / psum すれば、特徴は送らずに済みます。",
            "最大値か和を all_gather で集めています。最大値は lax.pmax、和は lax.psum で 1 回で全デバイスにそろいます。"))
    forbid(prims, ALL_TO_ALL, "all_to_all でデータを並べ替えています。統計量だけを pmax / psum してください。")
    if not prims & PSUM_NAMES:
        raise Fail("jaxpr に psum がありません。分母（exp の和）は lax.psum(…, 'x') で足します。")
    if not prims & MAXMIN:
        raise Fail("jaxpr に pmax がありません。行全体の最大値は lax.pmax(…, 'x') で作ります。")
    counts = collectives_of(g, xs) if n > 1 else {}
    if "all-gather" in counts:
        raise Fail(f"コンパイル結果に all-gather が {counts['all-gather']} 個あります。統計量だけを集めてください。")

    def make(r):
        xr = f32(100.0 + 6.0 * exercise_rng(14).normal(size=(r, n * f)))
        return g, put(mesh, xr, P(None, AXIS))

    expect_no_row_loop(make)
    one = cannot_tell("分母の和を lax.psum で足すか lax.pmean で平均するかの違い") if n == 1 else ""
    return f"{rows} 行 × {n * f} 特徴（値は 100 前後と、幅の広い 0〜300）で一致し、統計量だけを送っています{one}。"
