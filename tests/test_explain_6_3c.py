"""ch6.explain: shard_map / smap の入力と出力の指定が合わないときの日本語（6.3c で追加した規則）。"""
import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from ch6 import explain


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
