"""6.4-2 clipped_mean_grad のチェック（ch6/checks/s6_4/clipped_mean_grad.py）のテスト: 利用者ごとにまとめてからクリップする。"""
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


def _segment(users, num_users, mean=True):
    counts = jax.ops.segment_sum(jnp.ones(users.shape), users, num_segments=num_users)

    def per_user(v):
        sums = jax.ops.segment_sum(v, users, num_segments=num_users)
        return sums / _bcast(counts, v) if mean else sums
    return per_user


def _clip_mean(g, c, divide=None):
    s = jnp.minimum(1.0, c / _norms(g))
    return jax.tree.map(lambda v: jnp.sum(v * _bcast(s, v), axis=0) / (divide or v.shape[0]), g)


def clipped_ref(f, p, batch, users, num_users, c):
    g = jax.tree.map(_segment(users, num_users), _per_example(f, p, batch))
    return _clip_mean(g, c)


def clipped_one_hot(f, p, batch, users, num_users, c):
    # one-hot の行列積で利用者ごとの平均を作る別解
    w = jax.nn.one_hot(users, num_users)  # (B, U)
    w = w / w.sum(axis=0)
    g = jax.tree.map(lambda v: jnp.tensordot(w, v, axes=(0, 0)), _per_example(f, p, batch))
    return _clip_mean(g, c)


def clipped_optax(f, p, batch, users, num_users, c):
    # 利用者ごとの平均を作ってから、optax の部品でクリップして足す別解
    g = jax.tree.map(_segment(users, num_users), _per_example(f, p, batch))
    leaves, tdef = jax.tree.flatten(g)
    summed, _ = optax.per_example_global_norm_clip(leaves, c)
    return jax.tree.unflatten(tdef, [v / num_users for v in summed])


@pytest.mark.parametrize("fn", [clipped_ref, clipped_one_hot, clipped_optax,
                                jax.jit(clipped_ref, static_argnums=(0, 4))])
def test_6_4_2_correct(fn):
    expect("6.4-2", fn, "pass", "利用者")


def sample_clip(f, p, batch, users, num_users, c):
    # 6.1-4 の答えのまま: サンプルごとにクリップして平均する
    return _clip_mean(_per_example(f, p, batch), c)


def sample_clip_then_users(f, p, batch, users, num_users, c):
    g = _per_example(f, p, batch)
    s = jnp.minimum(1.0, c / _norms(g))
    g = jax.tree.map(lambda v: v * _bcast(s, v), g)
    return jax.tree.map(lambda v: v.mean(0), jax.tree.map(_segment(users, num_users), g))


def user_sums(f, p, batch, users, num_users, c):
    return _clip_mean(jax.tree.map(_segment(users, num_users, mean=False), _per_example(f, p, batch)), c)


def divided_by_samples(f, p, batch, users, num_users, c):
    g = jax.tree.map(_segment(users, num_users), _per_example(f, p, batch))
    return _clip_mean(g, c, divide=users.shape[0])


def no_clip(f, p, batch, users, num_users, c):
    return jax.tree.map(lambda v: v.mean(0), jax.tree.map(_segment(users, num_users), _per_example(f, p, batch)))


def per_leaf(f, p, batch, users, num_users, c):
    g = jax.tree.map(_segment(users, num_users), _per_example(f, p, batch))
    return jax.tree.map(lambda v: jnp.mean(v * _bcast(jnp.minimum(1.0, c / _norms([v])), v), 0), g)


def normalize_all(f, p, batch, users, num_users, c):
    g = jax.tree.map(_segment(users, num_users), _per_example(f, p, batch))
    s = c / _norms(g)
    return jax.tree.map(lambda v: jnp.mean(v * _bcast(s, v), 0), g)


def summed_over_users(f, p, batch, users, num_users, c):
    return jax.tree.map(lambda v: v * num_users, clipped_ref(f, p, batch, users, num_users, c))


def summed_with_rounding(f, p, batch, users, num_users, c):
    # 合計にする誤りを、TPU の丸め程度の誤差つきで（正しい値の側では許容誤差の内 6e-6 が、5 倍で 3e-5 になる）。
    # 誤差を足すのは丸めのない CPU でだけ: チップでは本物の丸めがすでにあり、足すと丸めを二重に数える
    rounding = 6e-6 if jax.default_backend() == "cpu" else 0.0
    return jax.tree.map(lambda v: (v + rounding) * num_users, clipped_ref(f, p, batch, users, num_users, c))


def keep_users(f, p, batch, users, num_users, c):
    g = jax.tree.map(_segment(users, num_users), _per_example(f, p, batch))
    s = jnp.minimum(1.0, c / _norms(g))
    return jax.tree.map(lambda v: v * _bcast(s, v), g)


def fixed_five_users(f, p, batch, users, num_users, c):
    # 利用者の数を決め打ち（引数 num_users を使わない）
    return clipped_ref(f, p, batch, users, 5, c)


def loop_over_users(f, p, batch, users, num_users, c):
    g = _per_example(f, p, batch)
    pick = [jnp.where(users == u, 1.0, 0.0) for u in range(num_users)]
    user_g = jax.tree.map(lambda v: jnp.stack([jnp.tensordot(m, v, axes=(0, 0)) / m.sum() for m in pick]), g)
    return _clip_mean(user_g, c)


def loop_over_samples(f, p, batch, users, num_users, c):
    gs = [jax.grad(f)(p, {"x": x, "y": y}) for x, y in zip(batch["x"], batch["y"])]
    g = jax.tree.map(lambda *v: jnp.stack(v), *gs)
    return _clip_mean(jax.tree.map(_segment(users, num_users), g), c)


def test_6_4_2_wrong():
    expect("6.4-2", sample_clip, "fail", "サンプルごとにクリップしています", "6.1-4", "G_u")
    expect("6.4-2", sample_clip_then_users, "fail", "サンプルごとにクリップしてから利用者ごと")
    expect("6.4-2", user_sums, "fail", "合計でまとめています", "平均です")
    expect("6.4-2", divided_by_samples, "fail", "サンプルの数 14", "利用者の数 num_users")
    expect("6.4-2", no_clip, "fail", "クリップが効いていません")
    expect("6.4-2", per_leaf, "fail", "葉ごと")
    expect("6.4-2", normalize_all, "fail", "min(1, max_norm/‖G_u‖)")
    expect("6.4-2", summed_over_users, "fail", "ちょうど 5 倍", "利用者について平均")
    expect("6.4-2", summed_with_rounding, "fail", "ちょうど 5 倍", "利用者について平均")
    expect("6.4-2", keep_users, "fail", "利用者ごとの勾配のまま")
    expect("6.4-2", fixed_five_users, "fail", "num_users=3", "引数の値")
    expect("6.4-2", loop_over_users, "fail", "利用者の数を 3 から 6", "segment_sum")
    expect("6.4-2", loop_over_samples, "fail", "サンプル数を 14 から 28", "vmap(grad(...))")
    expect("6.4-2", lambda f, p, batch, u, k, c: [p["enc"], p["out"]], "fail", "構造")
    expect("6.4-2", lambda f, p, batch, u, k, c: jax.tree.map(jnp.zeros_like, p), "fail", "値が違います")
    expect("6.4-2", lambda f, p, batch, u, k, c: jax.grad(f)(p, batch), "fail", "バッチのまま", "vmap")
    expect("6.4-2", lambda f, p, batch, c: p, "error", "TypeError")  # 以前の問題文の形（引数 4 つ）
    expect("6.4-2", not_done, "not_done", "関数の本体に答えを書いてから")
    expect("6.4-2", boom, "error", "ZeroDivisionError")
