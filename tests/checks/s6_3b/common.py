"""6.3b のチェックのテストが共有する部品。"""
from __future__ import annotations

import jax
from jax import lax

import ch6


def run(eid, fn):
    return ch6.run_check(eid, fn)


def assert_pass(res):
    assert res.status == "pass", res.message


def assert_fail(res, *words, status="fail"):
    assert res.status == status, res.message
    for w in words:
        assert w in res.message, (w, res.message)



def softmax_gather(block):
    full = lax.all_gather(block, "x", axis=1, tiled=True)
    s = jax.nn.softmax(full, axis=1)
    f = block.shape[1]
    return lax.dynamic_slice_in_dim(s, lax.axis_index("x") * f, f, axis=1)
