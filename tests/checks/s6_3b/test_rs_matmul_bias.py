"""6.3b-5 rs_matmul_bias のチェック（ch6/checks/s6_3b/rs_matmul_bias.py）のテスト。"""
from __future__ import annotations

from jax import lax

from tests.checkhelp import N, multi, not_done
from tests.checks.s6_3b.common import assert_fail, assert_pass, run


def rs_matmul_bias(x_blk, w_blk, b):
    y = lax.psum_scatter(x_blk @ w_blk, "x", scatter_dimension=1, tiled=True)
    f = y.shape[1]
    return y + lax.dynamic_slice_in_dim(b, lax.axis_index("x") * f, f)


def rs_matmul_bias_reshape(x_blk, w_blk, b):
    # b を (n, f) に並べ替えて自分の行を取る
    n = lax.axis_size("x")
    y = lax.psum_scatter(x_blk @ w_blk, "x", scatter_dimension=1, tiled=True)
    return y + b.reshape(n, -1)[lax.axis_index("x")]


def rs_bias_first(x_blk, w_blk, b):
    return lax.psum_scatter(x_blk @ w_blk + b, "x", scatter_dimension=1, tiled=True)


def rs_bias_head(x_blk, w_blk, b):
    y = lax.psum_scatter(x_blk @ w_blk, "x", scatter_dimension=1, tiled=True)
    return y + b[: y.shape[1]]


def rs_psum_slice(x_blk, w_blk, b):
    y = lax.psum(x_blk @ w_blk, "x") + b
    f = y.shape[1] // lax.axis_size("x")
    return lax.dynamic_slice_in_dim(y, lax.axis_index("x") * f, f, axis=1)


def rs_dim0(x_blk, w_blk, b):
    return lax.psum_scatter(x_blk @ w_blk, "x", scatter_dimension=0, tiled=True) + b


def rs_gather(x_blk, w_blk, b):
    x = lax.all_gather(x_blk, "x", axis=1, tiled=True)
    w = lax.all_gather(w_blk, "x", tiled=True)
    y = x @ w + b
    f = y.shape[1] // lax.axis_size("x")
    return lax.dynamic_slice_in_dim(y, lax.axis_index("x") * f, f, axis=1)


def rs_no_bias(x_blk, w_blk, b):
    return lax.psum_scatter(x_blk @ w_blk, "x", scatter_dimension=1, tiled=True)


def test_rs_right():
    assert_pass(run("6.3b-5", rs_matmul_bias))
    assert_pass(run("6.3b-5", rs_matmul_bias_reshape))


def test_rs_wrong():
    assert_fail(run("6.3b-5", rs_psum_slice), "psum", "reduce-scatter")
    assert_fail(run("6.3b-5", rs_gather), "all_gather")
    assert_fail(run("6.3b-5", rs_no_bias), "バイアス")
    assert_fail(run("6.3b-5", not_done), status="not_done")


@multi
def test_rs_wrong_multi():
    assert_fail(run("6.3b-5", rs_bias_first), f"{N} 回")
    assert_fail(run("6.3b-5", rs_bias_head), "axis_index")
    assert_fail(run("6.3b-5", rs_dim0), "scatter_dimension=1")
