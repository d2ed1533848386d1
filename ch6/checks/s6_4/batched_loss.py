"""6.4-1 batched_loss: 1 サンプル用の損失をバッチ平均にする（vmap）。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, LearnerError, call, exercise, expect_close, expect_no_batch_loop, f32
from .common import exercise_rng, matches, shape_of

# 6.4-1 -------------------------------------------------------------------------------
# 1 サンプル用の損失をバッチ平均にする（vmap）。バッチは xs の 1 軸目（列）にある

def _loss1_factory(d: int):
    import jax.numpy as jnp

    def sample_loss(params, x, y):
        """隠しモデル: x (d,), y () の 1 サンプル用。1 サンプルでないものが来たら知らせる。"""
        shape = tuple(getattr(x, "shape", ()))
        if len(shape) != 1:
            raise Fail(f"sample_loss の x は 1 サンプルの形 ({d},) のはずが、形 {shape} で渡されました。"
                       "vmap で包み、in_axes でバッチの軸を指定してください。")
        if shape != (d,):
            raise Fail(f"sample_loss の x は形 ({d},) のはずが、形 {shape} で渡されました。"
                       "xs は (特徴, バッチ) の並びなので、バッチは 1 軸目です。")
        pred = params["v"] @ jnp.tanh(params["W"] @ x + params["b"])
        return (pred - y) ** 2

    return sample_loss


def _loss1_np(params, xs, ys):
    pred = np.tanh(xs.T @ params["W"].T + params["b"]) @ params["v"]  # xs は (d, B)
    return (pred - ys) ** 2  # (B,)


def _named_mistake(got: float, params, xs, ys) -> str | None:
    """スカラーの戻り値が、よくある誤りの値と一致すれば、どの引数・軸が違うかの説明。"""
    d, b = xs.shape
    per = _loss1_np(params, xs, ys)
    pred = np.tanh(xs.T @ params["W"].T + params["b"]) @ params["v"]
    cases = [
        (((pred[:, None] - ys[None, :]) ** 2).mean(),
         "in_axes の 3 つ目が None なので、各サンプルの予測がすべての ys と比べられています。ys の 0 軸もバッチです。"),
        (per.sum() / d,
         f"合計を特徴の数 {d}（xs.shape[0]）で割っています。サンプルの数は xs.shape[1] です。"),
        (float(_loss1_np(params, xs.mean(axis=1, keepdims=True), np.array([ys.mean()]))[0]),
         "サンプルを先に平均したので、平均した入力の損失になっています。各サンプルの損失を vmap で求めてから平均します。"),
        (_loss1_np(params, xs.reshape(b, d).T, ys).mean(),
         f"xs を reshape({b}, {d}) で並べ替えたので、サンプルの特徴が混ざっています（reshape は転置ではありません）。"
         "バッチの軸は in_axes で指定します。"),
        (np.sqrt(per.mean()),
         "平均の平方根が返りました。sample_loss の値（2 乗誤差）をそのまま平均します。"),
    ]
    for value, why in cases:
        if np.isclose(got, value, rtol=1e-4, atol=1e-5):
            return why
    return None


@exercise("6.4-1", "batched_loss")
def check_batched_loss(fn):
    rng = exercise_rng(1)
    d, h, b = 5, 7, 13
    params = {"W": f32(rng.normal(size=(h, d)) * 0.6), "b": f32(rng.normal(size=(h,)) * 0.1),
              "v": f32(rng.normal(size=(h,)))}

    def data(n):
        return f32(rng.normal(size=(d, n))), f32(rng.normal(size=(n,)))  # xs は (特徴, バッチ)

    xs, ys = data(b)
    sample_loss = _loss1_factory(d)
    per_example = _loss1_np(params, xs, ys)
    want = float(per_example.mean())
    try:
        got = call(fn, sample_loss, params, xs, ys)
    except LearnerError as exc:
        text = str(exc.exc)
        if "inconsistent sizes" in text and "argument params" in text:
            raise Fail("vmap が params までバッチにしようとして、軸の長さがそろいません。"
                       "params は全サンプル共通なので、in_axes の最初は None です。") from None
        if "map its argument along axis 1" in text:  # in_axes=1 をすべての引数に
            if f"shape is ({b},)" in text:
                raise Fail(f"in_axes で ys（形 ({b},)）の 1 軸目をバッチにしようとしましたが、ys には 0 軸しかありません。"
                           "ys の in_axes は 0 です。") from None
            raise Fail("in_axes=1 がすべての引数に効き、params の葉までバッチにしようとしています。"
                       "引数ごとに in_axes を指定してください（共通の params は None）。") from None
        if "inconsistent sizes" in text:
            raise Fail(f"vmap でバッチにする軸の長さがそろいません。xs は (特徴 {d}, バッチ {b}) の並びで、バッチは 1 軸目です。") from None
        raise
    shape = shape_of(got)
    if shape == (b,):
        raise Fail(f"スカラーの平均のはずが、形 ({b},) のサンプルごとの損失でした。最後に jnp.mean で平均してください。")
    if shape == () and matches(got, per_example.sum(), rtol=1e-4, atol=1e-4):
        raise Fail(f"平均 {want:.4g} のはずが、合計 {float(np.asarray(got)):.4g} でした。jnp.sum ではなく jnp.mean を使ってください。")
    if shape == (1,):
        raise Fail("スカラー（形 ()）のはずが、形 (1,) の配列でした。keepdims=True や reshape を外してください。")
    if shape == () and not matches(got, want):
        why = _named_mistake(float(np.asarray(got)), params, xs, ys)
        if why:
            raise Fail(why)
    expect_close(got, np.float64(want), "batched_loss の戻り値", rtol=1e-4, atol=1e-5,
                 hint="xs の 1 軸目がバッチです。")
    expect_no_batch_loop(fn, lambda n: (sample_loss, params, *data(n)))
    return f"特徴 {d} × {b} サンプルで平均損失が一致し、jaxpr はバッチの大きさに依存しません。"
