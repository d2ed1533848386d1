"""6.3c-1: 勾配を返す・符号が逆・pmax は、それぞれの言葉で落ちる（issue 22 の 4）。"""
import jax
from jax import lax
from jax.sharding import PartitionSpec as P

from tests.checkhelp import expect

N = jax.device_count()
AX = ("host", "local")  # 採点のメッシュの軸
SPECS = dict(in_specs=(P(), P(AX), P(AX)), out_specs=P())


def _factory(update, reduce_loss=lambda v: lax.pmean(v, AX), **kw):
    def make(mesh, loss_fn, lr):
        def body(params, x, y):
            loss, grads = jax.value_and_grad(lambda p: reduce_loss(loss_fn(p, x, y)))(params)
            return update(params, grads, lr), loss
        return jax.jit(jax.shard_map(body, mesh=mesh, **SPECS, **kw))
    return make


def make_pmax_grads(mesh, loss_fn, lr):
    def body(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        grads = lax.pmax(grads, AX)
        return jax.tree.map(lambda p, g: p - lr * g, params, grads), lax.pmean(loss, AX)
    return jax.jit(jax.shard_map(body, mesh=mesh, check_vma=False, **SPECS))


def test_returning_the_gradients_is_named():
    expect("6.3c-1", _factory(lambda p, g, lr: g), "fail", "1 回目", "勾配と一致", "params - lr * grads")


def test_the_wrong_sign_is_named():
    expect("6.3c-1", _factory(lambda p, g, lr: jax.tree.map(lambda a, b: a + lr * b, p, g)), "fail",
           "符号が逆", "params + lr * grads")


def test_pmax_of_the_loss_gets_a_japanese_reason():
    make = _factory(lambda p, g, lr: jax.tree.map(lambda a, b: a - lr * b, p, g), lambda v: lax.pmax(v, AX))
    expect("6.3c-1", make, "fail", "lax.pmax", "微分できません", "lax.pmean")


def test_pmax_of_the_gradients_is_named():
    if N == 1:
        expect("6.3c-1", make_pmax_grads, "pass")  # 1 デバイスでは最大と平均が同じ
        return
    expect("6.3c-1", make_pmax_grads, "fail", "lax.pmax", "要素ごとの最大", "和（psum）")
