"""6.3b の問題文から書いた、ありそうな誤答（issue 39）。どれも 1・3・8 デバイスで、その誤りの名前で落ちるか、
そのデバイスの数では見分けられないことを正解の 1 行が言う。"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

from tests.checkhelp import N, expect

# ---- 6.3b-1 masked_mean

def test_sum_psummed_but_count_local():
    """和は psum したが個数はそのデバイスのもの: all_gather を使ったとは言わない。"""
    def masked_mean(x, m):
        return lax.psum(jnp.sum(x * m[:, None], 0), "x") / jnp.sum(m)
    msg = expect("6.3b-1", masked_mean, "fail", "check_vma", "和と個数を、どちらも lax.psum")
    assert "all_gather" not in msg


def test_divided_by_all_rows():
    def masked_mean(x, m):
        return lax.psum(jnp.sum(x * m[:, None], 0), "x") / lax.psum(x.shape[0], "x")
    expect("6.3b-1", masked_mean, "fail", "すべての行の数")


def test_mean_of_device_means():
    def masked_mean(x, m):
        return lax.pmean(jnp.sum(x * m[:, None], 0) / jnp.sum(m), "x")
    if N == 1:
        expect("6.3b-1", masked_mean, "pass", "確かめられません")
    else:
        expect("6.3b-1", masked_mean, "fail", "デバイスごとの平均をさらに平均")


# ---- 6.3b-2 ring_all_gather

def ring(n_of, owner):
    def ring_all_gather(block):
        n, me, c = n_of(), lax.axis_index("x"), block.shape[1]
        right = [(i, (i + 1) % n) for i in range(n)]
        out = lax.dynamic_update_slice_in_dim(jnp.zeros((block.shape[0], n * c), block.dtype), block, me * c, axis=1)
        cur = block
        for k in range(1, n):
            cur = lax.ppermute(cur, "x", right)
            out = lax.dynamic_update_slice_in_dim(out, cur, owner(me, k, n) * c, axis=1)
        return out
    return ring_all_gather


def test_ring_size_from_the_device_count():
    slip = ring(jax.device_count, lambda me, k, n: (me - k) % n)
    if N == 1:
        expect("6.3b-2", slip, "pass", "リングの大きさ", "確かめられません")
    else:
        expect("6.3b-2", slip, "fail", "lax.axis_size('x')")


def test_received_shard_written_at_me_plus_k():
    slip = ring(lambda: lax.axis_size("x"), lambda me, k, n: (me + k) % n)
    if N <= 2:   # 2 個の環では (me + k) % n と (me - k) % n が同じ
        expect("6.3b-2", slip, "pass")
    else:
        expect("6.3b-2", slip, "fail", "並び順が違い", "(番号 - k) % n")


def test_received_shard_written_at_k():
    slip = ring(lambda: lax.axis_size("x"), lambda me, k, n: k)
    if N == 1:
        expect("6.3b-2", slip, "pass", "シャードを書き込む位置")
    elif N == 2:   # 受け取ったシャードが自分のシャードに重なり、デバイス 1 の列 0 が空のまま
        expect("6.3b-2", slip, "fail", "デバイス 1 の結果の値が違います")
    else:
        expect("6.3b-2", slip, "fail", "並び順が違い")


# ---- 6.3b-3 megatron_mlp

SPECS = (P(), P(None, "x"), P("x"), P("x", None), P())


def mlp(body):
    def megatron_mlp(x, w1, b1, w2, b2, mesh):
        return jax.shard_map(body, mesh=mesh, in_specs=SPECS, out_specs=P())(x, w1, b1, w2, b2)
    return megatron_mlp


def test_b2_added_before_the_psum():
    slip = mlp(lambda x, w1, b1, w2, b2: lax.psum(jax.nn.relu(x @ w1 + b1) @ w2 + b2, "x"))
    if N == 1:
        expect("6.3b-3", slip, "pass", "b2 を足す誤り", "確かめられません")
    else:
        expect("6.3b-3", slip, "fail", f"b2 が {N} 回")


def test_relu_after_the_psum():
    slip = mlp(lambda x, w1, b1, w2, b2: jax.nn.relu(lax.psum((x @ w1 + b1) @ w2, "x")) + b2)
    expect("6.3b-3", slip, "fail", "ReLU を psum の後")


def test_gathered_weights_named_after_the_vma_error():
    """重みを all_gather してから計算: check_vma のエラーでも、all_gather を使ったことを言う。"""
    def body(x, w1, b1, w2, b2):
        w1 = lax.all_gather(w1, "x", axis=1, tiled=True)
        b1 = lax.all_gather(b1, "x", tiled=True)
        w2 = lax.all_gather(w2, "x", tiled=True)
        return jax.nn.relu(x @ w1 + b1) @ w2 + b2
    expect("6.3b-3", mlp(body), "fail", "all_gather")


# ---- 6.3b-4 sharded_softmax

def test_max_of_the_own_block_only():
    def sharded_softmax(b):
        e = jnp.exp(b - jnp.max(b, axis=1, keepdims=True))
        return e / lax.psum(jnp.sum(e, axis=1, keepdims=True), "x")
    if N == 1:
        expect("6.3b-4", sharded_softmax, "fail", "pmax がありません")
    else:
        expect("6.3b-4", sharded_softmax, "fail", "最大値がデバイスごとに違います")


def test_mean_of_the_block_maxima():
    def sharded_softmax(b):
        e = jnp.exp(b - lax.pmean(jnp.max(b, axis=1, keepdims=True), "x"))
        return e / lax.psum(jnp.sum(e, axis=1, keepdims=True), "x")
    if N == 1:
        expect("6.3b-4", sharded_softmax, "fail", "pmax がありません")
    else:
        expect("6.3b-4", sharded_softmax, "fail", "本当の最大値ではありません")


def test_one_max_for_all_rows():
    def sharded_softmax(b):
        e = jnp.exp(b - lax.pmax(jnp.max(b), "x"))
        return e / lax.psum(jnp.sum(e, axis=1, keepdims=True), "x")
    expect("6.3b-4", sharded_softmax, "fail", "行ごとに（axis=1）")


# ---- 6.3b-5 rs_matmul_bias

def test_first_block_of_b():
    def rs(x, w, b):
        y = lax.psum_scatter(x @ w, "x", scatter_dimension=1, tiled=True)
        return y + b[: y.shape[1]]
    if N == 1:
        expect("6.3b-5", rs, "pass", "b の切り出し方", "確かめられません")
    else:
        expect("6.3b-5", rs, "fail", "先頭の部分")


def test_b_before_the_reduce_scatter():
    def rs(x, w, b):
        return lax.psum_scatter(x @ w + b, "x", scatter_dimension=1, tiled=True)
    if N == 1:
        expect("6.3b-5", rs, "pass", "足す回数", "確かめられません")
    else:
        expect("6.3b-5", rs, "fail", f"{N} 回足されて")


def test_b_over_n_before_the_reduce_scatter_is_allowed():
    """問題文の「自由」: 通信の前の部分積に b / n を足しても、値と通信は同じ。"""
    def rs(x, w, b):
        return lax.psum_scatter(x @ w + b / lax.axis_size("x"), "x", scatter_dimension=1, tiled=True)
    expect("6.3b-5", rs, "pass")


def test_psum_then_own_columns():
    def rs(x, w, b):
        y = lax.psum(x @ w, "x") + b
        f = y.shape[1] // lax.axis_size("x")
        return lax.dynamic_slice_in_dim(y, lax.axis_index("x") * f, f, axis=1)
    expect("6.3b-5", rs, "fail", "lax.psum_scatter")
