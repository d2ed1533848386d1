"""ch6.explain: JAX のエラーを、役に立つ部分を残した日本語の 1 行にする。"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from ch6 import explain, meshes


def _raised(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001
        return exc
    raise AssertionError("no error")


def test_vmap_inconsistent_sizes_keeps_which_argument_and_sizes():
    f = lambda a, b: a + b  # noqa: E731
    exc = _raised(lambda: jax.vmap(f)(jnp.ones((3, 2)), jnp.ones((5, 2))))
    line = explain.explain(exc)
    assert line.startswith("ValueError: vmap でバッチにする軸の大きさがそろっていません")
    assert "3" in line and "5" in line and "in_axes" in line and "\n" not in line


def test_in_axes_tree_prefix():
    exc = _raised(lambda: jax.vmap(lambda p, x: x, in_axes=({"W": None}, 0))({"W": 1.0, "b": 2.0}, jnp.ones(3)))
    assert "in_axes の形" in explain.explain(exc)


def test_non_array_output_and_function_repr_are_translated():
    exc = _raised(lambda: jax.vmap(lambda x: (lambda: 0))(jnp.ones(3)))
    line = explain.explain(exc)
    assert "JAX の配列ではない値" in line and "0x" not in line and "<function" not in line


def test_tracer_bool():
    def f(x):
        return x if x > 0 else -x

    line = explain.explain(_raised(lambda: jax.vmap(f)(jnp.ones(3))))
    assert "if" in line and "jnp.where" in line


def test_unknown_error_quotes_the_original_without_paths():
    exc = RuntimeError('File "/home/u/x.py", line 3: boom at 0x7fabc')
    line = explain.explain(exc)
    assert line.startswith("RuntimeError が起きました（原文「") and "/home/u" not in line and "0xADDR" in line


@pytest.mark.skipif(jax.device_count() < 2, reason="needs 2 devices")
def test_duplicate_axis_spec():
    m = meshes.mesh_1d("data")
    exc = _raised(lambda: jax.device_put(jnp.ones((4, 4)), NamedSharding(m, P("data", "data"))))
    assert "同じメッシュの軸を 2 度" in explain.explain(exc), explain.explain(exc)
