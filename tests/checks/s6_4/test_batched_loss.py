"""6.4-1 batched_loss のチェック（ch6/checks/s6_4/batched_loss.py）のテスト。"""
import jax
import jax.numpy as jnp
import pytest
from jax import lax

from ch6 import run_check
from tests.checkhelp import boom, expect, not_done


def batched_loss_ref(sample_loss, params, xs, ys):
    return jnp.mean(jax.vmap(sample_loss, in_axes=(None, 1, 0))(params, xs, ys))


@pytest.mark.parametrize("fn", [
    batched_loss_ref,
    jax.jit(batched_loss_ref, static_argnums=0),
    # 閉包で params を固定してから vmap しても正解
    lambda f, p, xs, ys: jax.vmap(lambda x, y: f(p, x, y), in_axes=(1, 0))(xs, ys).sum() / xs.shape[1],
    # 転置してから 0 軸でバッチ化しても正解（転置は自由）
    lambda f, p, xs, ys: jnp.mean(jax.vmap(f, in_axes=(None, 0, 0))(p, xs.T, ys)),
])
def test_6_4_1_correct(fn):
    expect("6.4-1", fn, "pass")


def test_6_4_1_wrong():
    vm = lambda f: jax.vmap(f, in_axes=(None, 1, 0))  # noqa: E731
    expect("6.4-1", lambda f, p, xs, ys: jnp.sum(vm(f)(p, xs, ys)), "fail", "合計", "jnp.mean")
    expect("6.4-1", lambda f, p, xs, ys: vm(f)(p, xs, ys), "fail", "サンプルごとの損失", "平均")
    expect("6.4-1", lambda f, p, xs, ys: jnp.mean(jax.vmap(f, in_axes=0)(p, xs, ys)), "fail",
           "in_axes の最初は None")
    expect("6.4-1", lambda f, p, xs, ys: jnp.mean(jax.vmap(f, in_axes=1)(p, xs, ys)), "fail",
           "params の葉まで", "共通の params は None")
    expect("6.4-1", lambda f, p, xs, ys: jnp.mean(f(p, xs, ys)), "fail", "1 サンプルの形", "in_axes")
    expect("6.4-1", lambda f, p, xs, ys: jnp.mean(jnp.stack([f(p, x, y) for x, y in zip(xs.T, ys)])),
           "fail", "Python のループ")
    expect("6.4-1", lambda f, p, xs, ys: jnp.mean(lax.map(lambda xy: f(p, *xy), (xs.T, ys))), "fail", "scan")
    expect("6.4-1", lambda f, p, xs, ys: jnp.float32(1.234), "fail", "値が違います")
    expect("6.4-1", not_done, "not_done", "関数の本体に答えを書いてから")
    expect("6.4-1", boom, "error", "ZeroDivisionError")


def test_6_4_1_lesson_axis_is_wrong_here():
    # 教材と同じ in_axes=(None, 0, 0) のままだと、バッチの軸が違うことを名指しする
    expect("6.4-1", lambda f, p, xs, ys: jnp.mean(jax.vmap(f, in_axes=(None, 0, 0))(p, xs, ys)), "fail",
           "1 軸目", "軸の長さがそろいません")
    # 両方を 1 軸目にすると ys（1 次元）の軸が足りない: 学習者のエラーとして説明する
    r = run_check("6.4-1", lambda f, p, xs, ys: jnp.mean(jax.vmap(f, in_axes=(None, 1, 1))(p, xs, ys)))
    assert r.status in ("fail", "error") and "internal" not in r.status, r.message
