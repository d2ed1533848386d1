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


def ring_one_round_too_many(block):
    # n 回送る（最後の 1 回は自分のブロックが戻ってくるだけ）: 値は同じでも通信が 1 回多い
    n = lax.axis_size("x")
    me = lax.axis_index("x")
    right = [(i, (i + 1) % n) for i in range(n)]
    c = block.shape[1]
    out = lax.dynamic_update_slice_in_dim(jnp.zeros((block.shape[0], n * c), block.dtype), block, me * c, axis=1)
    cur = block
    for k in range(1, n + 1):
        cur = lax.ppermute(cur, "x", right)
        out = lax.dynamic_update_slice_in_dim(out, cur, ((me - k) % n) * c, axis=1)
    return out


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
    assert_fail(run("6.3b-2", ring_one_round_too_many), f"ppermute を {N} 回", f"{N - 1} 回", "range(1, n)")


# 6.3b-3 megatron_mlp ------------------------------------------------------------------

SPECS3 = (P(), P(None, "x"), P("x"), P("x", None), P())


def megatron_mlp(x, w1, b1, w2, b2, mesh):
    def local(x, w1b, b1b, w2b, b2):
        h = jax.nn.relu(x @ w1b + b1b)
        return lax.psum(h @ w2b, "x") + b2

    return jax.shard_map(local, mesh=mesh, in_specs=SPECS3, out_specs=P())(x, w1, b1, w2, b2)


def megatron_mlp_inferred(x, w1, b1, w2, b2, mesh):
    # Explicit メッシュでは in_specs を省くと入力の型から決まる。einsum と maximum、b2 / n を先に足す書き方
    @jax.shard_map(mesh=mesh, out_specs=P())
    def local(x, w1b, b1b, w2b, b2):
        h = jnp.maximum(jnp.einsum("bd,dh->bh", x, w1b) + b1b, 0.0)
        return lax.psum(jnp.einsum("bh,hf->bf", h, w2b) + b2 / lax.axis_size("x"), "x")

    return local(x, w1, b1, w2, b2)


def _mlp3(body, **kw):
    def answer(x, w1, b1, w2, b2, mesh):
        return jax.shard_map(body, mesh=mesh, in_specs=kw.get("in_specs", SPECS3),
                             out_specs=kw.get("out_specs", P()), **kw.get("extra", {}))(x, w1, b1, w2, b2)
    return answer


mlp_concat = _mlp3(lambda x, a, c, b, d: jax.nn.relu(x @ a + c) @ b + d, out_specs=P("x", None))
mlp_no_check = _mlp3(lambda x, a, c, b, d: jax.nn.relu(x @ a + c) @ b + d, extra={"check_vma": False})
mlp_b2_before = _mlp3(lambda x, a, c, b, d: lax.psum(jax.nn.relu(x @ a + c) @ b + d, "x"))
mlp_no_b1 = _mlp3(lambda x, a, c, b, d: lax.psum(jax.nn.relu(x @ a) @ b, "x") + d)
mlp_no_b2 = _mlp3(lambda x, a, c, b, d: lax.psum(jax.nn.relu(x @ a + c) @ b, "x"))
mlp_no_relu = _mlp3(lambda x, a, c, b, d: lax.psum((x @ a + c) @ b, "x") + d)
mlp_relu_after = _mlp3(lambda x, a, c, b, d: jax.nn.relu(lax.psum((x @ a + c) @ b, "x") + d))
mlp_gather = _mlp3(lambda x, a, c, b, d: jax.nn.relu(x @ lax.all_gather(a, "x", axis=1, tiled=True)
                                                     + lax.all_gather(c, "x", tiled=True))
                   @ lax.all_gather(b, "x", tiled=True) + d)
mlp_b1_replicated_spec = _mlp3(lambda x, a, c, b, d: lax.psum(jax.nn.relu(x @ a + c) @ b, "x") + d,
                               in_specs=(P(), P(None, "x"), P(), P("x", None), P()))
mlp_list_specs = _mlp3(lambda x, a, c, b, d: lax.psum(jax.nn.relu(x @ a + c) @ b, "x") + d,
                       in_specs=[P(), P(None, "x"), P("x"), P("x", None), P()])


def mlp_no_shard_map(x, w1, b1, w2, b2, mesh):
    h = jax.nn.relu(x @ w1 + b1)
    return jnp.matmul(h, w2, out_sharding=jax.NamedSharding(mesh, P())) + b2


