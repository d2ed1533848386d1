"""6.1 のチェック: 参照解と別の正解は通り、典型的な誤りは問題を名指しして落ちる。

どの演習も 1 サンプル用の関数を引数で受け取ります。チェックはノートブックの例とは別の隠し関数を渡すので、
ここでの答えも、渡された関数だけを使って書きます。
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from ch6 import run_check
from ch6.checks import s6_1
from tests.checkhelp import boom, not_done  # noqa: E402,F401


def status(ex, fn):
    r = run_check(ex, fn)
    return r.status, r.message


def expect(ex, fn, want_status, *words):
    st, msg = status(ex, fn)
    assert st == want_status, msg
    assert "\n" not in msg
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    return msg


def test_checks_keep_no_copy_of_the_notebook_definitions():
    """チェックはノートブックの関数（predict、dist など）を写して持たない: 学習者の関数が引数で受け取る。"""
    for name in ("predict", "dist", "rbf", "mask_after", "mlp", "predict_p"):
        assert not hasattr(s6_1, name), name


# 6.1-1 --------------------------------------------------------------------------------
def rbf_ref(kernel, x, centers, gammas):
    return jax.vmap(kernel, in_axes=(None, 0, 0))(x, centers, gammas)


@pytest.mark.parametrize("fn", [
    rbf_ref,
    lambda kernel, x, centers, gammas: jax.vmap(lambda c, g: kernel(x, c, g))(centers, gammas),  # 閉包で x を共通に
    lambda kernel, x, centers, gammas: jax.vmap(functools.partial(kernel, x))(centers, gammas),
    lambda kernel, x, centers, gammas: jax.vmap(kernel, in_axes=(None, -2, -1))(x, centers, gammas),
    jax.jit(rbf_ref, static_argnums=0),
])
def test_6_1_1_correct(fn):
    expect("6.1-1", fn, "pass", "正解")


def test_6_1_1_wrong_in_axes_is_explained_with_sizes_and_a_tailored_hint():
    """いちばん多い誤り（x まで 0 軸でバッチにする）: どの引数のどの軸が何の大きさかと、この演習のヒント。"""
    for axes in (0, (0, 0, 0)):
        msg = expect("6.1-1", lambda k, x, c, g, axes=axes: jax.vmap(k, in_axes=axes)(x, c, g), "fail",
                     "そろっていません", "x の 0 軸が 3", "c の 0 軸など 2 個が 7", "x の in_axes は None")
        assert "vmap got" not in msg
    expect("6.1-1", lambda k, x, c, g: jax.vmap(k, in_axes=(0, None, 0))(x, c, g), "fail",
           "x の 0 軸が 3", "g の 0 軸が 7", "None")


def test_6_1_1_wrong():
    expect("6.1-1", lambda k, x, c, g: jax.vmap(k, in_axes=(None, 0, None))(x, c, g), "fail",
           "kernel の引数 g に形 (7,)", "gammas は中心ごとに 1 つずつ")
    expect("6.1-1", lambda k, x, c, g: jax.vmap(k, in_axes=(None, None, 0))(x, c, g), "fail",
           "kernel の引数 c に形 (7, 3)", "中心 1 つ用")
    expect("6.1-1", lambda k, x, c, g: jnp.stack([k(x, ci, gi) for ci, gi in zip(c, g)]), "fail", "Python のループ")
    expect("6.1-1", lambda k, x, c, g: lax.map(lambda cg: k(x, *cg), (c, g)), "fail", "scan")
    expect("6.1-1", lambda k, x, c, g: jnp.zeros(7), "fail", "一度も呼ばれていません")
    expect("6.1-1", lambda k, x, c, g: rbf_ref(k, x, c, g) + 0.1, "fail", "値が違います")
    expect("6.1-1", not_done, "not_done", "まだ解答されていません")
    expect("6.1-1", boom, "error", "ZeroDivisionError")
    expect("6.1-1", 42, "fail", "関数を渡してください")


def test_6_1_1_broadcasting_the_notebook_formula_does_not_pass():
    """ノートブックの rbf の式をブロードキャストで書き写した答え: 渡された kernel を使っていない。"""
    def copied(kernel, x, centers, gammas):
        return jnp.exp(-gammas * jnp.sum((x - centers) ** 2, axis=-1))

    expect("6.1-1", copied, "fail", "一度も呼ばれていません")

    def broadcast_kernel(kernel, x, centers, gammas):
        return kernel(x, centers, gammas)

    expect("6.1-1", broadcast_kernel, "fail", "中心 1 つ用")


# 6.1-2 --------------------------------------------------------------------------------
def tm_ref(fn, seqs, lengths):
    return jax.vmap(fn, in_axes=(1, 0), out_axes=1)(seqs, lengths)


def tm_transposed(fn, seqs, lengths):
    """自分で軸を動かす書き方（.T / swapaxes）も正解: 問題文はこれを禁じていない。"""
    return jnp.swapaxes(jax.vmap(fn)(jnp.swapaxes(seqs, 0, 1), lengths), 0, 1)


@pytest.mark.parametrize("fn", [
    tm_ref,
    tm_transposed,
    lambda fn, seqs, lengths: jax.vmap(fn, in_axes=(-2, 0), out_axes=-2)(seqs, lengths),
    lambda fn, seqs, lengths: jax.vmap(fn, in_axes=(1, 0))(seqs, lengths).transpose(1, 0, 2),
    jax.jit(tm_ref, static_argnums=0),
])
def test_6_1_2_correct(fn):
    expect("6.1-2", fn, "pass", "正解")


def test_6_1_2_moving_axes_yourself_is_allowed():
    """回帰: 問題文が禁じた .T の答えをチェックが通していた。いまは問題文も「軸の動かし方は自由」と書き、チェックと一致する。"""
    expect("6.1-2", tm_transposed, "pass")
    text = _markdown_of("6.1-2")
    assert "自由" in text and "転置" in text and "使わず" not in text


def test_6_1_2_wrong():
    expect("6.1-2", lambda fn, s, n: jax.vmap(fn, in_axes=(1, 0))(s, n), "fail", "(4, 6, 3)", "out_axes")
    expect("6.1-2", lambda fn, s, n: jax.vmap(fn, in_axes=(0, 0), out_axes=1)(s, n), "fail",
           "seq の 0 軸が 6", "length の 0 軸が 4", "1 軸目")
    expect("6.1-2", lambda fn, s, n: jax.vmap(fn, in_axes=1, out_axes=1)(s, n), "fail", "形 (4,)", "lengths は形 (4,) で 0 軸目")
    expect("6.1-2", lambda fn, s, n: jax.vmap(fn, in_axes=(1, None), out_axes=1)(s, n), "fail",
           "fn の引数 length に形 (4,)")
    expect("6.1-2", lambda fn, s, n: jnp.stack([fn(s[:, i], n[i]) for i in range(s.shape[1])], axis=1), "fail",
           "Python のループ")
    expect("6.1-2", lambda fn, s, n: s, "fail", "一度も呼ばれていません")
    expect("6.1-2", not_done, "not_done")


def _markdown_of(ex_id):
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parent.parent / "solutions" / "6_1_vmap.ipynb").read_text("utf-8"))
    return next("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"
                and f"（{ex_id}）" in "".join(c["source"]))


# 6.1-3 --------------------------------------------------------------------------------
def bd_ref(pair_fn, Xs, Y):
    row = jax.vmap(pair_fn, in_axes=(None, 0))
    table = jax.vmap(row, in_axes=(0, None))
    return jax.vmap(table, in_axes=(0, None))(Xs, Y)


@pytest.mark.parametrize("fn", [
    bd_ref,
    lambda pair_fn, Xs, Y: jax.vmap(lambda X: jax.vmap(lambda x: jax.vmap(lambda y: pair_fn(x, y))(Y))(X))(Xs),
    # 内側で Y を外に回してから軸を入れ替えても正解
    lambda pair_fn, Xs, Y: jnp.swapaxes(
        jax.vmap(jax.vmap(jax.vmap(pair_fn, (0, None)), (None, 0)), (0, None))(Xs, Y), 1, 2),
])
def test_6_1_3_correct(fn):
    expect("6.1-3", fn, "pass", "正解")


def test_6_1_3_wrong_in_axes_is_explained_with_sizes_and_a_tailored_hint():
    msg = expect("6.1-3", lambda p, Xs, Y: jax.vmap(jax.vmap(jax.vmap(p, (None, 0)), (0, None)))(Xs, Y), "fail",
                 "そろっていません", "の 0 軸が 3", "の 0 軸が 4", "外側の 2 段では Y の in_axes は None")
    assert "vmap got" not in msg


def test_6_1_3_broadcasting_without_vmap_does_not_pass():
    """回帰: ブロードキャストだけで vmap を使わない答えが通っていた。pair_fn は 2 点用なので、配列ごと渡すと落ちる。"""
    def broadcast(pair_fn, Xs, Y):
        return pair_fn(Xs[:, :, None, :], Y[None, None, :, :])

    expect("6.1-3", broadcast, "fail", "pair_fn の引数 x に形 (3, 5, 1, 6)", "2 点用")

    def copied(pair_fn, Xs, Y):  # ノートブックのユークリッド距離を書き写した
        return jnp.sqrt(jnp.sum((Xs[:, :, None, :] - Y[None, None, :, :]) ** 2, -1))

    expect("6.1-3", copied, "fail", "一度も呼ばれていません")


def test_6_1_3_wrong():
    two_levels = lambda p, Xs, Y: jax.vmap(jax.vmap(p, (None, 0)), (0, None))(Xs, Y)  # noqa: E731
    expect("6.1-3", two_levels, "fail", "pair_fn の引数 x に形 (5, 6)")
    swapped = lambda p, Xs, Y: jax.vmap(jax.vmap(jax.vmap(p, (0, None)), (None, 0)), (0, None))(Xs, Y)  # noqa: E731
    expect("6.1-3", swapped, "fail", "(3, 4, 5)", "軸の順番")

    def looped(p, Xs, Y):
        return jnp.stack([jax.vmap(jax.vmap(p, (None, 0)), (0, None))(X, Y) for X in Xs])

    expect("6.1-3", looped, "fail", "点群の組の数", "Python のループ")

    def looped_y(p, Xs, Y):
        return jnp.stack([jax.vmap(jax.vmap(p, (0, None)), (0, None))(Xs, y) for y in Y], axis=-1)

    expect("6.1-3", looped_y, "fail", "Y の点の数", "Python のループ")
    expect("6.1-3", lambda p, Xs, Y: jnp.zeros((3, 5, 4)), "fail", "一度も呼ばれていません")
    expect("6.1-3", lambda p, Xs, Y: bd_ref(p, Xs, Y) * 2, "fail", "値が違います")


# 6.1-4 --------------------------------------------------------------------------------
def clip_ref(loss_fn, params, xs, ys, max_norm):
    def clipped_one(x, y):
        g = jax.grad(loss_fn)(params, x, y)
        norm = jnp.sqrt(sum(jnp.sum(leaf ** 2) for leaf in jax.tree.leaves(g)))
        return jax.tree.map(lambda leaf: leaf * jnp.minimum(1.0, max_norm / norm), g)

    return jax.tree.map(lambda leaf: jnp.mean(leaf, axis=0), jax.vmap(clipped_one)(xs, ys))


def clip_ravel(loss_fn, params, xs, ys, max_norm):
    from jax.flatten_util import ravel_pytree

    grads = jax.vmap(jax.grad(loss_fn), in_axes=(None, 0, 0))(params, xs, ys)
    flat = jax.vmap(lambda g: ravel_pytree(g)[0])(grads)                      # (B, P)
    scale = jnp.minimum(1.0, max_norm / jnp.linalg.norm(flat, axis=1))       # (B,)
    _, unravel = ravel_pytree(params)
    return unravel(jnp.mean(flat * scale[:, None], axis=0))


def clip_einsum(loss_fn, params, xs, ys, max_norm):
    grads = jax.vmap(jax.grad(loss_fn), in_axes=(None, 0, 0))(params, xs, ys)
    sq = sum(jnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in jax.tree.leaves(grads))
    scale = jnp.clip(max_norm / jnp.sqrt(sq), max=1.0)
    return jax.tree.map(lambda g: jnp.einsum("b,b...->...", scale, g) / g.shape[0], grads)


@pytest.mark.parametrize("fn", [clip_ref, clip_ravel, clip_einsum, jax.jit(clip_ref, static_argnums=0)])
def test_6_1_4_correct(fn):
    expect("6.1-4", fn, "pass", "正解")


def test_6_1_4_hidden_max_norm_clips_some_samples_and_not_others():
    """隠し入力の境目 max_norm: 切り詰めるサンプルと、そのままのサンプルの両方がある（どちらの項も結果に効く）。"""
    msg = expect("6.1-4", clip_ref, "pass")
    import re

    clipped = int(re.search(r"うち (\d+) 件を切り詰め", msg).group(1))
    assert 2 <= clipped <= 9 - 2


def test_6_1_4_wrong():
    def no_clip(loss_fn, params, xs, ys, max_norm):
        return clip_ref(loss_fn, params, xs, ys, jnp.inf)

    def clip_after_mean(loss_fn, params, xs, ys, max_norm):
        g = jax.tree.map(lambda v: v.mean(0), jax.vmap(jax.grad(loss_fn), (None, 0, 0))(params, xs, ys))
        norm = jnp.sqrt(sum(jnp.sum(v ** 2) for v in jax.tree.leaves(g)))
        return jax.tree.map(lambda v: v * jnp.minimum(1.0, max_norm / norm), g)

    def per_leaf(loss_fn, params, xs, ys, max_norm):
        def one(x, y):
            g = jax.grad(loss_fn)(params, x, y)
            return jax.tree.map(lambda v: v * jnp.minimum(1.0, max_norm / jnp.linalg.norm(v.ravel())), g)

        return jax.tree.map(lambda v: v.mean(0), jax.vmap(one)(xs, ys))

    def always_scale(loss_fn, params, xs, ys, max_norm):
        def one(x, y):
            g = jax.grad(loss_fn)(params, x, y)
            norm = jnp.sqrt(sum(jnp.sum(v ** 2) for v in jax.tree.leaves(g)))
            return jax.tree.map(lambda v: v * max_norm / norm, g)

        return jax.tree.map(lambda v: v.mean(0), jax.vmap(one)(xs, ys))

    def summed(loss_fn, params, xs, ys, max_norm):
        return jax.tree.map(lambda v: v * xs.shape[0], clip_ref(loss_fn, params, xs, ys, max_norm))

    def not_averaged(loss_fn, params, xs, ys, max_norm):
        def one(x, y):
            g = jax.grad(loss_fn)(params, x, y)
            norm = jnp.sqrt(sum(jnp.sum(v ** 2) for v in jax.tree.leaves(g)))
            return jax.tree.map(lambda v: v * jnp.minimum(1.0, max_norm / norm), g)

        return jax.vmap(one)(xs, ys)

    def looped(loss_fn, params, xs, ys, max_norm):
        parts = [clip_ref(loss_fn, params, x[None], y[None], max_norm) for x, y in zip(xs, ys)]
        return jax.tree.map(lambda *v: jnp.mean(jnp.stack(v), 0), *parts)

    def fixed_norm(loss_fn, params, xs, ys, max_norm):  # 引数の max_norm を使わない
        return clip_ref(loss_fn, params, xs, ys, 1.0)

    expect("6.1-4", no_clip, "fail", "切り詰めていません")
    expect("6.1-4", clip_after_mean, "fail", "平均してから切り詰めています")
    expect("6.1-4", per_leaf, "fail", "葉ごとに別々のノルム")
    expect("6.1-4", always_scale, "fail", "min(1, max_norm / ノルム)")
    expect("6.1-4", summed, "fail", "合計")
    expect("6.1-4", not_averaged, "fail", "葉の先頭にサンプルの軸（9）")
    expect("6.1-4", looped, "fail", "Python のループ")
    expect("6.1-4", fixed_norm, "fail", "max_norm")
    expect("6.1-4", lambda loss_fn, params, xs, ys, max_norm: jax.tree.leaves(clip_ref(loss_fn, params, xs, ys, max_norm)),
           "fail", "同じ構造")
    expect("6.1-4", lambda loss_fn, params, xs, ys, max_norm: loss_fn(params, xs, ys), "fail", "1 サンプル用")
    expect("6.1-4", lambda loss_fn, params, xs, ys, max_norm: loss_fn(params), "error", "TypeError")
    expect("6.1-4", boom, "error", "ZeroDivisionError")


# 6.1-5 --------------------------------------------------------------------------------
def sgd_ref(loss_fn, stacked_params, xs, ys, lrs):
    def one_model(params, lr):
        def mean_loss(p):
            return jnp.mean(jax.vmap(loss_fn, in_axes=(None, 0, 0))(p, xs, ys))

        grads = jax.grad(mean_loss)(params)
        return jax.tree.map(lambda p, g: p - lr * g, params, grads)

    return jax.vmap(one_model, in_axes=(0, 0))(stacked_params, lrs)


def sgd_per_example(loss_fn, stacked_params, xs, ys, lrs):
    """サンプルごとの勾配を平均しても同じ（平均の勾配 = 勾配の平均）。"""
    def one_model(params, lr):
        g = jax.vmap(jax.grad(loss_fn), in_axes=(None, 0, 0))(params, xs, ys)
        return jax.tree.map(lambda p, v: p - lr * v.mean(0), params, g)

    return jax.vmap(one_model)(stacked_params, lrs)


@pytest.mark.parametrize("fn", [sgd_ref, sgd_per_example, jax.jit(sgd_ref, static_argnums=0)])
def test_6_1_5_correct(fn):
    expect("6.1-5", fn, "pass", "正解")


def test_6_1_5_a_python_loop_over_the_samples_is_caught():
    """回帰（ミューテーションの生き残り）: 内側のサンプルの vmap を Python のループにしても通っていた。"""
    def sample_loop(loss_fn, stacked_params, xs, ys, lrs):
        def one_model(params, lr):
            def mean_loss(p):
                return jnp.mean(jnp.stack([loss_fn(p, x, y) for x, y in zip(xs, ys)]))

            grads = jax.grad(mean_loss)(params)
            return jax.tree.map(lambda p, g: p - lr * g, params, grads)

        return jax.vmap(one_model)(stacked_params, lrs)

    expect("6.1-5", sample_loop, "fail", "サンプル数", "Python のループ")


def test_6_1_5_wrong():
    def model_loop(loss_fn, stacked_params, xs, ys, lrs):
        outs = [sgd_ref(loss_fn, jax.tree.map(lambda a: a[i:i + 1], stacked_params), xs, ys, lrs[i:i + 1])
                for i in range(lrs.shape[0])]
        return jax.tree.map(lambda *v: jnp.concatenate(v), *outs)

    def same_lr(loss_fn, stacked_params, xs, ys, lrs):
        return sgd_ref(loss_fn, stacked_params, xs, ys, jnp.full_like(lrs, lrs[0]))

    def summed(loss_fn, stacked_params, xs, ys, lrs):
        return sgd_ref(loss_fn, stacked_params, xs, ys, lrs * xs.shape[0])

    def ascent(loss_fn, stacked_params, xs, ys, lrs):
        return sgd_ref(loss_fn, stacked_params, xs, ys, -lrs)

    def grads_only(loss_fn, stacked_params, xs, ys, lrs):
        return jax.tree.map(lambda a, b: (a - b) / lrs.reshape((-1,) + (1,) * (a.ndim - 1)),
                            stacked_params, sgd_ref(loss_fn, stacked_params, xs, ys, lrs))

    def no_model_vmap(loss_fn, stacked_params, xs, ys, lrs):
        return jax.vmap(loss_fn, in_axes=(None, 0, 0))(stacked_params, xs, ys)

    expect("6.1-5", model_loop, "fail", "モデル数", "Python のループ")
    expect("6.1-5", same_lr, "fail", "同じ学習率")
    expect("6.1-5", summed, "fail", "合計")
    expect("6.1-5", ascent, "fail", "勾配の向き")
    expect("6.1-5", grads_only, "fail", "勾配を返しています")
    expect("6.1-5", no_model_vmap, "fail", "params['W'] に形 (3, 5, 4)")
    expect("6.1-5", lambda loss_fn, ps, xs, ys, lrs: ps, "fail", "一度も呼ばれていません")
    expect("6.1-5", not_done, "not_done")


# 6.1-6 --------------------------------------------------------------------------------
def bn(x, eps=1e-5):
    mean = lax.pmean(jnp.mean(x, axis=(0, 1)), "batch")
    var = lax.pmean(jnp.mean((x - mean) ** 2, axis=(0, 1)), "batch")
    return (x - mean) / jnp.sqrt(var + eps)


def bn_psum(x, eps=1e-5):
    n = lax.psum(1, "batch") * x.shape[0] * x.shape[1]
    s = lax.psum(jnp.sum(x, axis=(0, 1)), "batch")
    ss = lax.psum(jnp.sum(x * x, axis=(0, 1)), "batch")
    mean = s / n
    return (x - mean) * lax.rsqrt(ss / n - mean * mean + eps)


def bn_reshape(x, eps=1e-5):
    flat = x.reshape(-1, x.shape[-1])
    mean = lax.pmean(flat.mean(0), "batch")
    var = lax.pmean(((flat - mean) ** 2).mean(0), "batch")
    return ((flat - mean) / jnp.sqrt(var + eps)).reshape(x.shape)


@pytest.mark.parametrize("fn", [bn, bn_psum, bn_reshape])
def test_6_1_6_correct(fn):
    expect("6.1-6", fn, "pass", "集団通信")


def test_6_1_6_dropping_eps_is_caught():
    """回帰（ミューテーションの生き残り）: 分散が ~4 の入力では eps を消しても差が ~1e-6 で通っていた。
    隠し入力に分散 ~1e-6 のチャネルを入れ、eps を引数で大きくしても呼ぶ。"""
    def no_eps(x, eps=1e-5):
        mean = lax.pmean(jnp.mean(x, axis=(0, 1)), "batch")
        var = lax.pmean(jnp.mean((x - mean) ** 2, axis=(0, 1)), "batch")
        return (x - mean) / jnp.sqrt(var)

    expect("6.1-6", no_eps, "fail", "eps")

    def fixed_eps(x, eps=1e-5):  # 引数の eps を使わない
        return bn(x, 1e-5)

    expect("6.1-6", fixed_eps, "fail", "eps=0.5")


def test_6_1_6_wrong():
    def per_image(x, eps=1e-5):  # 1 枚の中だけの統計（インスタンス正規化）
        return (x - x.mean((0, 1))) / jnp.sqrt(x.var((0, 1)) + eps)

    def per_pixel(x, eps=1e-5):  # 画素ごとのバッチ統計
        mean = lax.pmean(x, "batch")
        return (x - mean) / jnp.sqrt(lax.pmean((x - mean) ** 2, "batch") + eps)

    expect("6.1-6", per_image, "fail", "画像 1 枚ごと")
    expect("6.1-6", per_pixel, "fail", "画素ごと")
    expect("6.1-6", lambda x, eps=1e-5: x - lax.pmean(jnp.mean(x, (0, 1)), "batch"), "fail", "値が違います")
    expect("6.1-6", lambda x, eps=1e-5: lax.pmean(x, "i"), "error", "NameError", "軸の名前 i")
    expect("6.1-6", not_done, "not_done")
