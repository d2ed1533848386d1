"""6.4-1 batched_loss: 値が違うだけだった誤りに、どの引数・軸かを言う名前を（issue 22 の 4）。スカラーの言い方も。"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ch6.checking import Fail, expect_close
from tests.checkhelp import expect

V = jax.vmap


def ys_not_batched(f, p, xs, ys):
    return jnp.mean(V(f, in_axes=(None, 1, None))(p, xs, ys))


def divided_by_features(f, p, xs, ys):
    return jnp.sum(V(f, in_axes=(None, 1, 0))(p, xs, ys)) / xs.shape[0]


def loss_of_the_mean(f, p, xs, ys):
    return f(p, xs.mean(axis=1), ys.mean())


def reshape_not_transpose(f, p, xs, ys):
    return jnp.mean(V(f, in_axes=(None, 0, 0))(p, xs.reshape(xs.shape[1], xs.shape[0]), ys))


def kept_dims(f, p, xs, ys):
    return jnp.mean(V(f, in_axes=(None, 1, 0))(p, xs, ys), keepdims=True)


@pytest.mark.parametrize("fn, words", [
    (ys_not_batched, ("in_axes の 3 つ目が None", "in_axes の 3 つ目")),
    (divided_by_features, ("特徴の数 5", "xs.shape[1]")),
    (loss_of_the_mean, ("平均した入力の損失",)),
    (reshape_not_transpose, ("reshape(13, 5)", "転置ではありません", "in_axes")),
    (kept_dims, ("形 (1,)", "keepdims=True")),
])
def test_each_slip_has_its_own_message(fn, words):
    expect("6.4-1", fn, "fail", *words)


def test_params_batched_by_in_axes_1_names_params():
    expect("6.4-1", lambda f, p, xs, ys: jnp.mean(V(f, in_axes=1)(p, xs, ys)), "fail", "params の葉", "None")


def test_a_wrong_scalar_reads_once_and_without_counts():
    expect("6.4-1", lambda f, p, xs, ys: jnp.float32(1.234), "fail", "batched_loss の戻り値が違います")
    with pytest.raises(Fail) as err:
        expect_close(np.float32(1.0), np.float64(2.0), "損失の値")
    text = str(err.value)
    assert "の値の値" not in text and "1 要素中" not in text and "許容誤差の外" not in text, text
    assert text == "損失の値が違います（2 のはずが 1）。", text


def test_arrays_still_count_their_wrong_elements():
    with pytest.raises(Fail) as err:
        expect_close(np.zeros(4), np.array([0.0, 1.0, 0.0, 1.0]), "new_params['w']")
    text = str(err.value)
    assert text == "new_params['w'] の値が違います（位置 (1,) で 1 のはずが 0、4 要素中 2 要素が許容誤差の外）。", text
