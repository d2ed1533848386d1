"""ch6.explain: JAX のエラーを、役に立つ部分を残した日本語の 1 行にする。

- ch6.explain の vmap のエラー（6.1 で初学者がいちばん出会うもの）: どの引数・どの軸・どの大きさかを残す。
- ch6.explain: shard_map / smap の入力と出力の指定が合わないときの日本語（6.3c で追加した規則）。
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from ch6 import explain, meshes


def _raised(fn):
    try:
        fn()
    except Exception as exc:
        return exc
    raise AssertionError("no error")


def test_vmap_inconsistent_sizes_keeps_which_argument_and_sizes():
    f = lambda a, b: a + b  # noqa: E731
    exc = _raised(lambda: jax.vmap(f)(jnp.ones((3, 2)), jnp.ones((5, 2))))
    line = explain.explain(exc)
    assert line.startswith("ValueError: vmap でバッチにする軸の長さがそろっていません")
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


def _raise(fn):
    with pytest.raises(ValueError) as info:
        fn()
    return explain.explain(info.value)


def test_out_specs_replication_is_explained():
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    x = jax.device_put(jnp.ones(2 * jax.device_count()), NamedSharding(mesh, P("data")))
    text = _raise(lambda: jax.shard_map(lambda b: b, mesh=mesh, in_specs=P("data"), out_specs=P())(x))
    assert text.startswith("ValueError: out_specs（smap では out_axes=None）")
    assert "varying" in text and "\n" not in text


def test_in_specs_mismatch_is_explained_with_both_specs():
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    text = _raise(lambda: jax.shard_map(lambda b: b, mesh=mesh, in_specs=P("data"), out_specs=P("data"))(jnp.ones(2 * jax.device_count())))
    assert "in_specs（smap では in_axes）の P('data',)" in text
    assert "P(None,)" in text and "jax.reshard" in text
