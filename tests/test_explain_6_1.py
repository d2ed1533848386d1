"""ch6.explain の vmap のエラー（6.1 で初学者がいちばん出会うもの）: どの引数・どの軸・どの大きさかを残す。"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ch6 import explain


def _raised(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001
        return exc
    raise AssertionError("no error")


def kernel(x, c, g):
    return g * jnp.sum((x - c) ** 2)


def test_vmap_sizes_reads_both_the_one_axis_and_the_most_axes_lines():
    """JAX は同じ大きさの軸が 2 つ以上あると 1 つだけ例に挙げる（most axes (2 of them) … e.g.）: それも読む。"""
    exc = _raised(lambda: jax.vmap(kernel)(jnp.ones(3), jnp.ones((7, 3)), jnp.ones(7)))
    assert sorted(explain.vmap_sizes(str(exc))) == [("c", 0, 7, 2), ("x", 0, 3, 1)]
    line = explain.explain(exc)
    assert "x の 0 軸が 3" in line and "c の 0 軸など 2 個が 7" in line and "\n" not in line


def test_vmap_sizes_keeps_pytree_paths():
    f = lambda p, x: p["b"] + x.sum()  # noqa: E731
    exc = _raised(lambda: jax.vmap(f, in_axes=({"b": 0}, 0))({"b": jnp.ones((10, 3))}, jnp.ones((32, 4))))
    line = explain.explain(exc)
    assert "p['b'] の 0 軸が 10" in line and "x の 0 軸が 32" in line


def test_in_axes_beyond_the_rank_names_the_axis_and_the_shape():
    exc = _raised(lambda: jax.vmap(lambda s, n: s * n, in_axes=1)(jnp.ones((6, 4)), jnp.ones(4)))
    line = explain.explain(exc)
    assert line.startswith("ValueError: in_axes で 1 軸目") and "形 (4,)" in line and "1 次元" in line
    assert "vmap was requested" not in line


def test_in_axes_all_none():
    exc = _raised(lambda: jax.vmap(lambda x: x, in_axes=None)(jnp.ones(3)))
    assert "すべて None" in explain.explain(exc)
