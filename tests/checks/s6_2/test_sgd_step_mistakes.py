"""6.2-2 sgd_step: 勾配を返す・符号が逆・pmax・学習率の決め打ちは、それぞれの言葉で落ちる（issue 22 の 4）。"""
import jax
import jax.numpy as jnp
from jax import lax

from tests.checkhelp import expect

N = jax.device_count()


def _update(params, grads, rate):
    return jax.tree.map(lambda p, g: p - rate * g, params, grads)


def grads_only(params, x, y, loss_fn, lr, axis_name):
    return lax.pmean(jax.grad(loss_fn)(params, x, y), axis_name)  # 新しい params ではなく勾配を返す


def wrong_sign(params, x, y, loss_fn, lr, axis_name):
    return _update(params, lax.pmean(jax.grad(loss_fn)(params, x, y), axis_name), -lr)


def pmax_grads(params, x, y, loss_fn, lr, axis_name):
    return _update(params, lax.pmax(jax.grad(loss_fn)(params, x, y), axis_name), lr)


def half_lr(params, x, y, loss_fn, lr, axis_name):
    return _update(params, lax.pmean(jax.grad(loss_fn)(params, x, y), axis_name), 0.05)


def notebook_loss(params, x, y, loss_fn, lr, axis_name):
    def mse_loss(p, x, y):  # ノートブックの損失を書いてしまった
        return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)
    return _update(params, lax.pmean(jax.grad(mse_loss)(params, x, y), axis_name), lr)


def test_returning_the_gradients_is_named():
    expect("6.2-2", grads_only, "fail", "勾配そのもの", "params - lr * grads")


def test_the_wrong_sign_is_named():
    expect("6.2-2", wrong_sign, "fail", "符号が逆", "params + lr * grads")


def test_pmax_instead_of_pmean_is_named():
    # 1 デバイスでは pmax も平均も同じ: vmap（軸の大きさ 3）の確かめで見つかる
    where = "3 グループ" if N == 1 else f"{N} デバイス"
    expect("6.2-2", pmax_grads, "fail", "lax.pmax", "lax.pmean", where)


def test_a_fixed_learning_rate_names_the_rate_and_the_argument():
    expect("6.2-2", half_lr, "fail", "学習率が 0.05", "引数 lr", "0.3")


def test_the_notebook_loss_names_the_argument():
    expect("6.2-2", notebook_loss, "fail", "mse_loss", "引数 loss_fn")


def test_unchanged_params_are_named():
    expect("6.2-2", lambda p, x, y, loss_fn, lr, axis_name: p, "fail", "そのまま返りました")
