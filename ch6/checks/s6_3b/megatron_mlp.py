"""6.3b-3 megatron_mlp: 列と行で分けた重みの MLP（部分積の psum 1 回）。"""
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
    collectives_of,
    exercise_rng,
    expect_no_row_loop,
    forbid,
    need_callable,
    put,
    run_learner,
    section_mesh,
    without_vma_check,
)

# 6.3b-3 ------------------------------------------------------------------------------
# Megatron 式の MLP（1 層目は列、2 層目は行で分けた重み）にバイアスを足す。
# 必須: jax.shard_map を自分で呼ぶ、x と w1・w2 を集めない（all_gather なし）、通信は部分積の psum 1 回だけ、
#       結果は全デバイスに複製（out_specs=P()）、check_vma を切らない、行の Python ループなし。
# 自由: in_specs を書くか省くか（Explicit のメッシュでは入力の型から決まる）、@ か einsum か、
#       jax.nn.relu か jnp.maximum(…, 0) か、b2 を psum の後で 1 回足すか、b2 / n を各部分積に足してから psum するか。

def _mlp_data(rng, n, rows, d=5, h_per=3, f=4):
    x = f32(rng.normal(size=(rows, d)))
    w1 = f32(rng.normal(size=(d, n * h_per)))
    b1 = f32(rng.normal(size=(n * h_per,)))  # 1 層目の出力の約半分が負（ReLU が効く）
    w2 = f32(rng.normal(size=(n * h_per, f)))
    b2 = f32(3.0 + rng.normal(size=(f,)))  # 大きめ（n 回足すと見える）
    return x, w1, b1, w2, b2


def _relu(a):
    return np.maximum(a, 0.0)


@exercise("6.3b-3", "megatron_mlp")
def check_megatron_mlp(fn):
    import jax
    from jax.sharding import PartitionSpec as P

    n, mesh, rng = n_devices(), section_mesh(), exercise_rng(3)
    rows, h_per = 4, 3
    data = _mlp_data(rng, n, rows, h_per=h_per)
    x, w1, b1, w2, b2 = data
    specs = (P(), P(None, AXIS), P(AXIS), P(AXIS, None), P())
    need_callable(fn)
    g = jax.jit(lambda *a: fn(*a, mesh))
    args = tuple(put(mesh, a, s) for a, s in zip(data, specs))
    got = run_learner(g, *args, replicated_hint="部分積を lax.psum(…, 'x') で足し合わせてから返してください。",
               loose=without_vma_check(lambda *a: fn(*a, mesh)),
               spec_hint="x と b2 は P()、w1 は P(None, 'x')、b1 は P('x')、w2 は P('x', None) で渡しています。")

    pre = x @ w1 + b1
    want = _relu(pre) @ w2 + b2
    shape = tuple(getattr(got, "shape", ()) or ())
    if n > 1 and shape == (n * rows, want.shape[1]):
        raise Fail(f"出力の形が {shape} で、各デバイスの部分積が縦に並んでいます。部分積は psum して out_specs=P() で返します。")
    expect_shape(got, want.shape, "megatron_mlp(x, w1, b1, w2, b2, mesh) の結果")
    cols = slice(0, h_per)
    if n > 1 and (is_close(got, _relu(pre[:, cols]) @ w2[cols] + b2) or is_close(got, _relu(pre[:, cols]) @ w2[cols])):
        raise Fail("デバイス 0 の部分積だけが返っているので、部分積が足し合わされていません。lax.psum で全デバイス分足してください。")
    if n > 1 and is_close(got, _relu(pre) @ w2 + n * b2):
        raise Fail(f"psum の前に b2 を足したので、b2 が {n} 回足されています。b2 は psum の後で 1 回だけ足してください。")
    if is_close(got, _relu(pre) @ w2) and not is_close(got, want):
        raise Fail("バイアス b2 が足されていません。")
    if is_close(got, _relu(x @ w1) @ w2 + b2) and not is_close(got, want):
        raise Fail("バイアス b1 が足されていません。b1 は w1 の列と同じく分割されているので、各デバイスで ReLU の前に足します。")
    if is_close(got, pre @ w2 + b2) and not is_close(got, want):
        raise Fail("ReLU が適用されていません。1 層目の出力に jax.nn.relu を適用してから w2 との積を取ります。")
    if is_close(got, _relu(pre @ w2 + b2)) or is_close(got, _relu(pre @ w2) + b2):
        raise Fail("ReLU を psum の後（2 層目の出力）に適用しています。列で分割された 1 層目の出力 h に、通信なしで適用します。")
    expect_close(got, want, "megatron_mlp(x, w1, b1, w2, b2, mesh) の結果", rtol=1e-4, atol=1e-4,
                 )
    sharding = getattr(got, "sharding", None)
    if sharding is not None and not sharding.is_fully_replicated:
        raise Fail(f"結果の spec が {getattr(sharding, 'spec', sharding)} で、全デバイスに複製されていません。out_specs=P() で返してください。")

    prims = jaxpr_primitives(g, *args)
    if "shard_map" not in prims:
        raise Fail("jaxpr に shard_map がありません。jax.shard_map の中で部分積を作って psum してください。")
    forbid(prims, GATHER, "all_gather で重みか入力を集めています。列で分割した w1 と行で分割した w2 なら、部分積の psum だけで済みます。")
    if not prims & PSUM_NAMES:
        raise Fail("jaxpr に psum がありません。部分積は lax.psum(…, 'x') で足し合わせます。")
    counts = collectives_of(g, *args) if n > 1 else {}
    extra = sorted(set(counts) - {"all-reduce"})
    if extra or counts.get("all-reduce", 0) > 1:
        raise Fail(f"コンパイル結果の集団通信が {collectives_line(counts)} です。必要なのは部分積を足す all-reduce 1 回だけです。")

    def make(r):
        d = _mlp_data(exercise_rng(13), n, r, h_per=h_per)
        return (g,) + tuple(put(mesh, a, s) for a, s in zip(d, specs))

    expect_no_row_loop(make)
    detail = f"HLO の集団通信は {collectives_line(counts)} だけ" if counts else "jaxpr の集団通信は psum だけ"
    one = cannot_tell("psum の前に b2 を足す誤り") if n == 1 else ""
    return f"隠し入力 x {x.shape}、w1 {w1.shape}、w2 {w2.shape} で一致し、結果は複製、{detail}です{one}。"
