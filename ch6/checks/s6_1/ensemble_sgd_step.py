"""6.1-5 ensemble_sgd_step: M 個のモデルをモデルごとの学習率で 1 ステップ（パラメータ側の vmap）。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, call, exercise, expect_no_batch_loop, f32, fmt
from .common import Spy, exercise_rng, expect_tree, expect_used, guard, shape_of, tree_close

# 6.1-5 -------------------------------------------------------------------------------
# M 個のモデルを、モデルごとの学習率で 1 ステップずつ学習する（パラメータ側の vmap）

def _loss_5(spy: Spy, d: int, h: int):
    """隠し loss_fn: params = {"W" (h, d), "b" (h,), "v" (h,)}、x (d,)、y () -> スカラー。"""
    import jax.numpy as jnp

    def loss_fn(params, x, y):
        spy.calls += 1
        if shape_of(params["W"]) != (h, d):
            raise Fail(f"loss_fn の params['W'] は形 {fmt((h, d))} のはずが、{fmt(shape_of(params['W']))} で渡されました。"
                       "stacked_params はモデルの軸（0 軸）で vmap します。")
        guard("loss_fn", "x", x, (d,), "サンプルの軸も vmap でバッチにします。")
        guard("loss_fn", "y", y, (), "サンプルの軸も vmap でバッチにします。")
        return (params["v"] @ jnp.tanh(params["W"] @ x + params["b"]) - y) ** 2

    return loss_fn


def _stacked_5(rng, m, d, h):
    return {"W": f32(rng.normal(size=(m, h, d)) * 0.6), "b": f32(rng.normal(size=(m, h)) * 0.3),
            "v": f32(rng.normal(size=(m, h)))}


def _sgd_reference(loss_fn, stacked, xs, ys, lrs, reduce="mean", same_lr=False, sign=-1.0, grads_only=False):
    """参照: モデルごと・サンプルごとのループ（チェック側）。"""
    import jax

    out = []
    for i in range(len(lrs)):
        p = jax.tree.map(lambda a: a[i], stacked)  # noqa: B023  その回のうちに使う
        gs = [jax.grad(loss_fn)(p, x, y) for x, y in zip(xs, ys)]
        g = jax.tree.map(lambda *v: np.sum([np.asarray(u, np.float64) for u in v], axis=0), *gs)
        if reduce == "mean":
            g = jax.tree.map(lambda v: v / len(xs), g)
        lr = float(lrs[0] if same_lr else lrs[i])
        out.append(g if grads_only else jax.tree.map(lambda a, v: np.asarray(a, np.float64) + sign * lr * v, p, g))  # noqa: B023
    return jax.tree.map(lambda *v: np.stack(v), *out)


@exercise("6.1-5", "ensemble_sgd_step")
def check_ensemble_sgd_step(fn):
    rng = exercise_rng(5)
    m, b, d, h = 3, 7, 4, 5
    stacked = _stacked_5(rng, m, d, h)
    xs, ys = f32(rng.normal(size=(b, d))), f32(rng.normal(size=(b,)))
    lrs = f32([0.05, 0.3, 1.2])
    spy = Spy()
    got = call(fn, _loss_5(spy, d, h), stacked, xs, ys, lrs)
    expect_used("loss_fn", spy)
    loss = _loss_5(Spy(), d, h)
    want = _sgd_reference(loss, stacked, xs, ys, lrs)
    if not tree_close(got, want):
        mistakes = [
            (dict(same_lr=True), "全モデルに同じ学習率を使っています。lrs はモデルごとに 1 つなので、lrs もモデルの軸で vmap します。"),
            (dict(reduce="sum"), "損失（勾配）をサンプルについて合計しています。バッチ平均の損失の勾配を使います。"),
            (dict(sign=+1.0), "勾配の向きに進んでいます（p + lr * g）。損失を下げるには p - lr * g です。"),
            (dict(grads_only=True), "勾配を返しています。返すのは 1 ステップ後のパラメータ p - lr * g です。"),
        ]
        for kw, msg in mistakes:
            if tree_close(got, _sgd_reference(loss, stacked, xs, ys, lrs, **kw)):
                raise Fail(msg)
    expect_tree(got, want, "ensemble_sgd_step の結果",
                 )
    for what, make in (("モデルの数", lambda k: (_loss_5(Spy(), d, h), _stacked_5(rng, k, d, h), xs, ys,
                                              f32(rng.uniform(0.1, 1.0, size=k)))),
                       ("サンプルの数", lambda k: (_loss_5(Spy(), d, h), stacked, f32(rng.normal(size=(k, d))),
                                               f32(rng.normal(size=(k,))), lrs))):
        expect_no_batch_loop(fn, make, sizes=(2, 4), what=what)
    return f"別の loss_fn と {m} モデル × {b} サンプルで一致し、jaxpr はモデルの数にもサンプルの数にも依存しません。"
