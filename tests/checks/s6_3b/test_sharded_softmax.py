"""6.3b-4 sharded_softmax のチェック（ch6/checks/s6_3b/sharded_softmax.py）のテスト。"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from tests.checkhelp import multi, not_done
from tests.checks.s6_3b.common import assert_fail, assert_pass, run, softmax_gather


def sharded_softmax(block):
    m = lax.pmax(jnp.max(block, axis=1, keepdims=True), "x")
    e = jnp.exp(block - m)
    return e / lax.psum(jnp.sum(e, axis=1, keepdims=True), "x")


def sharded_softmax_lse(block):
    # log-sum-exp で分母を作る
    m = lax.pmax(block.max(axis=-1, keepdims=True), "x")
    lse = m + jnp.log(lax.psum(jnp.exp(block - m).sum(axis=-1, keepdims=True), "x"))
    return jnp.exp(block - lse)


def softmax_no_max(block):
    e = jnp.exp(block)
    return e / lax.psum(e.sum(1, keepdims=True), "x")


def softmax_local(block):
    return jax.nn.softmax(block, axis=1)


def softmax_local_max(block):
    e = jnp.exp(block - block.max(1, keepdims=True))
    return e / lax.psum(e.sum(1, keepdims=True), "x")


def softmax_row_loop(block):
    rows = []
    for i in range(block.shape[0]):
        m = lax.pmax(block[i].max(), "x")
        e = jnp.exp(block[i] - m)
        rows.append(e / lax.psum(e.sum(), "x"))
    return jnp.stack(rows)


def softmax_crash(block):
    return jnp.exp(block) / jnp.ones(7)


def softmax_max_of_all_rows(block):
    # 最大値をすべての行をまとめて取る（行ごとでない）: 数式の上では同じでも、低い行の exp が 0 になる
    m = lax.pmax(jnp.max(block, keepdims=True), "x")
    e = jnp.exp(block - m)
    return e / lax.psum(jnp.sum(e, axis=1, keepdims=True), "x")


def test_softmax_right():
    assert_pass(run("6.3b-4", sharded_softmax))
    assert_pass(run("6.3b-4", sharded_softmax_lse))


def test_softmax_wrong():
    assert_fail(run("6.3b-4", softmax_no_max), "NaN", "pmax")
    assert_fail(run("6.3b-4", softmax_gather), "all_gather")
    assert_fail(run("6.3b-4", softmax_row_loop), "ループ")
    assert_fail(run("6.3b-4", softmax_crash), "解答のコードの中", status="error")
    assert_fail(run("6.3b-4", softmax_max_of_all_rows), "行ごとに値の大きさが違う", "NaN", "axis=1")
    assert_fail(run("6.3b-4", not_done), status="not_done")


@multi
def test_softmax_wrong_multi():
    assert_fail(run("6.3b-4", softmax_local), "psum")
    assert_fail(run("6.3b-4", softmax_local_max), "最大値", "pmax")


def softmax_mean_of_max(block):
    # 変異体「pmax → pmean」: 数式の上では同じ softmax だが、値の幅が広い行では exp があふれる
    m = lax.pmean(jnp.max(block, axis=1, keepdims=True), "x")
    e = jnp.exp(block - m)
    return e / lax.psum(jnp.sum(e, axis=1, keepdims=True), "x")


def softmax_row_mean(block):
    # 行の平均を引く: 値が 100 前後のときは通るが、幅の広い行ではあふれる
    m = lax.psum(jnp.sum(block, axis=1, keepdims=True), "x") / (block.shape[1] * lax.axis_size("x"))
    e = jnp.exp(block - m)
    return e / lax.psum(jnp.sum(e, axis=1, keepdims=True), "x")


@multi
def test_softmax_pmean_of_block_maxima_overflows_on_wide_rows():
    res = run("6.3b-4", softmax_mean_of_max)
    assert_fail(res, "300 前後", "pmax", "inf")
    assert "本当の最大値" in res.message
    assert_fail(run("6.3b-4", softmax_row_mean), "300 前後")


def test_pmean_for_the_denominator_is_rejected_or_said_to_be_unknowable():
    """分母の和を lax.pmean で取る誤り: 2 デバイス以上では不正解、1 デバイスでは ✅ の行が見分けられないと言う。"""
    from ch6.checking import CANNOT_TELL
    from tests.checkhelp import N

    def pmean_denominator(block):
        m = lax.pmax(jnp.max(block, axis=1, keepdims=True), "x")
        e = jnp.exp(block - m)
        return e / lax.pmean(jnp.sum(e, axis=1, keepdims=True), "x")
    r = run("6.3b-4", pmean_denominator)
    if N == 1:
        assert r.status == "pass" and CANNOT_TELL in r.message and "lax.pmean" in r.message, r.message
    else:
        assert r.status == "fail", r.message
    assert (CANNOT_TELL in run("6.3b-4", sharded_softmax).message) == (N == 1)
