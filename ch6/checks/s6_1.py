"""6.1 vmap の演習チェック。

どのチェックも、ノートブックにない形と乱数で作った入力（隠し入力）で学習者の関数を呼び、
NumPy で計算した参照と比べ、さらに「バッチを Python ループで回していないか」を jaxpr で確かめます。
"""
from __future__ import annotations

import numpy as np

from .._core import Fail, call, exercise, expect_close, expect_no_batch_loop, jaxpr_primitives
from .._core import f32 as _f32, hidden_rng

EPS = 1e-5


def _rng(tag: int) -> np.random.Generator:
    return hidden_rng(61_000 + tag)



# 6.1-1 -------------------------------------------------------------------------------

def predict(W, x):
    """1 サンプル用: W (out, in), x (in,) -> (out,)"""
    import jax.numpy as jnp

    return jnp.tanh(W @ x)


@exercise("6.1-1", "batched_predict")
def check_batched_predict(fn):
    rng = _rng(1)
    W = _f32(rng.normal(size=(5, 7)))
    xs = _f32(rng.normal(size=(11, 7)))
    got = call(fn, W, xs)
    expect_close(got, np.tanh(xs @ W.T), "batched_predict(W, xs) の結果",
                 hint="in_axes=(None, 0) で W は共通、xs は 0 軸目をバッチにします。")
    expect_no_batch_loop(fn, lambda b: (W, _f32(rng.normal(size=(b, 7)))))
    return "隠し入力 W (5, 7)、xs (11, 7) で一致し、jaxpr はバッチサイズに依存しません。"


# 6.1-2 -------------------------------------------------------------------------------

@exercise("6.1-2", "predict_feature_major")
def check_feature_major(fn):
    rng = _rng(2)
    W = _f32(rng.normal(size=(4, 6)))
    xs_t = _f32(rng.normal(size=(6, 9)))  # (特徴, バッチ)
    want = np.tanh(W @ xs_t)  # (out, バッチ)
    got = call(fn, W, xs_t)
    if getattr(got, "shape", None) == want.T.shape and want.shape != want.T.shape:
        raise Fail(f"出力の形が (バッチ, 出力) = {want.T.shape} になっています。期待は (出力, バッチ) = {want.shape} です。"
                   "out_axes=1 でバッチ軸を後ろに置きましょう。")
    expect_close(got, want, "predict_feature_major(W, xs_t) の結果",
                 hint="入力は in_axes=(None, 1)、出力は out_axes=1 です。")
    expect_no_batch_loop(fn, lambda b: (W, _f32(rng.normal(size=(6, b)))))
    return "隠し入力 xs_t (6, 9) で (4, 9) の出力が一致しました。"


# 6.1-3 -------------------------------------------------------------------------------

