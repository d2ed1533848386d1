"""6.2-2 sgd_step: 勾配を返す・符号が逆・pmax・学習率の決め打ちは、それぞれの言葉で落ちる（issue 22 の 4）。"""
import jax
import jax.numpy as jnp
from jax import lax

from tests.checkhelp import expect

N = jax.device_count()


def _grads(params, x, y, mask, loss_fn, axis_name, reduce=lax.psum):
    count = lax.psum(jnp.sum(mask), axis_name)
    g = jax.grad(lambda p: jnp.sum(mask * loss_fn(p, x, y)))(params)
    return jax.tree.map(lambda v: reduce(v, axis_name) / count, g)


def _update(params, grads, rate):
    return jax.tree.map(lambda p, g: p - rate * g, params, grads)


def grads_only(params, x, y, mask, loss_fn, lr, axis_name):
    return _grads(params, x, y, mask, loss_fn, axis_name)  # 新しい params ではなく勾配を返す


def wrong_sign(params, x, y, mask, loss_fn, lr, axis_name):
    return _update(params, _grads(params, x, y, mask, loss_fn, axis_name), -lr)


def pmax_grads(params, x, y, mask, loss_fn, lr, axis_name):
    # 各デバイスの平均の勾配を pmax でまとめる
    g = jax.grad(lambda p: jnp.sum(mask * loss_fn(p, x, y)) / jnp.sum(mask))(params)
    return _update(params, lax.pmax(g, axis_name), lr)


def half_lr(params, x, y, mask, loss_fn, lr, axis_name):
    return _update(params, _grads(params, x, y, mask, loss_fn, axis_name), 0.05)


def test_returning_the_gradients_is_named():
    expect("6.2-2", grads_only, "fail", "勾配と一致", "params - lr * grads")


def test_the_wrong_sign_is_named():
    expect("6.2-2", wrong_sign, "fail", "符号が逆", "params + lr * grads")


def test_pmax_instead_of_a_sum_is_named():
    # 1 デバイスでは pmax も平均も同じ: vmap（軸の大きさ 3）の確かめで見つかる
    where = "3 グループ" if N == 1 else f"デバイス {N} 個"
    expect("6.2-2", pmax_grads, "fail", "lax.pmax", where)


def test_a_fixed_learning_rate_names_the_rate_and_the_argument():
    expect("6.2-2", half_lr, "fail", "学習率 0.05 相当", "引数 lr", "0.3")


def test_unchanged_params_are_named():
    expect("6.2-2", lambda p, x, y, mask, loss_fn, lr, axis_name: p, "fail", "そのまま返りました")
