"""6.1-4 clipped_mean_grad: DP-SGD の勾配（サンプルごとに切り詰めてから平均）。

隠し入力は CPU に置いて渡し、参照も CPU で計算します（:mod:`ch6.checks.on_cpu`）。float32 の tanh と和の丸めは
バックエンドで違うので、こうしてどのマシンでも同じ値で比べます（学習者版は CPU で記録した値を引きます）。
"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, call, exercise, expect_no_batch_loop, f32, fmt
from ...recorded import recorded
from ..clipping import clipped_mean, clipping_mistakes, sample_norms
from ..on_cpu import measuring_device, placed_inputs
from .common import Spy, exercise_rng, expect_tree, expect_used, guard, shape_of, tree_close

# 6.1-4 -------------------------------------------------------------------------------
# DP-SGD の勾配: サンプルごとに勾配のノルムを max_norm 以下に切り詰めてから平均する

def _loss_4(spy: Spy, d: int):
    """隠し loss_fn: params = {"hidden": {"W", "b"}, "head": v}、x (d,)、y () -> スカラー。"""
    import jax.numpy as jnp

    hint = "サンプルの軸は vmap でバッチにします。"

    def loss_fn(params, x, y):
        spy.calls += 1
        guard("loss_fn", "x", x, (d,), hint)
        guard("loss_fn", "y", y, (), hint)
        h = jnp.tanh(params["hidden"]["W"] @ x + params["hidden"]["b"])
        return (params["head"] @ h - y) ** 2

    return loss_fn


def _params_4(rng, d, h):
    return {"hidden": {"W": f32(rng.normal(size=(h, d)) * 0.7), "b": f32(rng.normal(size=(h,)) * 0.5)},
            "head": f32(rng.normal(size=(h,)))}


@recorded
def _expected(params, xs, ys) -> dict:
    """隠し入力（params, xs, ys）での参照の値: 境目の max_norm と小さな値 small、そこでの正しい値と、名指しする誤りの値
    （キー → (max_norm での値, small での値)）、max_norm でクリップされるサンプルの数。"""
    import jax

    # サンプルごとの勾配: 1 件ずつ grad（チェック側なので素直なループ）。葉の先頭にサンプルの軸
    loss_fn = _loss_4(Spy(), xs.shape[1])
    with jax.default_device(measuring_device()):  # 学習者の関数と同じ CPU で
        grads = [jax.grad(loss_fn)(params, x, y) for x, y in zip(xs, ys)]
    per = jax.tree.map(lambda *g: np.stack([np.asarray(v, np.float64) for v in g]), *grads)
    norms = sample_norms(per)
    # 境目 max_norm をサンプルのノルムの中ほどに置き（切り詰めるサンプルと、そのままのサンプルの両方がある）、
    # 全部を切り詰める小さな値（その 1/10）でも呼ぶ。2 つの値で、式のどの部分を落としても結果が変わる。
    max_norm = float(np.round(np.median(norms), 2))
    small = round(max_norm / 10, 3)

    def elementwise(c):   # 要素ごとに ±max_norm で切る（jnp.clip）
        return jax.tree.map(lambda v: np.clip(v, -c, c).mean(0), per)

    def squared(c):       # ノルムの 2 乗（sqrt なし）で倍率を決める
        s = np.minimum(1.0, c / norms ** 2)
        return jax.tree.map(lambda v: (v * s.reshape((-1,) + (1,) * (v.ndim - 1))).mean(0), per)

    alt, alt_small = clipping_mistakes(per, max_norm), clipping_mistakes(per, small)
    mistakes = {key: (alt[key], alt_small[key]) for key in alt}
    mistakes["elementwise"] = (elementwise(max_norm), elementwise(small))
    mistakes["squared"] = (squared(max_norm), squared(small))
    return {"max_norm": max_norm, "small": small, "clipped": int((norms > max_norm).sum()),
            "want": clipped_mean(per, max_norm), "want_small": clipped_mean(per, small), "mistakes": mistakes}


_MISTAKES = {
    "no_clip": "勾配がクリップされていません。ノルムが max_norm を超えるサンプルは max_norm / ノルム 倍に縮めます。",
    "clip_after_mean": "平均してからクリップしています。クリップはサンプルごと（平均する前）に行います。",
    "per_leaf": "葉ごとに別々のノルムでクリップしています。ノルムはすべての葉をまとめた 1 本のベクトルのノルムです。",
    "scale_all": "ノルムが max_norm 以下のサンプルまで大きくしています。倍率は min(1, max_norm / ノルム) です。",
    "sum": "サンプルについて平均ではなく合計しています。",
    "elementwise": "勾配を要素ごとに ±max_norm でクリップしています。ベクトル全体のノルムで、g_i を min(1, max_norm / ||g_i||) 倍します。",
    "squared": "倍率をノルムの 2 乗で決めています。ノルムは 2 乗和の平方根（jnp.sqrt）です。",
}


@exercise("6.1-4", "clipped_mean_grad")
def check_clipped_mean_grad(fn):
    rng = exercise_rng(4)
    d, h, b = 4, 5, 9
    params = _params_4(rng, d, h)

    def data(n):
        return f32(rng.normal(size=(n, d)) * 1.5), f32(rng.normal(size=(n,)) * 2.0)

    xs, ys = data(b)
    # 参照の値はすべて学習者を呼ぶ前に（学習者版では、作るときに記録した値を引く）
    ref = _expected(params, xs, ys)
    max_norm, small, want, want_small = ref["max_norm"], ref["small"], ref["want"], ref["want_small"]
    spy = Spy()
    params_c, xs_c, ys_c = placed_inputs((params, xs, ys))  # 学習者の関数は CPU で計算する（モジュールの説明）
    got = call(fn, _loss_4(spy, d), params_c, xs_c, ys_c, max_norm)
    expect_used("loss_fn", spy)
    got_leaves, want_leaves = _leaves_or_empty(got), _leaves_or_empty(want)
    if len(got_leaves) == len(want_leaves) and all(shape_of(g) == (b, *np.shape(w)) for g, w in zip(got_leaves, want_leaves)):
        raise Fail(f"葉の先頭にサンプルの軸（{b}）が残っています。クリップした勾配を、最後にサンプルについて平均してください。")
    got_small = call(fn, _loss_4(Spy(), d), params_c, xs_c, ys_c, small)
    if not (tree_close(got, want) and tree_close(got_small, want_small)):
        for key, msg in _MISTAKES.items():
            alt, alt_small = ref["mistakes"][key]
            if tree_close(got, alt) and tree_close(got_small, alt_small):
                raise Fail(msg)
    expect_tree(got, want, "clipped_mean_grad の結果",
                 hint="g_i を min(1, max_norm / ||g_i||) 倍して平均します。")
    expect_tree(got_small, want_small, f"max_norm={fmt(small)}（全サンプルをクリップする値）のときの結果",
                 hint="max_norm は引数の値を使います。")
    expect_no_batch_loop(fn, lambda n: (_loss_4(Spy(), d), params, *data(n), max_norm))
    clipped = ref["clipped"]
    return f"別の loss_fn と {b} サンプル（うち {clipped} 件をクリップ）で一致し、jaxpr はバッチの大きさに依存しません。"


def _leaves_or_empty(tree) -> list:
    import jax

    try:
        return jax.tree.leaves(tree)
    except Exception:
        return []
