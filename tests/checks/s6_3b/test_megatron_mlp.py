"""6.3b-3 megatron_mlp のチェック（ch6/checks/s6_3b/megatron_mlp.py）のテスト。"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

from tests.checkhelp import N, multi, not_done
from tests.checks.s6_3b.common import assert_fail, assert_pass, run

SPECS3 = (P(), P(None, "x"), P("x"), P("x", None), P())


def megatron_mlp(x, w1, b1, w2, b2, mesh):
    def local(x, w1b, b1b, w2b, b2):
        h = jax.nn.relu(x @ w1b + b1b)
        return lax.psum(h @ w2b, "x") + b2

    return jax.shard_map(local, mesh=mesh, in_specs=SPECS3, out_specs=P())(x, w1, b1, w2, b2)


def megatron_mlp_inferred(x, w1, b1, w2, b2, mesh):
    # Explicit メッシュでは in_specs を省くと入力の型から決まる。einsum と maximum、b2 / n を先に足す書き方
    @jax.shard_map(mesh=mesh, out_specs=P())
    def local(x, w1b, b1b, w2b, b2):
        h = jnp.maximum(jnp.einsum("bd,dh->bh", x, w1b) + b1b, 0.0)
        return lax.psum(jnp.einsum("bh,hf->bf", h, w2b) + b2 / lax.axis_size("x"), "x")

    return local(x, w1, b1, w2, b2)


def _mlp3(body, **kw):
    def answer(x, w1, b1, w2, b2, mesh):
        return jax.shard_map(body, mesh=mesh, in_specs=kw.get("in_specs", SPECS3),
                             out_specs=kw.get("out_specs", P()), **kw.get("extra", {}))(x, w1, b1, w2, b2)
    return answer


mlp_concat = _mlp3(lambda x, a, c, b, d: jax.nn.relu(x @ a + c) @ b + d, out_specs=P("x", None))


mlp_no_check = _mlp3(lambda x, a, c, b, d: jax.nn.relu(x @ a + c) @ b + d, extra={"check_vma": False})


mlp_b2_before = _mlp3(lambda x, a, c, b, d: lax.psum(jax.nn.relu(x @ a + c) @ b + d, "x"))


mlp_no_b1 = _mlp3(lambda x, a, c, b, d: lax.psum(jax.nn.relu(x @ a) @ b, "x") + d)


mlp_no_b2 = _mlp3(lambda x, a, c, b, d: lax.psum(jax.nn.relu(x @ a + c) @ b, "x"))


mlp_no_relu = _mlp3(lambda x, a, c, b, d: lax.psum((x @ a + c) @ b, "x") + d)


mlp_relu_after = _mlp3(lambda x, a, c, b, d: jax.nn.relu(lax.psum((x @ a + c) @ b, "x") + d))


mlp_gather = _mlp3(lambda x, a, c, b, d: jax.nn.relu(x @ lax.all_gather(a, "x", axis=1, tiled=True)
                                                     + lax.all_gather(c, "x", tiled=True))
                   @ lax.all_gather(b, "x", tiled=True) + d)


mlp_b1_replicated_spec = _mlp3(lambda x, a, c, b, d: lax.psum(jax.nn.relu(x @ a + c) @ b, "x") + d,
                               in_specs=(P(), P(None, "x"), P(), P("x", None), P()))


mlp_list_specs = _mlp3(lambda x, a, c, b, d: lax.psum(jax.nn.relu(x @ a + c) @ b, "x") + d,
                       in_specs=[P(), P(None, "x"), P("x"), P("x", None), P()])


def mlp_no_shard_map(x, w1, b1, w2, b2, mesh):
    h = jax.nn.relu(x @ w1 + b1)
    return jnp.matmul(h, w2, out_sharding=jax.NamedSharding(mesh, P())) + b2


def mlp_loop(x, w1, b1, w2, b2, mesh):
    def local(x, a, c, b, d):
        rows = [jax.nn.relu(x[i] @ a + c) @ b for i in range(x.shape[0])]
        return lax.psum(jnp.stack(rows), "x") + d

    return jax.shard_map(local, mesh=mesh, in_specs=SPECS3, out_specs=P())(x, w1, b1, w2, b2)


def test_megatron_right():
    assert_pass(run("6.3b-3", megatron_mlp))
    assert_pass(run("6.3b-3", megatron_mlp_inferred))


def test_megatron_wrong():
    assert_fail(run("6.3b-3", mlp_gather), "all_gather")
    assert_fail(run("6.3b-3", mlp_no_shard_map), "shard_map")
    assert_fail(run("6.3b-3", mlp_loop), "ループ")
    assert_fail(run("6.3b-3", mlp_no_b1), "b1")
    assert_fail(run("6.3b-3", mlp_no_b2), "b2")
    assert_fail(run("6.3b-3", mlp_no_relu), "ReLU")
    assert_fail(run("6.3b-3", mlp_relu_after), "ReLU", "psum の後")
    assert_fail(run("6.3b-3", not_done), status="not_done")


@multi
def test_megatron_wrong_multi():
    assert_fail(run("6.3b-3", mlp_concat), "部分積", "psum")
    assert_fail(run("6.3b-3", mlp_no_check), "デバイス 0", "足し合わされていません")
    assert_fail(run("6.3b-3", mlp_b2_before), f"{N} 回", "b2")
    assert_fail(run("6.3b-3", mlp_b1_replicated_spec), "in_specs", "P('x')")


def test_megatron_list_in_specs_is_explained():
    # in_specs をリストで書くと JAX は pytree の構造エラーを出す: 直し方（タプル）を 1 行で言う
    assert_fail(run("6.3b-3", mlp_list_specs), "リスト", "タプル")
