"""6.4-2 clipped_mean_grad のチェック（ch6/checks/s6_4/clipped_mean_grad.py）のテスト。"""
import jax
import jax.numpy as jnp
import optax
import pytest

from tests.checkhelp import boom, expect, not_done


def _per_example(f, p, batch):
    return jax.vmap(jax.grad(f), in_axes=(None, 0))(p, batch)


def _norms(g):
    return jnp.sqrt(sum(jnp.sum(v.reshape(v.shape[0], -1) ** 2, axis=1) for v in jax.tree.leaves(g)))


def _bcast(s, v):
    return s.reshape((-1,) + (1,) * (v.ndim - 1))


def clipped_ref(f, p, batch, c):
    g = _per_example(f, p, batch)
    s = jnp.minimum(1.0, c / _norms(g))
    return jax.tree.map(lambda v: jnp.mean(v * _bcast(s, v), axis=0), g)


def clipped_optax(f, p, batch, c):
    # optax の部品を使う別解
    g = _per_example(f, p, batch)
    leaves, tdef = jax.tree.flatten(g)
    summed, _ = optax.per_example_global_norm_clip(leaves, c)
    return jax.tree.unflatten(tdef, [v / batch["x"].shape[0] for v in summed])


def clipped_dict_axes(f, p, batch, c):
    # in_axes を辞書の形で書いても同じ
    g = jax.vmap(jax.grad(f), in_axes=(None, {"x": 0, "y": 0}))(p, batch)
    s = jnp.minimum(1.0, c / _norms(g))
    return jax.tree.map(lambda v: jnp.mean(v * _bcast(s, v), axis=0), g)


@pytest.mark.parametrize("fn", [clipped_ref, clipped_optax, clipped_dict_axes, jax.jit(clipped_ref, static_argnums=0)])
def test_6_4_2_correct(fn):
    expect("6.4-2", fn, "pass", "正解")


def test_6_4_2_wrong():
    def no_clip(f, p, batch, c):
        return jax.tree.map(lambda v: v.mean(0), _per_example(f, p, batch))

    def clip_after_mean(f, p, batch, c):
        m = jax.grad(lambda q: jnp.mean(jax.vmap(f, in_axes=(None, 0))(q, batch)))(p)
        return jax.tree.map(lambda v: v * jnp.minimum(1.0, c / optax.tree.norm(m)), m)

    def per_leaf(f, p, batch, c):
        g = _per_example(f, p, batch)
        return jax.tree.map(lambda v: jnp.mean(v * _bcast(jnp.minimum(1.0, c / _norms([v])), v), 0), g)

    def summed(f, p, batch, c):
        return jax.tree.map(lambda v: v * batch["x"].shape[0], clipped_ref(f, p, batch, c))

    def normalize_all(f, p, batch, c):
        g = _per_example(f, p, batch)
        s = c / _norms(g)
        return jax.tree.map(lambda v: jnp.mean(v * _bcast(s, v), 0), g)

    def keep_batch(f, p, batch, c):
        g = _per_example(f, p, batch)
        s = jnp.minimum(1.0, c / _norms(g))
        return jax.tree.map(lambda v: v * _bcast(s, v), g)

    def skip_out_leaf(f, p, batch, c):
        # ノルムに 1 つの葉（out）を入れ忘れる
        g = _per_example(f, p, batch)
        s = jnp.minimum(1.0, c / _norms(g["enc"]))
        return jax.tree.map(lambda v: jnp.mean(v * _bcast(s, v), 0), g)

    def loop(f, p, batch, c):
        gs = [jax.grad(f)(p, {"x": x, "y": y}) for x, y in zip(batch["x"], batch["y"])]
        gs = [jax.tree.map(lambda v: v * jnp.minimum(1.0, c / optax.tree.norm(g)), g) for g in gs]
        return jax.tree.map(lambda *v: jnp.mean(jnp.stack(v), 0), *gs)

    expect("6.4-2", no_clip, "fail", "クリップされていません")
    expect("6.4-2", clip_after_mean, "fail", "クリップされていません", "平均の前")
    expect("6.4-2", per_leaf, "fail", "葉ごと")
    expect("6.4-2", summed, "fail", "合計")
    expect("6.4-2", normalize_all, "fail", "min(1, max_norm/‖g_i‖)")
    expect("6.4-2", keep_batch, "fail", "サンプルごとの勾配のまま")
    expect("6.4-2", skip_out_leaf, "fail", "値が違います")
    expect("6.4-2", lambda f, p, batch, c: [p["enc"], p["out"]], "fail", "構造")
    expect("6.4-2", lambda f, p, batch, c: jax.tree.map(jnp.zeros_like, p), "fail", "値が違います")
    expect("6.4-2", lambda f, p, batch, c: jax.grad(f)(p, batch), "fail", "バッチのまま", "vmap")
    expect("6.4-2", loop, "fail", "Python のループ")
    expect("6.4-2", not_done, "not_done", "まだ解答されていません")
    expect("6.4-2", boom, "error", "ZeroDivisionError")
