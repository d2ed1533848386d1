"""6.1-1 rbf_features のチェック（ch6/checks/s6_1/rbf_features.py）のテスト。"""
import functools

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from tests.checkhelp import boom, expect, not_done


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
    expect("6.1-1", fn, "pass")


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
           "kernel の引数 g は形 () のはずが、形 (7,)", "gammas は中心ごと")
    expect("6.1-1", lambda k, x, c, g: jax.vmap(k, in_axes=(None, None, 0))(x, c, g), "fail",
           "kernel の引数 c は形 (3,) のはずが、形 (7, 3)", "centers と gammas は中心ごと")
    expect("6.1-1", lambda k, x, c, g: jnp.stack([k(x, ci, gi) for ci, gi in zip(c, g)]), "fail", "Python のループ")
    expect("6.1-1", lambda k, x, c, g: lax.map(lambda cg: k(x, *cg), (c, g)), "fail", "scan")
    expect("6.1-1", lambda k, x, c, g: jnp.zeros(7), "fail", "一度も呼ばれていません")
    expect("6.1-1", lambda k, x, c, g: rbf_ref(k, x, c, g) + 0.1, "fail", "値が違います")
    expect("6.1-1", not_done, "not_done", "関数の本体に答えを書いてから")
    expect("6.1-1", boom, "error", "ZeroDivisionError")
    expect("6.1-1", 42, "fail", "関数を渡してください")


def test_6_1_1_broadcasting_the_notebook_formula_does_not_pass():
    """ノートブックの rbf の式をブロードキャストで書き写した答え: 渡された kernel を使っていない。"""
    def copied(kernel, x, centers, gammas):
        return jnp.exp(-gammas * jnp.sum((x - centers) ** 2, axis=-1))

    expect("6.1-1", copied, "fail", "一度も呼ばれていません")

    def broadcast_kernel(kernel, x, centers, gammas):
        return kernel(x, centers, gammas)

    expect("6.1-1", broadcast_kernel, "fail", "centers と gammas は中心ごと")
