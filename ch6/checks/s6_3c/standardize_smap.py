"""6.3c-2 standardize_smap: pmap の標準化を jax.smap に移す（全デバイスの統計量、z は行で分割したまま）。"""
from __future__ import annotations

import numpy as np

from ...checking import (
    PSUM_NAMES,
    Fail,
    call,
    cannot_tell,
    exercise,
    expect_close,
    expect_shape,
    f32,
    is_close,
    n_devices,
)
from .common import MESH_AXIS, exercise_rng, learner_eqns, pair, shard_map_axes

# 6.3c-2 ------------------------------------------------------------------------------

HIDDEN_EPS = 0.2  # 6.3c-2 の採点で渡す eps（分散の小さい列で効く大きさ）


def _standardize_np(x, eps, n):
    """正解と、よくある誤りの値（全体の統計量・デバイスごとの統計量・eps なし・各デバイスの分散の平均）。"""
    x = x.astype(np.float64)
    mean = x.mean(axis=0)
    var = ((x - mean) ** 2).mean(axis=0)
    blocks = x.reshape(n, -1, x.shape[1])
    lmean = blocks.mean(axis=1, keepdims=True)
    lvar = ((blocks - lmean) ** 2).mean(axis=1, keepdims=True)
    return {
        "want": ((x - mean) / np.sqrt(var + eps), mean),
        "local": ((blocks - lmean) / np.sqrt(lvar + eps)).reshape(x.shape),
        "no_eps": (x - mean) / np.sqrt(var),
        "mean_of_local_var": (x - mean) / np.sqrt(lvar.mean(axis=0)[0] + eps),
        # 平均は pmean したが、分散（全体の mean からのずれの 2 乗）は各デバイスの中だけで平均した
        "local_var": ((blocks - mean) / np.sqrt(((blocks - mean) ** 2).mean(axis=1, keepdims=True) + eps)).reshape(x.shape),
    }


def _standardize_input(rng, n, per, d):
    # デバイス i の行は平均が 3i ずれる（自分の統計量だけだと結果が変わる）。列 2 は分散が小さい（eps が効く）
    x = rng.normal(size=(n, per, d)) * np.array([1.0, 2.0, 0.05])
    x = x + 3.0 * np.arange(n)[:, None, None] * np.array([1.0, -0.5, 0.02])
    return f32(x.reshape(n * per, d))


@exercise("6.3c-2", "standardize_smap")
def check_standardize_smap(fn):
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    n = n_devices()
    rng = exercise_rng(2)
    per, d = 5, 3
    mesh = jax.make_mesh((n,), (MESH_AXIS,))
    x = _standardize_input(rng, n, per, d)
    xg = jax.device_put(x, NamedSharding(mesh, P(MESH_AXIS)))
    ref = _standardize_np(x, HIDDEN_EPS, n)
    (want_z, want_mean) = ref["want"]

    with jax.set_mesh(mesh):
        out = call(fn, xg, HIDDEN_EPS)
        z, mean = pair(out, "standardize_smap(x, eps) は (z, mean) ")
        if getattr(z, "shape", None) == (n, per, d) and n > 1:
            raise Fail(f"z の形が {(n, per, d)} で、pmap のようにデバイスごとに積み重なっています。"
                       "smap の out_axes=0 はシャードを 0 軸目につなげ、形 (N, d) で返します。")
        expect_shape(z, (n * per, d), "z（1 つ目の戻り値）", "入力 x と同じ形で返します。")
        mshape = getattr(mean, "shape", None)
        if n > 1 and mshape == (n * d,):
            raise Fail(f"mean の形が {(n * d,)} で、各デバイスの平均が out_axes=0 でつながっています。"
                       "全デバイスで同じ値は out_axes=None で、形 (d,) で返します。")
        if n > 1 and mshape == (n, d):
            raise Fail(f"mean の形が {(n, d)} で、デバイスごとに積み重なっています。"
                       "全デバイスで同じ値は out_axes=None で、形 (d,) で返します。")
        expect_close(mean, want_mean, "mean（全データの列ごとの平均）",
                     )
        if n > 1 and is_close(z, ref["local"], rtol=1e-3, atol=1e-4):
            raise Fail("z を各デバイスの中だけの平均と分散で標準化しています。分散も lax.pmean で全デバイスの平均にします。")
        if is_close(z, ref["no_eps"], rtol=1e-3, atol=1e-4):
            raise Fail("z の分母に eps が入っていません。jnp.sqrt(var + eps) で割ってください。")
        if n > 1 and is_close(z, ref["local_var"], rtol=1e-3, atol=1e-4):
            raise Fail("平均は全デバイスのものですが、分散が各デバイスの中だけの平均です。分散も lax.pmean で全デバイスの平均にします。")
        if n > 1 and is_close(z, ref["mean_of_local_var"], rtol=1e-3, atol=1e-4):
            raise Fail("分散が、各デバイスの中の平均からのずれで計算されています。全体の mean からのずれの 2 乗を pmean してください。")
        expect_close(z, want_z, "z（1 つ目の戻り値）", rtol=1e-3, atol=1e-4,
                     )

        z_ok = isinstance(getattr(z, "sharding", None), jax.sharding.Sharding) and \
            z.sharding.is_equivalent_to(NamedSharding(mesh, P(MESH_AXIS)), 2)
        if not z_ok:
            got = getattr(getattr(z, "sharding", None), "spec", type(z).__name__)
            raise Fail(f"z のシャーディングが {got} で、行が軸 'data' で分割されていません。smap の out_axes=0 で返してください。")
        m_ok = isinstance(getattr(mean, "sharding", None), jax.sharding.Sharding) and \
            mean.sharding.is_equivalent_to(NamedSharding(mesh, P()), 1)
        if not m_ok:
            got = getattr(getattr(mean, "sharding", None), "spec", type(mean).__name__)
            raise Fail(f"mean のシャーディングが {got} で、全デバイスに複製されていません。smap の out_axes=None で返してください。")

        eqns = learner_eqns(lambda a: fn(a, HIDDEN_EPS), xg)
    prims = {e.primitive.name for e in eqns}
    if not any(MESH_AXIS in m for m in shard_map_axes(eqns)):
        raise Fail("値は合っていますが、jaxpr に軸 'data' の shard_map がありません。pmap の本体を jax.smap で移してください。")
    if prims & {"all_gather", "all_gather_invariant"}:  # all_gather(…, to="invarying") は all_gather_invariant
        raise Fail("jaxpr に all_gather があります。データも統計量も集めずに、列ごとの平均と分散を lax.pmean で平均してください。")
    if not prims & PSUM_NAMES:
        raise Fail("jaxpr にデバイス間の平均（pmean）がありません。lax.pmean で全デバイスの統計量を求めます。")
    # 1 個では pmean・psum・平均なしが同じ値で、out_axes=0 の mean も形 (d,) の 1 つのシャード
    alone = cannot_tell("全デバイスでの平均と mean の複製") if n == 1 else ""
    return f"デバイス {n} 個 × {per} 行と eps={HIDDEN_EPS} で一致し、z は分割、mean は複製で返っています{alone}。"
