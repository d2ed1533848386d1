"""6.1 のチェック: 参照解と別の正解は通り、典型的な誤りは問題を名指しして落ちる。"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from ch6 import run_check
from ch6.checks.s6_1 import predict


def status(ex, fn):
    r = run_check(ex, fn)
    return r.status, r.message


def not_done(*args, **kwargs):
    raise NotImplementedError


def boom(*args, **kwargs):
    raise ZeroDivisionError("division by zero")


def expect(ex, fn, want_status, *words):
    st, msg = status(ex, fn)
    assert st == want_status, msg
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"


# 6.1-1 --------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [
    lambda W, xs: jax.vmap(predict, in_axes=(None, 0))(W, xs),
    lambda W, xs: jnp.tanh(xs @ W.T),  # 手書きのバッチ計算も正解
    jax.jit(jax.vmap(predict, in_axes=(None, 0))),
])
def test_6_1_1_correct(fn):
    expect("6.1-1", fn, "pass", "正解")


def test_6_1_1_wrong():
    expect("6.1-1", lambda W, xs: jax.vmap(predict, in_axes=(None, 1))(W, xs), "error", "TypeError")
    expect("6.1-1", lambda W, xs: jnp.stack([predict(W, x) for x in xs]), "fail", "Python のループ")
    expect("6.1-1", lambda W, xs: lax.map(lambda x: predict(W, x), xs), "fail", "scan")
    expect("6.1-1", lambda W, xs: jnp.zeros((32, 3)), "fail", "形が違います", "(11, 5)")
    expect("6.1-1", lambda W, xs: jnp.tanh(xs @ W.T) + 0.1, "fail", "値が違います")
    expect("6.1-1", not_done, "not_done", "まだ解答されていません")
    expect("6.1-1", boom, "error", "ZeroDivisionError")
    expect("6.1-1", 42, "fail", "関数を渡してください")


# 6.1-2 --------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [
    lambda W, xs_t: jax.vmap(predict, in_axes=(None, 1), out_axes=1)(W, xs_t),
    lambda W, xs_t: jax.vmap(predict, in_axes=(None, -1), out_axes=-1)(W, xs_t),
    lambda W, xs_t: jnp.tanh(W @ xs_t),
])
def test_6_1_2_correct(fn):
    expect("6.1-2", fn, "pass")


def test_6_1_2_wrong():
    expect("6.1-2", lambda W, xs_t: jax.vmap(predict, in_axes=(None, 1))(W, xs_t), "fail", "out_axes=1")
    expect("6.1-2", lambda W, xs_t: jax.vmap(predict, in_axes=(None, 0), out_axes=1)(W, xs_t), "error", "TypeError")
    expect("6.1-2", lambda W, xs_t: jnp.stack([predict(W, x) for x in xs_t.T], axis=1), "fail", "Python のループ")
    expect("6.1-2", lambda W, xs_t: jnp.ones((3, 32)), "fail", "形が違います")
    expect("6.1-2", not_done, "not_done")


# 6.1-3 --------------------------------------------------------------------------------
def dist(x, y):
    return jnp.sqrt(jnp.sum((x - y) ** 2))


@pytest.mark.parametrize("fn", [
    lambda X, Y: jax.vmap(jax.vmap(dist, (None, 0)), (0, None))(X, Y),
    lambda X, Y: jax.vmap(lambda x: jax.vmap(lambda y: dist(x, y))(Y))(X),
    lambda X, Y: jnp.linalg.norm(X[:, None] - Y[None], axis=-1),
])
def test_6_1_3_correct(fn):
    expect("6.1-3", fn, "pass")


def test_6_1_3_wrong():
    expect("6.1-3", lambda X, Y: jax.vmap(jax.vmap(dist, (0, None)), (None, 0))(X, Y), "fail", "転置")
    expect("6.1-3", lambda X, Y: jnp.stack([jax.vmap(dist, (None, 0))(x, Y) for x in X]), "fail", "Python のループ")
    expect("6.1-3", lambda X, Y: jnp.sum((X[:, None] - Y[None]) ** 2, -1), "fail", "値が違います")
    expect("6.1-3", lambda X, Y: jnp.zeros((5, 3)), "fail", "形が違います")
    expect("6.1-3", lambda X, Y: jax.vmap(dist)(X, Y), "error", "ValueError")


# 6.1-4 --------------------------------------------------------------------------------
def grad_norms(loss, p, xs, ys):
    g = jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(p, xs, ys)
    return jnp.sqrt(sum(jnp.sum(leaf.reshape(leaf.shape[0], -1) ** 2, 1) for leaf in jax.tree.leaves(g)))


def grad_norms_ravel(loss, p, xs, ys):
    from jax.flatten_util import ravel_pytree

    def one(x, y):
        return jnp.linalg.norm(ravel_pytree(jax.grad(loss)(p, x, y))[0])

    return jax.vmap(one)(xs, ys)


@pytest.mark.parametrize("fn", [grad_norms, grad_norms_ravel, jax.jit(grad_norms, static_argnums=0)])
def test_6_1_4_correct(fn):
    expect("6.1-4", fn, "pass")


def test_6_1_4_wrong():
    def batch_grad(loss, p, xs, ys):  # バッチ平均の勾配: スカラー
        g = jax.grad(lambda p: jnp.mean(jax.vmap(loss, (None, 0, 0))(p, xs, ys)))(p)
        return jnp.sqrt(sum(jnp.sum(leaf ** 2) for leaf in jax.tree.leaves(g)))

    def only_w(loss, p, xs, ys):  # W の勾配だけ
        g = jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(p, xs, ys)
        return jnp.sqrt(jnp.sum(g["W"].reshape(len(xs), -1) ** 2, 1))

    def looped(loss, p, xs, ys):
        return jnp.stack([grad_norms(loss, p, x[None], y[None])[0] for x, y in zip(xs, ys)])

    expect("6.1-4", batch_grad, "fail", "スカラー")
    expect("6.1-4", only_w, "fail", "値が違います")
    expect("6.1-4", looped, "fail", "Python のループ")
    expect("6.1-4", lambda loss, p, xs, ys: jnp.ones(32), "fail", "形が違います")
    expect("6.1-4", lambda loss, p, xs, ys: jax.vmap(jax.grad(loss), (None, 0, 0))(p, xs, ys), "fail", "配列のはず")
    expect("6.1-4", boom, "error", "ZeroDivisionError")


# 6.1-5 --------------------------------------------------------------------------------
def ens(model, ps, xs):
    return jax.vmap(jax.vmap(model, (None, 0)), (0, None))(ps, xs)


def ens_swapped(model, ps, xs):
    return jnp.swapaxes(jax.vmap(jax.vmap(model, (0, None)), (None, 0))(ps, xs), 0, 1)


@pytest.mark.parametrize("fn", [ens, ens_swapped])
def test_6_1_5_correct(fn):
    expect("6.1-5", fn, "pass")


def test_6_1_5_wrong():
    def looped(model, ps, xs):
        n = jax.tree.leaves(ps)[0].shape[0]
        return jnp.stack([jax.vmap(model, (None, 0))(jax.tree.map(lambda a: a[i], ps), xs) for i in range(n)])

    expect("6.1-5", lambda model, ps, xs: jax.vmap(jax.vmap(model, (0, None)), (None, 0))(ps, xs), "fail", "モデル, バッチ")
    expect("6.1-5", looped, "fail", "モデル数", "Python のループ")
    expect("6.1-5", lambda model, ps, xs: jax.vmap(model, (None, 0))(jax.tree.map(lambda a: a[0], ps), xs),
           "fail", "形が違います")
    expect("6.1-5", lambda model, ps, xs: jax.vmap(model, (0, 0))(ps, xs), "error", "ValueError")
    expect("6.1-5", not_done, "not_done")


# 6.1-6 --------------------------------------------------------------------------------
def bn(x, eps=1e-5):
    m = lax.pmean(x, "batch")
    v = lax.pmean((x - m) ** 2, "batch")
    return (x - m) / jnp.sqrt(v + eps)


def bn_psum(x, eps=1e-5):
    n = lax.psum(1, "batch")
    m = lax.psum(x, "batch") / n
    v = lax.psum(x * x, "batch") / n - m * m
    return (x - m) * lax.rsqrt(v + eps)


@pytest.mark.parametrize("fn", [bn, bn_psum])
def test_6_1_6_correct(fn):
    expect("6.1-6", fn, "pass", "pmean")


def test_6_1_6_wrong():
    expect("6.1-6", lambda x: (x - x.mean()) / x.std(), "fail", "値が違います")  # サンプル内で正規化
    expect("6.1-6", lambda x: x - lax.pmean(x, "batch"), "fail", "値が違います")  # 分散で割っていない
    expect("6.1-6", lambda x: bn(x, eps=1.0), "fail", "値が違います")
    expect("6.1-6", lambda x: lax.pmean(x, "i"), "error", "NameError")  # 軸の名前の誤り
    expect("6.1-6", not_done, "not_done")
