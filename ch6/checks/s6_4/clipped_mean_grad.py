"""6.4-2 clipped_mean_grad: サンプルごとの勾配をクリップして平均する（DP-SGD）。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, call, exercise, expect_close, expect_no_batch_loop, f32
from ..clipping import clipped_mean, clipping_mistakes, sample_norms
from .common import exercise_rng, matches, shape_of

# 6.4-2 -------------------------------------------------------------------------------
# サンプルごとの勾配をサンプルごとにクリップして平均する（DP-SGD の中心）。
# 1 サンプルは辞書 {"x", "y"}、params は入れ子の辞書

def _loss2(params, example):
    import jax.numpy as jnp

    x, y = example["x"], example["y"]
    if getattr(x, "ndim", 1) != 1:
        raise Fail(f"sample_loss に形 {tuple(x.shape)} の x（バッチのまま）が渡されました。"
                   "sample_loss は 1 サンプル用です: jax.vmap(jax.grad(sample_loss), in_axes=(None, 0)) で包みましょう。")
    t = jnp.tanh(params["enc"]["W"] @ x + params["enc"]["b"])
    return jnp.sum((params["out"] * t - y) ** 2)


def _grads2_np(params, xs, ys):
    W, b, out = (np.asarray(a, np.float64) for a in (params["enc"]["W"], params["enc"]["b"], params["out"]))
    t = np.tanh(xs @ W.T + b)  # (B, h)
    r = out * t - ys
    dz = 2 * r * out * (1 - t ** 2)
    return {"enc": {"W": dz[:, :, None] * xs[:, None, :], "b": dz}, "out": 2 * r * t}


@exercise("6.4-2", "clipped_mean_grad")
def check_clipped_mean_grad(fn):
    import jax

    rng = exercise_rng(2)
    d, h, b = 5, 4, 12
    params = {"enc": {"W": f32(rng.normal(size=(h, d)) * 0.7), "b": f32(rng.normal(size=(h,)) * 0.2)},
              "out": f32(1.0 + 0.3 * rng.normal(size=(h,)))}

    def batch(n):
        return {"x": f32(rng.normal(size=(n, d))), "y": f32(rng.normal(size=(n, h)))}

    data = batch(b)
    g = _grads2_np(params, data["x"], data["y"])
    norms = sample_norms(g)
    max_norm = float(np.median(norms))  # 半分ほどのサンプルがクリップされる
    want = clipped_mean(g, max_norm)
    got = call(fn, _loss2, params, data, max_norm)

    structure = jax.tree.structure(params)
    if jax.tree.structure(got) != structure:
        raise Fail(f"返り値の pytree の構造が params と違います（期待 {structure}、実際 {jax.tree.structure(got)}）。"
                   "勾配は params と同じ入れ子の辞書で返しましょう。")
    names = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(params)]
    for name, leaf, ref in zip(names, jax.tree.leaves(got), jax.tree.leaves(params)):
        if shape_of(leaf) == (b,) + ref.shape:
            raise Fail(f"葉 {name} の形が {(b,) + ref.shape} で、サンプルごとの勾配のままです。"
                       "クリップした後、バッチ軸（0 軸）で平均しましょう。")
        if shape_of(leaf) != ref.shape:
            raise Fail(f"葉 {name} の形が違います: 期待 {ref.shape}、実際 {shape_of(leaf)}。")

    def same(cand):
        return all(matches(a, c, rtol=1e-3, atol=1e-5) for a, c in zip(jax.tree.leaves(got), jax.tree.leaves(cand)))

    if not same(want):
        mistakes = clipping_mistakes(g, max_norm)
        if same(mistakes["no_clip"]):
            raise Fail("サンプルごとにクリップされていません（クリップなしの平均勾配と同じ値です）。平均の前に、"
                       "サンプルごとの全体ノルム ‖g_i‖ を求めて min(1, max_norm/‖g_i‖) を掛けましょう。")
        if same(mistakes["clip_after_mean"]):
            raise Fail("平均をとってからクリップしています。DP-SGD では平均の前に、サンプルごとにクリップします。")
        if same(mistakes["sum"]):
            raise Fail(f"値が期待のちょうど {b} 倍（バッチサイズ倍）です: 合計になっています。バッチ軸で平均しましょう。")
        if same(mistakes["per_leaf"]):
            raise Fail("葉ごとに別々のノルムでクリップしています。ノルムは 1 サンプルの勾配全体（すべての葉をまとめた）で 1 つです。")
        if same(mistakes["scale_all"]):
            raise Fail("すべてのサンプルをノルム max_norm にそろえています。小さい勾配は縮めも伸ばしもせず、"
                       "倍率は min(1, max_norm/‖g_i‖) です。")
        for name, leaf, ref in zip(names, jax.tree.leaves(got), jax.tree.leaves(want)):
            expect_close(leaf, ref, f"葉 {name} ", rtol=1e-3, atol=1e-5,
                         hint="vmap(grad(sample_loss), in_axes=(None, 0)) → サンプルごとの全体ノルム → 倍率 → 平均 の順です。")
    expect_no_batch_loop(fn, lambda n: (_loss2, params, batch(n), max_norm))
    n_clipped = int((norms > max_norm).sum())
    return f"隠し入力 {b} サンプル（うち {n_clipped} 件がクリップ対象、葉 3 つの入れ子）で一致し、jaxpr はバッチサイズに依存しません。"
