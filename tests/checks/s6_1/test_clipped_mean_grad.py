"""6.1-4 clipped_mean_grad のチェック（ch6/checks/s6_1/clipped_mean_grad.py）のテスト。"""
import jax
import jax.numpy as jnp
import pytest

from tests.checkhelp import boom, expect


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
    expect("6.1-4", fn, "pass")


def test_6_1_4_hidden_max_norm_clips_some_samples_and_not_others():
    """隠し入力の境目 max_norm: 切り詰めるサンプルと、そのままのサンプルの両方がある（どちらの項も結果に効く）。"""
    msg = expect("6.1-4", clip_ref, "pass")
    import re

    clipped = int(re.search(r"うち (\d+) 件をクリップ", msg).group(1))
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

    expect("6.1-4", no_clip, "fail", "クリップされていません")
    expect("6.1-4", clip_after_mean, "fail", "平均してからクリップしています")
    expect("6.1-4", per_leaf, "fail", "葉ごとに別々のノルム")
    expect("6.1-4", always_scale, "fail", "min(1, max_norm / ノルム)")
    expect("6.1-4", summed, "fail", "合計")
    expect("6.1-4", not_averaged, "fail", "葉の先頭にサンプルの軸（9）")
    expect("6.1-4", looped, "fail", "Python のループ")
    expect("6.1-4", fixed_norm, "fail", "max_norm")
    expect("6.1-4", lambda loss_fn, params, xs, ys, max_norm: jax.tree.leaves(clip_ref(loss_fn, params, xs, ys, max_norm)),
           "fail", "同じ構造")
    expect("6.1-4", lambda loss_fn, params, xs, ys, max_norm: loss_fn(params, xs, ys), "fail", "サンプルの軸は vmap")
    expect("6.1-4", lambda loss_fn, params, xs, ys, max_norm: loss_fn(params), "error", "TypeError")
    expect("6.1-4", boom, "error", "ZeroDivisionError")


def test_6_1_4_hands_the_inputs_over_on_the_cpu():
    """隠し入力は CPU に置いて渡す（ch6.checks.on_cpu）。既定のデバイスが別でも、学習者の関数は CPU の配列を受け取り、
    答えは CPU で計算される。TPU では、CPU の記録と TPU で計算した答えが 3e-4 ずれ、学習者版で正しい答えが落ちた。"""
    from ch6.checks.on_cpu import measuring_device

    seen = []

    def spying(loss_fn, params, xs, ys, max_norm):
        if not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(xs)):  # jaxpr を見る呼び出しは除く
            seen.append({d for leaf in jax.tree.leaves((params, xs, ys)) for d in leaf.devices()})
        return clip_ref(loss_fn, params, xs, ys, max_norm)

    with jax.default_device(jax.devices()[-1]):  # チップのように、既定のデバイスが CPU の 1 番目でない
        expect("6.1-4", spying, "pass")
    assert seen and all(s == {measuring_device()} for s in seen), seen
