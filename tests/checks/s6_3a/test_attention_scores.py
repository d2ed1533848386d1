"""6.3a-4 attention_scores のチェック（ch6/checks/s6_3a/attention_scores.py）のテスト。"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P

from ch6 import run_check
from tests.checkhelp import not_done
from tests.checks.s6_3a.common import M, expect_fail, expect_pass

# 2 次元メッシュの model 軸は、奇数個では長さ 1（ch6.meshes.mesh_2d_shape）なので、その軸の通信は現れない
model_axis = pytest.mark.skipif(M == 1, reason="model 軸が 1（奇数個）では通信が現れない")


def scores_einsum(q, k):
    return jnp.einsum("bqd,bkd->bqk", q, k, out_sharding=P("data", None, None))


def scores_matmul(q, k):
    # matmul / @ と転置でも同じ（einsum でなくてよい）
    return jnp.matmul(q, jnp.swapaxes(k, 1, 2), out_sharding=P("data", None, None))


def scores_matmul_transpose(q, k):
    return jnp.matmul(q, k.transpose(0, 2, 1), out_sharding=P("data"))


def test_attention_scores_right_in_every_spelling():
    r = expect_pass("6.3a-4", scores_einsum)
    if M > 1:
        assert "all-reduce ×1" in r.message
    expect_pass("6.3a-4", scores_matmul)
    expect_pass("6.3a-4", scores_matmul_transpose)


def test_attention_scores_still_ambiguous():
    expect_fail("6.3a-4", lambda q, k: jnp.einsum("bqd,bkd->bqk", q, k), "ShardingTypeError", "out_sharding")
    expect_fail("6.3a-4", lambda q, k: q @ jnp.swapaxes(k, 1, 2), "ShardingTypeError")


def test_attention_scores_wrong_spec_and_replicated():
    expect_fail("6.3a-4", lambda q, k: jnp.einsum("bqd,bkd->bqk", q, k, out_sharding=P()), "複製")
    r = run_check("6.3a-4", lambda q, k: jnp.einsum("bqd,bkd->bqk", q, k, out_sharding=P(None, None, "data")))
    assert r.status in ("fail", "error"), r.message


@model_axis
def test_attention_scores_extra_all_gather():
    def gathered(q, k):
        return jnp.einsum("bqd,bkd->bqk", jax.reshard(q, P("data", None, None)), jax.reshard(k, P("data", None, None)))

    expect_fail("6.3a-4", gathered, "結果は正しい", "all-gather")


def test_attention_scores_swapped_hard_coded_and_errors():
    expect_fail("6.3a-4", lambda q, k: jnp.einsum("bkd,bqd->bqk", q, k, out_sharding=P("data", None, None)), "形が違います")
    expect_fail("6.3a-4", lambda q, k: scores_einsum(q, k) * 0 + 1.0, "値が違います")
    expect_fail("6.3a-4", lambda q, k: q @ k, status="error")  # 形が合わない
    expect_fail("6.3a-4", not_done, status="not_done")