def mlp_loop(x, w1, b1, w2, b2, mesh):
    def local(x, a, c, b, d):
        rows = [jax.nn.relu(x[i] @ a + c) @ b for i in range(x.shape[0])]
        return lax.psum(jnp.stack(rows), "x") + d

    return jax.shard_map(local, mesh=mesh, in_specs=SPECS3, out_specs=P())(x, w1, b1, w2, b2)


def test_megatron_right():
    assert_pass(run("6.3b-3", megatron_mlp))
    assert_pass(run("6.3b-3", megatron_mlp_inferred))


def test_megatron_wrong():
    assert_fail(run("6.3b-3", mlp_gather), "all_gather")
    assert_fail(run("6.3b-3", mlp_no_shard_map), "shard_map")
    assert_fail(run("6.3b-3", mlp_loop), "ループ")
    assert_fail(run("6.3b-3", mlp_no_b1), "b1")
    assert_fail(run("6.3b-3", mlp_no_b2), "b2")
    assert_fail(run("6.3b-3", mlp_no_relu), "ReLU")
    assert_fail(run("6.3b-3", mlp_relu_after), "ReLU", "psum の後")
    assert_fail(run("6.3b-3", not_done), status="not_done")


@multi
def test_megatron_wrong_multi():
    assert_fail(run("6.3b-3", mlp_concat), "部分積", "psum")
    assert_fail(run("6.3b-3", mlp_no_check), "デバイス 0", "check_vma")
    assert_fail(run("6.3b-3", mlp_b2_before), f"{N} 回", "b2")
    assert_fail(run("6.3b-3", mlp_b1_replicated_spec), "in_specs", "P('x')")


def test_megatron_list_in_specs_is_explained():
    # in_specs をリストで書くと JAX は pytree の構造エラーを出す: 直し方（タプル）を 1 行で言う
    assert_fail(run("6.3b-3", mlp_list_specs), "リスト", "タプル")


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
    assert_fail(run("6.3b-4", softmax_crash), "エラー", status="error")
    assert_fail(run("6.3b-4", softmax_max_of_all_rows), "行ごとに高さの違う", "NaN", "axis=1")
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


# issue 13 の回帰テスト ------------------------------------------------------------------

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


def softmax_gather_stats(block):
    # 最大値を all_gather してから max（統計量だけだが、問題の指定は pmax）
    m = jnp.max(lax.all_gather(jnp.max(block, axis=1), "x"), axis=0)[:, None]
    e = jnp.exp(block - m)
    return e / lax.psum(jnp.sum(e, axis=1, keepdims=True), "x")


def masked_mean_gather_stats(x, mask):
    both = jnp.concatenate([mask @ x, jnp.sum(mask)[None]])
    tot = jnp.sum(lax.all_gather(both, "x"), axis=0)
    return tot[:-1] / tot[-1]


def ring_rows(block):
    # ブロックを行方向（axis=0）につないでしまう
    n = lax.axis_size("x")
    right = [(i, (i + 1) % n) for i in range(n)]
    got, cur = [block], block
    for _ in range(1, n):
        cur = lax.ppermute(cur, "x", right)
        got.append(cur)
    return jnp.concatenate(got, axis=0)


@multi
def test_softmax_pmean_of_block_maxima_overflows_on_wide_rows():
    res = run("6.3b-4", softmax_mean_of_max)
    assert_fail(res, "幅が広い", "pmax", "inf")
    assert "本当の最大値" in res.message
    assert_fail(run("6.3b-4", softmax_row_mean), "幅が広い")


def test_gathered_statistics_are_told_apart_from_gathered_data():
    msg = run("6.3b-4", softmax_gather_stats).message
    assert "pmax" in msg and "特徴そのもの" not in msg, msg
    assert "特徴そのもの" in run("6.3b-4", softmax_gather).message
    # 6.3b-1 は out_specs=P() なので、all_gather の結果（デバイスごとに違う値の扱い）は check_vma が止める
    assert_fail(run("6.3b-1", masked_mean_gather_stats), "check_vma", "all_gather")


@multi
def test_ring_joined_along_rows_is_named():
    assert_fail(run("6.3b-2", ring_rows), "axis=0", "axis=1")


def test_no_dead_helpers_and_one_spelling_of_no_collectives():
    from ch6.checks import s6_3b
    from ch6.show import collectives_line

    assert not hasattr(s6_3b, "_first") and not hasattr(s6_3b, "_fmt_counts")
    assert s6_3b.collectives_line is collectives_line
