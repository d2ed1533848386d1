"""6.5-1 q1、6.5-2 q2、6.5-3 q3、6.5-4 q4 のチェック（ch6/checks/s6_5/gradients_and_placement.py）のテスト。"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import ch6
from tests.checks.s6_5.common import const


def _other_mesh_array():
    mesh = jax.make_mesh((1,), ("other",), devices=jax.devices()[-1:])
    return jax.device_put(jnp.ones((4, 4)), NamedSharding(mesh, P("other", None)))


@pytest.mark.parametrize("make,shape", [(lambda: jnp.full((3, 3), jnp.nan), "(3, 3)"),
                                        (lambda: jnp.zeros((2048, 2048)), "(2048, 2048)"),
                                        (_other_mesh_array, "(4, 4)"),
                                        (lambda: np.ones((2, 5)), "(2, 5)")])
def test_array_answer_is_named_by_type_and_shape_in_one_line(make, shape):
    # 課題 13 の回帰: 配列を返すと、その repr（[[nan nan nan]\n ...）が複数行で出ていた
    r = ch6.run_check("6.5-1", lambda: make())
    assert r.status == "fail"
    assert "\n" not in r.message and "nan" not in r.message and "[[" not in r.message, r.message
    assert f"形 {shape}" in r.message and "の配列" in r.message, r.message


def test_partition_spec_answer_is_named():
    r = ch6.run_check("6.5-4", const(P("data", None)))
    assert r.status == "fail" and "PartitionSpec" in r.message


def test_not_a_function():
    r = ch6.run_check("6.5-1", "b")
    assert r.status == "fail" and "関数を渡して" in r.message
