"""6.3b のチェックの単体テスト: 正解を通し、典型的な誤りを言い当てて落とす。

conftest.py がデバイス数を決める（既定 8、--devices 2 なども）。1 台では区別できない誤り
（平均の平均など）は、2 台以上のときだけ確かめる。
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax import lax
from jax.sharding import PartitionSpec as P

import ch6

N = jax.device_count()
multi = pytest.mark.skipif(N < 2, reason="needs 2 or more devices")


def run(eid, fn):
    return ch6.run_check(eid, fn)


def assert_pass(res):
    assert res.status == "pass", res.message


def assert_fail(res, *words, status="fail"):
    assert res.status == status, res.message
    for w in words:
        assert w in res.message, (w, res.message)


def not_done(*args):
    raise NotImplementedError


# 6.3b-1 masked_mean -------------------------------------------------------------------

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
    assert_fail(run("6.3b-1", masked_mean_of_means), "平均の平均", "psum")


def test_masked_mean_wrong():
    assert_fail(run("6.3b-1", masked_mean_no_mask), "mask")
    assert_fail(run("6.3b-1", masked_mean_gather), "all_gather")
    assert_fail(run("6.3b-1", masked_mean_loop), "ループ")
    assert_fail(run("6.3b-1", masked_mean_wrong_axis), "軸の名前", "'x'")
    assert_fail(run("6.3b-1", masked_mean_hardcoded), "値が違います")
    assert_fail(run("6.3b-1", masked_mean_crash), "エラー", status="error")
    assert_fail(run("6.3b-1", not_done), "まだ", status="not_done")


@multi
def test_masked_mean_not_replicated():
    assert_fail(run("6.3b-1", masked_mean_no_psum), "check_vma", "psum")


# 6.3b-2 ring_all_gather ---------------------------------------------------------------

def ring_all_gather(block):
    n = lax.axis_size("x")
    me = lax.axis_index("x")
    right = [(i, (i + 1) % n) for i in range(n)]
    c = block.shape[1]
    out = jnp.zeros((block.shape[0], n * c), block.dtype)
    out = lax.dynamic_update_slice_in_dim(out, block, me * c, axis=1)
    cur = block
    for k in range(1, n):
        cur = lax.ppermute(cur, "x", right)
        out = lax.dynamic_update_slice_in_dim(out, cur, ((me - k) % n) * c, axis=1)
    return out


def ring_all_gather_left(block):
    # 逆向き（左へ送る）リングで、集めたブロックを最後に並べ替える
    n = lax.axis_size("x")
    me = lax.axis_index("x")
    left = [(i, (i - 1) % n) for i in range(n)]
    got = [block]
    for _ in range(1, n):
        got.append(lax.ppermute(got[-1], "x", left))
    stacked = jnp.stack(got)  # stacked[k] はデバイス (me + k) % n のブロック
    order = (jnp.arange(n) - me) % n
    return jnp.concatenate(list(stacked[order]), axis=1) if n > 1 else block


def ring_unordered(block):
    # 受け取った順に並べてしまう（持ち主の番号で置いていない）
    n = lax.axis_size("x")
    right = [(i, (i + 1) % n) for i in range(n)]
    got, cur = [block], block
    for _ in range(1, n):
        cur = lax.ppermute(cur, "x", right)
        got.append(cur)
    return jnp.concatenate(got, axis=1)


def ring_with_all_gather(block):
    return lax.all_gather(block, "x", axis=1, tiled=True)


def ring_with_psum(block):
    n = lax.axis_size("x")
    me = lax.axis_index("x")
    c = block.shape[1]
    out = jnp.zeros((block.shape[0], n * c), block.dtype)
    return lax.psum(lax.dynamic_update_slice_in_dim(out, block, me * c, axis=1), "x")


def ring_untiled(block):
    return lax.all_gather(block, "x")


def ring_only_own(block):
    n = lax.axis_size("x")
    return jnp.tile(block, (1, n))


def ring_crash(block):
    return lax.ppermute(block, "x", [(0, 1), (0, 2)])


def test_ring_right():
    assert_pass(run("6.3b-2", ring_all_gather))
    assert_pass(run("6.3b-2", ring_all_gather_left))


def test_ring_wrong():
    assert_fail(run("6.3b-2", ring_with_all_gather), "all_gather", "ppermute")
    assert_fail(run("6.3b-2", ring_with_psum), "ppermute 以外", "psum")
    assert_fail(run("6.3b-2", not_done), status="not_done")


@multi
def test_ring_wrong_multi():
    assert_fail(run("6.3b-2", ring_unordered), "並び順")
    assert_fail(run("6.3b-2", ring_untiled), "tiled=False", "axis=1")
    assert_fail(run("6.3b-2", ring_only_own), "値が違います")
    assert_fail(run("6.3b-2", ring_crash), "エラー", status="error")


# 6.3b-3 row_parallel_matmul -----------------------------------------------------------

def row_parallel_matmul(x, w, mesh):
    def local(xb, wb):
        return lax.psum(xb @ wb, "x")

    return jax.shard_map(local, mesh=mesh, in_specs=(P(None, "x"), P("x", None)), out_specs=P())(x, w)


def row_parallel_matmul_inferred(x, w, mesh):
    # Explicit メッシュでは in_specs を省くと入力の型から決まる
    @jax.shard_map(mesh=mesh, out_specs=P())
    def local(xb, wb):
        return lax.psum(jnp.einsum("bd,df->bf", xb, wb), "x")

    return local(x, w)


def row_parallel_concat(x, w, mesh):
    return jax.shard_map(lambda a, b: a @ b, mesh=mesh, in_specs=(P(None, "x"), P("x", None)),
                         out_specs=P("x", None))(x, w)


def row_parallel_no_check(x, w, mesh):
    return jax.shard_map(lambda a, b: a @ b, mesh=mesh, in_specs=(P(None, "x"), P("x", None)),
                         out_specs=P(), check_vma=False)(x, w)


def row_parallel_gather(x, w, mesh):
    def local(xb, wb):
        return lax.all_gather(xb, "x", axis=1, tiled=True) @ lax.all_gather(wb, "x", tiled=True)

    return jax.shard_map(local, mesh=mesh, in_specs=(P(None, "x"), P("x", None)), out_specs=P())(x, w)


def row_parallel_no_shard_map(x, w, mesh):
    return jnp.matmul(x, w, out_sharding=jax.NamedSharding(mesh, P()))


def row_parallel_wrong_spec(x, w, mesh):
    return jax.shard_map(lambda a, b: lax.psum(a @ b, "x"), mesh=mesh, in_specs=(P("x", None), P("x", None)),
                         out_specs=P())(x, w)


def row_parallel_loop(x, w, mesh):
    def local(xb, wb):
        rows = [xb[i] @ wb for i in range(xb.shape[0])]
        return lax.psum(jnp.stack(rows), "x")

    return jax.shard_map(local, mesh=mesh, in_specs=(P(None, "x"), P("x", None)), out_specs=P())(x, w)


def test_row_parallel_right():
    assert_pass(run("6.3b-3", row_parallel_matmul))
    assert_pass(run("6.3b-3", row_parallel_matmul_inferred))


def test_row_parallel_wrong():
    assert_fail(run("6.3b-3", row_parallel_gather), "all_gather")
    assert_fail(run("6.3b-3", row_parallel_no_shard_map), "shard_map")
    assert_fail(run("6.3b-3", row_parallel_loop), "ループ")
    assert_fail(run("6.3b-3", not_done), status="not_done")


@multi
def test_row_parallel_wrong_multi():
    assert_fail(run("6.3b-3", row_parallel_concat), "部分積", "psum")
    assert_fail(run("6.3b-3", row_parallel_no_check), "デバイス 0", "check_vma")
    assert_fail(run("6.3b-3", row_parallel_wrong_spec), "in_specs")


# 6.3b-4 sharded_softmax ---------------------------------------------------------------

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


def softmax_gather(block):
    full = lax.all_gather(block, "x", axis=1, tiled=True)
    s = jax.nn.softmax(full, axis=1)
    f = block.shape[1]
    return lax.dynamic_slice_in_dim(s, lax.axis_index("x") * f, f, axis=1)


def softmax_row_loop(block):
    rows = []
    for i in range(block.shape[0]):
        m = lax.pmax(block[i].max(), "x")
        e = jnp.exp(block[i] - m)
        rows.append(e / lax.psum(e.sum(), "x"))
    return jnp.stack(rows)


def softmax_crash(block):
    return jnp.exp(block) / jnp.ones(7)


def test_softmax_right():
    assert_pass(run("6.3b-4", sharded_softmax))
    assert_pass(run("6.3b-4", sharded_softmax_lse))


def test_softmax_wrong():
    assert_fail(run("6.3b-4", softmax_no_max), "NaN", "pmax")
    assert_fail(run("6.3b-4", softmax_gather), "all_gather")
    assert_fail(run("6.3b-4", softmax_row_loop), "ループ")
    assert_fail(run("6.3b-4", softmax_crash), "エラー", status="error")
    assert_fail(run("6.3b-4", not_done), status="not_done")


@multi
def test_softmax_wrong_multi():
    assert_fail(run("6.3b-4", softmax_local), "psum")
    assert_fail(run("6.3b-4", softmax_local_max), "最大値", "pmax")


# 6.3b-5 rs_matmul_bias ----------------------------------------------------------------

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


def test_wrong_type():
    assert_fail(run("6.3b-1", 3), "関数")