@exercise("6.1-3", "pairwise_distances")
def check_pairwise(fn):
    rng = _rng(3)
    X = _f32(rng.normal(size=(7, 3)))
    Y = _f32(rng.normal(size=(5, 3)))
    want = np.sqrt(((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1))
    got = call(fn, X, Y)
    if getattr(got, "shape", None) == want.T.shape:
        raise Fail(f"出力の形が {want.T.shape} で、(len(X), len(Y)) = {want.shape} の転置になっています。"
                   "外側の vmap が X、内側が Y を回すようにしましょう。")
    expect_close(got, want, "pairwise_distances(X, Y) の結果", rtol=1e-4, atol=1e-4,
                 hint="D[i, j] = ||X[i] - Y[j]|| です。")
    expect_no_batch_loop(fn, lambda b: (_f32(rng.normal(size=(b, 3))), _f32(rng.normal(size=(b + 1, 3)))),
                         what="点の数")
    return "隠し入力 X (7, 3)、Y (5, 3) で距離行列 (7, 5) が一致しました。"


# 6.1-4 -------------------------------------------------------------------------------

def _squared_loss(params, x, y):
    import jax.numpy as jnp

    pred = jnp.tanh(params["W"] @ x + params["b"])
    return jnp.sum((pred - y) ** 2)


def _grad_norms_reference(params, xs, ys):
    W, b = np.asarray(params["W"], np.float64), np.asarray(params["b"], np.float64)
    z = xs @ W.T + b
    t = np.tanh(z)
    dz = 2 * (t - ys) * (1 - t ** 2)  # (B, out)
    gW = dz[:, :, None] * xs[:, None, :]
    return np.sqrt((gW ** 2).sum((1, 2)) + (dz ** 2).sum(1))


@exercise("6.1-4", "per_example_grad_norms")
def check_grad_norms(fn):
    rng = _rng(4)
    params = {"W": _f32(rng.normal(size=(3, 5)) * 0.5), "b": _f32(rng.normal(size=(3,)) * 0.1)}

    def data(b):
        return _f32(rng.normal(size=(b, 5))), _f32(rng.normal(size=(b, 3)))

    xs, ys = data(10)
    got = call(fn, _squared_loss, params, xs, ys)
    want = _grad_norms_reference(params, xs, ys)
    mean_norm = np.sqrt(sum(float(np.sum(np.mean(g, 0) ** 2)) for g in _mean_grads(params, xs, ys)))
    if getattr(got, "shape", None) == ():
        raise Fail(f"スカラーが返りました（値 {float(np.asarray(got)):.4g}）。サンプルごとの勾配ノルムを "
                   f"形 {want.shape} で返してください。バッチ平均の損失を grad していませんか？")
    if getattr(got, "shape", None) == want.shape and np.allclose(np.asarray(got), mean_norm, rtol=1e-3):
        raise Fail("すべてのサンプルで同じ値です: バッチ全体の勾配を配っていませんか？ "
                   "vmap(grad(loss), in_axes=(None, 0, 0)) でサンプルごとに微分しましょう。")
    expect_close(got, want, "per_example_grad_norms の結果", rtol=1e-4, atol=1e-5,
                 hint="各サンプルの勾配（W と b の両方）を平坦にして 2 乗和の平方根を取ります。")
    expect_no_batch_loop(fn, lambda b: (_squared_loss, params, *data(b)))
    return "隠し入力 10 サンプルで勾配ノルムが一致し、jaxpr はバッチサイズに依存しません。"


def _mean_grads(params, xs, ys):
    W, b = np.asarray(params["W"], np.float64), np.asarray(params["b"], np.float64)
    t = np.tanh(xs @ W.T + b)
    dz = 2 * (t - ys) * (1 - t ** 2)
    return [(dz[:, :, None] * xs[:, None, :]).reshape(len(xs), -1), dz]


# 6.1-5 -------------------------------------------------------------------------------

def _mlp(params, x):
    import jax.numpy as jnp

    h = jnp.tanh(params["W1"] @ x + params["b1"])
    return params["W2"] @ h + params["b2"]


def _mlp_np(p, xs):
    h = np.tanh(xs @ np.asarray(p["W1"]).T + p["b1"])
    return h @ np.asarray(p["W2"]).T + p["b2"]


@exercise("6.1-5", "ensemble_predict")
def check_ensemble(fn):
    rng = _rng(5)
    n_models, d_in, d_hid, d_out = 3, 4, 6, 2

    def stacked(m):
        return {
            "W1": _f32(rng.normal(size=(m, d_hid, d_in))), "b1": _f32(rng.normal(size=(m, d_hid))),
            "W2": _f32(rng.normal(size=(m, d_out, d_hid))), "b2": _f32(rng.normal(size=(m, d_out))),
        }

    params = stacked(n_models)
    xs = _f32(rng.normal(size=(8, d_in)))
    got = call(fn, _mlp, params, xs)
    want = np.stack([_mlp_np({k: v[i] for k, v in params.items()}, xs) for i in range(n_models)])
    if getattr(got, "shape", None) == (8, n_models, d_out):
        raise Fail(f"出力の形が (バッチ, モデル, 出力) = (8, {n_models}, {d_out}) です。"
                   f"期待は (モデル, バッチ, 出力) = {want.shape}。外側の vmap がモデルを回すようにしましょう。")
    expect_close(got, want, "ensemble_predict の結果", rtol=1e-4, atol=1e-4,
                 hint="外側 vmap(in_axes=(0, None)) でモデル、内側 vmap(in_axes=(None, 0)) でサンプルを回します。")
    expect_no_batch_loop(fn, lambda m: (_mlp, stacked(m), xs), sizes=(2, 5), what="モデル数")
    return f"隠し入力（{n_models} モデル × 8 サンプル）で一致し、jaxpr はモデル数に依存しません。"


# 6.1-6 -------------------------------------------------------------------------------

@exercise("6.1-6", "batchnorm_sample")
def check_batchnorm(fn):
    import jax

    rng = _rng(6)
    xs = _f32(rng.normal(loc=3.0, scale=2.0, size=(12, 5)))
    mean = xs.mean(0)
    var = ((xs - mean) ** 2).mean(0)
    want = (xs - mean) / np.sqrt(var + EPS)
    try:
        got = call(jax.vmap(fn, axis_name="batch"), xs)
    except NameError as exc:  # pragma: no cover - 防御
        raise Fail(str(exc)) from None
    expect_close(got, want, "vmap(batchnorm_sample, axis_name='batch')(xs) の結果", rtol=1e-3, atol=1e-4,
                 hint="平均と分散はバッチ全体のもの（lax.pmean(…, 'batch')）、eps=1e-5 です。")
    prims = jaxpr_primitives(fn, xs[0], axis_env=[("batch", 12)])
    if not prims & {"psum", "pmean", "psum_invariant"}:
        raise Fail("1 サンプルの関数の中に集団演算（psum / pmean）が見つかりません。"
                   "バッチ全体の統計は lax.pmean(x, axis_name='batch') で取ります。")
    return "隠し入力 (12, 5) で一致し、関数の中で pmean を使っています。"
