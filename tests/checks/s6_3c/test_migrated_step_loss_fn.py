"""6.3c-1: 引数 loss_fn を使わず、ノートブックの損失を直接呼ぶステップは落ちる（issue 22 の 4）。"""
import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

from tests.checkhelp import expect

AX = ("host", "local")  # 採点のメッシュの軸
SPECS = dict(in_specs=(P(), P(AX), P(AX)), out_specs=P())


def logistic_loss(params, x, y):
    # ノートブックの損失（L2 なし）
    z = x @ params["w"] + params["b"]
    return jnp.mean(jnp.logaddexp(0.0, z) - y * z)


def _body(loss, lr):
    def body(params, x, y):
        value, grads = jax.value_and_grad(lambda p: lax.pmean(loss(p, x, y), AX))(params)
        return jax.tree.map(lambda p, g: p - lr * g, params, grads), value
    return body


def make_ignores_loss_fn(mesh, loss_fn, lr):
    return jax.jit(jax.shard_map(_body(logistic_loss, lr), mesh=mesh, **SPECS))


def make_ignores_loss_fn_per_call(mesh, loss_fn, lr):
    # loss_fn を使わず、しかも呼ぶたびに作り直す: 以前は「トレースし直しませんでした」と誤って褒めていた
    def step(params, x, y):
        return make_ignores_loss_fn(mesh, loss_fn, lr)(params, x, y)
    return step


def test_a_step_that_ignores_loss_fn_is_named():
    expect("6.3c-1", make_ignores_loss_fn, "fail", "loss_fn が使われていません", "logistic_loss")


def test_ignoring_loss_fn_and_rebuilding_is_not_praised():
    expect("6.3c-1", make_ignores_loss_fn_per_call, "fail", "loss_fn が使われていません")
