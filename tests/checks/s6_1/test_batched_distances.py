"""6.1-3 batched_distances のチェック（ch6/checks/s6_1/batched_distances.py）のテスト。"""
import jax
import jax.numpy as jnp
import pytest

from tests.checkhelp import expect


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
    expect("6.1-3", fn, "pass")


def test_6_1_3_wrong_in_axes_is_explained_with_sizes_and_a_tailored_hint():
    msg = expect("6.1-3", lambda p, Xs, Y: jax.vmap(jax.vmap(jax.vmap(p, (None, 0)), (0, None)))(Xs, Y), "fail",
                 "そろっていません", "の 0 軸が 3", "の 0 軸が 4", "外側の 2 段では Y の in_axes は None")
    assert "vmap got" not in msg


def test_6_1_3_broadcasting_without_vmap_does_not_pass():
    """回帰: ブロードキャストだけで vmap を使わない答えが通っていた。pair_fn は 2 点用なので、配列ごと渡すと落ちる。"""
    def broadcast(pair_fn, Xs, Y):
        return pair_fn(Xs[:, :, None, :], Y[None, None, :, :])

    expect("6.1-3", broadcast, "fail", "pair_fn の引数 x は形 (6,) のはずが、形 (3, 5, 1, 6)", "3 段")

    def copied(pair_fn, Xs, Y):  # ノートブックのユークリッド距離を書き写した
        return jnp.sqrt(jnp.sum((Xs[:, :, None, :] - Y[None, None, :, :]) ** 2, -1))

    expect("6.1-3", copied, "fail", "一度も呼ばれていません")


def test_6_1_3_wrong():
    two_levels = lambda p, Xs, Y: jax.vmap(jax.vmap(p, (None, 0)), (0, None))(Xs, Y)  # noqa: E731
    expect("6.1-3", two_levels, "fail", "pair_fn の引数 x は形 (6,) のはずが、形 (5, 6)")
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
