"""6.3b-5 rs_matmul_bias: reduce-scatter 1 回の行列積と、自分の列のバイアス。"""
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
from ...show import collectives_line
from .common import (
    AXIS,
    GATHER,
    SCATTER,
    collectives_of,
    exercise_rng,
    forbid,
    put,
    run_learner,
    section_mesh,
    wrap,
)

# 6.3b-5 ------------------------------------------------------------------------------
# 必須: 通信は reduce-scatter（psum_scatter）1 回だけ（psum・all_gather なし）、b は結果に 1 回分だけ入る。
# 自由: b の足し方（通信の後で受け持つ列の分を切り出す: dynamic_slice_in_dim、reshape して axis_index で選ぶ …、
#       または通信の前の部分積に b / n を足す: 値は同じで通信も同じなので正解）、@ か einsum か。

@exercise("6.3b-5", "rs_matmul_bias")
def check_rs_matmul_bias(fn):
    from jax.sharding import PartitionSpec as P

    n, mesh, rng = n_devices(), section_mesh(), exercise_rng(5)
    rows, d_per, f_per = 2 * n, 3, 2
    x = f32(rng.normal(size=(rows, n * d_per)))
    w = f32(rng.normal(size=(n * d_per, n * f_per)))
    b = f32(rng.normal(size=(n * f_per,)) * 3.0)
    specs = (P(None, AXIS), P(AXIS, None), P())
    g = wrap(fn, mesh, specs, P(None, AXIS))
    args = tuple(put(mesh, a, s) for a, s in zip((x, w, b), specs))
    got = run_learner(g, *args)

    want = x @ w + b
    shape = tuple(getattr(got, "shape", ()) or ())
    if n > 1 and shape == (rows // n, n * want.shape[1]):
        raise Fail(f"出力の形が {shape} で、行（0 軸）で分割されています。特徴（1 軸）で分割するので scatter_dimension=1 です。")
    expect_shape(got, want.shape, "rs_matmul_bias の結果（全体）",
                 f"各デバイスは ({rows}, {f_per}) の列のシャードを返します。")
    if n > 1 and is_close(got, x @ w + n * b):
        raise Fail(f"通信の前の部分積に b を足したので、バイアスが {n} 回足されています。b は通信の後で足してください。")
    if n > 1 and is_close(got, x @ w + np.tile(b[:f_per], n)):
        raise Fail("どのデバイスも b の先頭の部分を足しています。そのデバイスの列の部分を lax.axis_index('x') から切り出してください。")
    if is_close(got, x @ w) and not is_close(got, want):
        raise Fail("バイアス b が足されていません。")
    expect_close(got, want, "rs_matmul_bias の結果", rtol=1e-4, atol=1e-4,
                 )

    prims = jaxpr_primitives(g, *args)
    forbid(prims, GATHER, "all_gather を使っています。何も集めずに、部分積の reduce-scatter だけで作れます。")
    forbid(prims, PSUM_NAMES, "psum で全体を足してから切り出したので、通信量が reduce-scatter の倍ほどです。lax.psum_scatter を使ってください。")
    if not prims & SCATTER:
        raise Fail("jaxpr に reduce_scatter がありません。部分積は lax.psum_scatter(…, 'x', tiled=True) で足して配ります。")
    counts = collectives_of(g, *args) if n > 1 else {}
    extra = sorted(set(counts) & {"all-gather", "all-reduce", "all-to-all"})
    if extra:
        raise Fail(f"コンパイル結果に {', '.join(extra)} があります（{collectives_line(counts)}）。"
                   "通信は reduce-scatter 1 回だけにしてください。")
    detail = f"HLO の集団通信は {collectives_line(counts)}" if counts else "jaxpr の集団通信は reduce_scatter だけ"
    one = cannot_tell("b の切り出し方と足す回数の誤り") if n == 1 else ""
    sep = " " if detail[-1].isascii() else ""
    return f"隠し入力 x {x.shape}、w {w.shape}、b {b.shape} で一致し、{detail}{sep}です{one}。"
