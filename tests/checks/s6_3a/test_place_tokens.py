"""6.3a-1 place_tokens のチェック（ch6/checks/s6_3a/place_tokens.py）のテスト。"""
from __future__ import annotations

import jax
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from ch6 import run_check
from tests.checkhelp import N, not_done
from tests.checks.s6_3a.common import expect_fail, expect_pass, own_mesh


def tokens_ref(tokens, mask, mesh):
    return (jax.device_put(tokens, NamedSharding(mesh, P("data", "model", None))),
            jax.device_put(mask, NamedSharding(mesh, P("data", "model"))))


def tokens_set_mesh_list(tokens, mask, mesh):
    # set_mesh の中で PartitionSpec だけを渡し、リストで返す（末尾の None も省略）
    with jax.set_mesh(mesh):
        return [jax.device_put(tokens, P("data", "model")), jax.device_put(mask, P("data", "model"))]


def tokens_reshard(tokens, mask, mesh):
    # Explicit のメッシュなら jax.reshard でも置ける
    return (jax.reshard(tokens, NamedSharding(mesh, P("data", "model"))),
            jax.reshard(mask, NamedSharding(mesh, P("data", "model"))))


def test_place_tokens_right_in_every_spelling():
    r = expect_pass("6.3a-1", tokens_ref)
    assert "data=" in r.message and "model=" in r.message
    expect_pass("6.3a-1", tokens_set_mesh_list)
    expect_pass("6.3a-1", tokens_reshard)


def test_place_tokens_wrong_axes():
    def batch_only(tokens, mask, mesh):
        return (jax.device_put(tokens, NamedSharding(mesh, P("data"))),
                jax.device_put(mask, NamedSharding(mesh, P("data"))))

    expect_fail("6.3a-1", batch_only, "P('data', 'model', None) のはず", "P('data', None, None)")

    def swapped(tokens, mask, mesh):
        return (jax.device_put(tokens, NamedSharding(mesh, P("model", "data"))),
                jax.device_put(mask, NamedSharding(mesh, P("model", "data"))))

    r = run_check("6.3a-1", swapped)
    assert r.status in ("fail", "error"), r.message  # 割り切れなければエラー、割り切れれば spec の違い

    def mask_replicated(tokens, mask, mesh):
        return tokens_ref(tokens, mask, mesh)[0], jax.device_put(mask, NamedSharding(mesh, P()))

    expect_fail("6.3a-1", mask_replicated, "mask の spec は P('data', 'model') のはず")


def test_place_tokens_not_placed_swapped_and_errors():
    expect_fail("6.3a-1", lambda t, m, mesh: (t, m), "JAX 配列ではありません")
    expect_fail("6.3a-1", lambda t, m, mesh: tokens_ref(t, m, mesh)[::-1], "(tokens, mask) の順")
    expect_fail("6.3a-1", lambda t, m, mesh: tokens_ref(t, m, mesh)[:1], "2 つ組")
    expect_fail("6.3a-1", lambda t, m, mesh: tokens_ref(np.zeros_like(t), m, mesh), "tokens の値が違います")
    expect_fail("6.3a-1", lambda t, m, mesh: t["bad"], "IndexError", status="error")
    expect_fail("6.3a-1", not_done, "関数の本体に答えを書いてから", status="not_done")


def test_place_tokens_on_a_mesh_of_ones_own_is_refused():
    def own(tokens, mask, mesh):
        return tokens_ref(tokens, mask, own_mesh(order=1))

    if N > 1:
        expect_fail("6.3a-1", own, "別のメッシュ", "渡された mesh")
    expect_fail("6.3a-1", lambda t, m, mesh: tokens_ref(t, m, own_mesh(axis_types=AxisType.Auto)), "別のメッシュ")
