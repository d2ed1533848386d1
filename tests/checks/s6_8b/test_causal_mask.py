"""6.8b-2 causal_block_mask: 大きさの違うブロックの組の因果マスク。"""
from __future__ import annotations

import jax.numpy as jnp
import pytest

from ch6 import Status
from tests.checkhelp import boom, expect, not_done

EX = "6.8b-2"


def mask(op=lambda a, b: a >= b, q_len=None, k_len=None, swap=False):
    def causal_block_mask(i, j, bq, bk):
        if swap:
            i, j = j, i
        q_pos = i * (q_len or bq) + jnp.arange(bq)
        k_pos = j * (k_len or bk) + jnp.arange(bk)
        return op(q_pos[:, None], k_pos[None, :])
    return causal_block_mask


def test_reference_passes():
    expect(EX, mask(), Status.PASS, "jit")


def test_tril_with_offset_passes():
    def with_tril(i, j, bq, bk):
        r = jnp.arange(bq)[:, None]
        c = jnp.arange(bk)[None, :]
        return (c - r) <= (i * bq - j * bk)
    expect(EX, with_tril, Status.PASS)


@pytest.mark.parametrize("op, words", [
    (lambda a, b: a > b, ("対角で 1 つずれて",)),
    (lambda a, b: a <= b, ("向きが逆",)),
    (lambda a, b: a < b, ("向きが逆で、対角も",)),
])
def test_comparison_mistakes(op, words):
    expect(EX, mask(op), Status.FAIL, *words)


def test_length_and_swap_mistakes():
    expect(EX, lambda i, j, bq, bk: mask(k_len=bq)(i, j, bq, bk), Status.FAIL, "j * bq")
    expect(EX, lambda i, j, bq, bk: mask(q_len=bk)(i, j, bq, bk), Status.FAIL, "i * bk")
    expect(EX, mask(swap=True), Status.FAIL, "入れ替えて")
    expect(EX, lambda i, j, bq, bk: jnp.tril(jnp.ones((bq, bk), bool)), Status.FAIL, "下三角をそのまま")


def test_shape_dtype_and_tracing_mistakes():
    expect(EX, lambda i, j, bq, bk: mask()(i, j, bq, bk).T, Status.FAIL, "転置")
    expect(EX, lambda i, j, bq, bk: mask()(i, j, bq, bk).astype(jnp.float32), Status.FAIL, "bool")

    def python_if(i, j, bq, bk):
        if i > j:
            return jnp.ones((bq, bk), bool)
        return mask()(i, j, bq, bk)
    expect(EX, python_if, Status.FAIL, "トレースされた値")
    expect(EX, lambda *a: None, Status.FAIL, "NoneType")


def test_not_done_and_learner_error():
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR, "ZeroDivisionError")
