"""6.3b-1 masked_mean のチェック（ch6/checks/s6_3b/masked_mean.py）のテスト。"""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from tests.checkhelp import multi, not_done
from tests.checks.s6_3b.common import assert_fail, assert_pass, run


def masked_mean(x, mask):
    s = lax.psum(jnp.sum(x * mask[:, None], axis=0), "x")
    c = lax.psum(jnp.sum(mask), "x")
    return s / c


def masked_mean_other(x, mask):
    # 和と個数を 1 本にまとめて 1 回の psum で送る
    both = jnp.concatenate([mask @ x, jnp.sum(mask)[None]])
    tot = lax.psum(both, "x")
    return tot[:-1] / tot[-1]


def masked_mean_of_means(x, mask):
    return lax.pmean(jnp.sum(x * mask[:, None], 0) / jnp.sum(mask), "x")


def masked_mean_no_mask(x, mask):
    return lax.pmean(jnp.mean(x, 0), "x")


def masked_mean_no_psum(x, mask):
    return jnp.sum(x * mask[:, None], 0) / jnp.sum(mask)


def masked_mean_gather(x, mask):
    xa = lax.all_gather(x, "x", tiled=True)
    ma = lax.all_gather(mask, "x", tiled=True)
    return jnp.sum(xa * ma[:, None], 0) / jnp.sum(ma)


def masked_mean_loop(x, mask):
    s = jnp.zeros(x.shape[1])
    for i in range(x.shape[0]):  # 行ごとの Python ループ
        s = s + x[i] * mask[i]
    return lax.psum(s, "x") / lax.psum(jnp.sum(mask), "x")


def masked_mean_wrong_axis(x, mask):
    return lax.psum(jnp.sum(x * mask[:, None], 0), "batch") / lax.psum(jnp.sum(mask), "batch")


def masked_mean_hardcoded(x, mask):
    return jnp.array([2.0, 2.0, 2.0])


def masked_mean_crash(x, mask):
    return x @ jnp.ones((7, 7))


def test_masked_mean_right():
    assert_pass(run("6.3b-1", masked_mean))
    assert_pass(run("6.3b-1", masked_mean_other))


@multi
def test_masked_mean_of_means():
    assert_fail(run("6.3b-1", masked_mean_of_means), "さらに平均", "psum")


def test_masked_mean_wrong():
    assert_fail(run("6.3b-1", masked_mean_no_mask), "mask")
    assert_fail(run("6.3b-1", masked_mean_gather), "all_gather")
    assert_fail(run("6.3b-1", masked_mean_loop), "ループ")
    assert_fail(run("6.3b-1", masked_mean_wrong_axis), "軸の名前", "'x'")
    assert_fail(run("6.3b-1", masked_mean_hardcoded), "値が違います")
    assert_fail(run("6.3b-1", masked_mean_crash), "解答のコードの中", status="error")
    assert_fail(run("6.3b-1", not_done), "答えを書いてから", status="not_done")


@multi
def test_masked_mean_not_replicated():
    assert_fail(run("6.3b-1", masked_mean_no_psum), "check_vma", "psum")


def test_wrong_type():
    assert_fail(run("6.3b-1", 3), "関数")
