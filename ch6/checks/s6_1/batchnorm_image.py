"""6.1-6 batchnorm_image: 画像 1 枚用の関数で、バッチ全体と全画素の統計による正規化（lax.pmean）。"""
from __future__ import annotations

import functools

import numpy as np

from ...checking import Fail, call, exercise, expect_close, f32, jaxpr_primitives
from .common import exercise_rng, shape_of

# 6.1-6 -------------------------------------------------------------------------------
# 画像のバッチ正規化: 1 枚 (H, W, C) を受け取り、チャネルごとにバッチ全体と全画素の統計で正規化する

EPS = 1e-5


def _images_6(rng, b, hh, ww, c):
    """チャネルごとに性質の違う画像: 画像ごとのずれ、画素ごとのずれ、分散がとても小さいチャネル（eps が効く）。"""
    x = rng.normal(size=(b, hh, ww, c)) * np.linspace(0.5, 3.0, c)
    x += rng.normal(size=(b, 1, 1, c)) * 2.0 + 1.5        # 画像ごとのずれ（画像 1 枚の統計とは違う）
    x += rng.normal(size=(1, hh, ww, c))                   # 画素ごとのずれ（画素ごとの統計とは違う）
    x[..., 0] = rng.normal(size=(b, hh, ww)) * 1e-3        # 分散 1e-6: eps=1e-5 のほうが大きい
    return f32(x)


def _bn_np(xs, eps):
    x = xs.astype(np.float64)
    mean = x.mean((0, 1, 2))
    var = ((x - mean) ** 2).mean((0, 1, 2))
    return (x - mean) / np.sqrt(var + eps)


@exercise("6.1-6", "batchnorm_image")
def check_batchnorm_image(fn):
    import jax

    rng = exercise_rng(6)
    b, hh, ww, c = 5, 4, 3, 6
    xs = _images_6(rng, b, hh, ww, c)
    got = call(jax.vmap(fn, axis_name="batch"), xs)
    want = _bn_np(xs, EPS)
    if shape_of(got) == want.shape and not np.allclose(np.asarray(got, np.float64), want, rtol=1e-3, atol=1e-3):
        g = np.asarray(got, np.float64)
        if np.allclose(g, _bn_np(xs, 0.0), rtol=1e-2, atol=1e-3):
            raise Fail("分母 sqrt(分散 + eps) に eps が入っていないので、分散 ≈ 1e-6 のチャネルで値が違います。")
        per_image = (xs - xs.mean((1, 2), keepdims=True)) / np.sqrt(xs.var((1, 2), keepdims=True) + EPS)
        if np.allclose(g, per_image, rtol=1e-3, atol=1e-3):
            raise Fail("画像 1 枚ごとの統計で正規化しています。平均と分散は lax.pmean(…, 'batch') でバッチ全体にわたって取ります。")
        x64 = xs.astype(np.float64)
        mean = x64.mean((0, 1, 2))
        var_image = ((x64 - mean) ** 2).mean((1, 2), keepdims=True)  # 平均は全体、分散は画像ごと
        if np.allclose(g, (x64 - mean) / np.sqrt(var_image + EPS), rtol=1e-3, atol=1e-3):
            raise Fail("分散に lax.pmean がなく、分散だけが画像 1 枚ごとです。分散も lax.pmean(…, 'batch') でバッチ全体の平均にします。")
        mean_of_vars = x64.var((1, 2)).mean(0)  # 画像ごとの（画像の平均のまわりの）分散の平均
        if np.allclose(g, (x64 - mean) / np.sqrt(mean_of_vars + EPS), rtol=1e-3, atol=1e-3):
            raise Fail("画像ごとの分散の平均なので、画像ごとの平均のずれの分が抜けています。"
                       "バッチ全体の平均のまわりで (x - 平均) ** 2 を取り、pmean で平均してください。")
        if np.allclose(g, (x64 - mean) / (np.sqrt(((x64 - mean) ** 2).mean((0, 1, 2))) + EPS), rtol=1e-3, atol=1e-3):
            raise Fail("eps を sqrt の外で足しているので、分散 ≈ 1e-6 のチャネルで値が違います。分母は sqrt(分散 + eps) です。")
        summed = x64.mean((1, 2)).sum(0)  # pmean の代わりに psum: 平均が画像の枚数倍
        summed_var = ((x64 - summed) ** 2).mean((1, 2)).sum(0)
        if np.allclose(g, (x64 - summed) / np.sqrt(summed_var + EPS), rtol=1e-3, atol=1e-3):
            raise Fail(f"lax.psum は和なので、画像 {b} 枚分の和を平均と分散の代わりに使っています。"
                       "lax.pmean を使うか、psum の結果を枚数で割ります。")
        per_pixel = (xs - xs.mean(0)) / np.sqrt(xs.var(0) + EPS)
        if np.allclose(g, per_pixel, rtol=1e-3, atol=1e-3):
            raise Fail("画素ごとにバッチの統計を取っています。チャネルごとに H と W の軸もまとめて平均してください。")
    expect_close(got, want, "vmap(batchnorm_image, axis_name='batch')(xs) の結果", rtol=1e-3, atol=1e-4,
                 )
    big_eps = 0.5
    got_eps = call(jax.vmap(functools.partial(fn, eps=big_eps), axis_name="batch"), xs)
    expect_close(got_eps, _bn_np(xs, big_eps), f"eps={big_eps} で呼んだ結果", rtol=1e-3, atol=1e-4,
                 hint="eps は引数の値を使います。")
    prims = jaxpr_primitives(fn, xs[0], axis_env=[("batch", b)])
    if prims & {"all_gather", "all_gather_invariant"}:
        raise Fail("平均か分散を all_gather で全画像分集めてから、各画像で平均しています。"
                   "集めずに lax.pmean(…, 'batch') 1 回でバッチ全体の値にします。")
    if not prims & {"psum", "pmean", "psum_invariant"}:
        raise Fail("1 枚用の関数の中に集団通信（psum / pmean）がありません。バッチ全体の統計は lax.pmean(…, 'batch') で取ります。")
    return f"画像 {b} 枚（分散 ≈ 1e-6 のチャネルを含む）と eps={big_eps} で一致し、統計は集団通信で取っています。"
