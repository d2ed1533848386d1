"""ch6.draw.shardings: 複数の配列のシャーディングを、本物の addressable_shards から並べて描く（6.3a の行列積の
ケースと Megatron の分割）。"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

from ch6 import draw, meshes
from tests.drawcheck import small_and_deterministic

N = jax.device_count()


def _matmul_case(spec_a, spec_b, spec_out):
    mesh = meshes.mesh_1d("data", AxisType.Auto)  # Auto: 出力のシャーディングは out_shardings で決める
    a = jax.device_put(jnp.ones((4 * N, 8 * N)), NamedSharding(mesh, spec_a))
    b = jax.device_put(jnp.ones((8 * N, 2 * N)), NamedSharding(mesh, spec_b))
    out = jax.jit(lambda u, v: u @ v, out_shardings=NamedSharding(mesh, spec_out))(a, b)
    return [("A", a), ("B", b), ("出力", out)]


def test_shardings_labels_specs_and_devices_of_every_panel():
    items = _matmul_case(P("data", None), P(), P("data", None))
    d = small_and_deterministic(lambda: draw.shardings(items, title="ケース 1"))
    text = "\n".join(d.texts)
    assert "ケース 1" in d.texts
    for (label, x), spec in zip(items, ("P('data', None)", "P()", "P('data', None)")):
        assert label in text and spec in text and str(tuple(x.shape)) in text
    # A の各行ブロックを持つデバイスの番号が、ブロックの中に書かれている（B は全デバイスの複製）
    owners = {devs[0] for devs in draw.shard_layout(items[0][1]).values()}
    assert owners == set(range(N))
    if N <= 4:
        assert {f"D{i}" for i in range(N)} <= set(d.texts)
    else:
        assert f"D0…D{N - 1}（{N} 個）" in d.texts


def test_a_different_sharding_gives_a_different_picture():
    one = draw.shardings(_matmul_case(P("data", None), P(), P("data", None)))
    other = draw.shardings(_matmul_case(P(None, "data"), P("data", None), P()))
    assert one.png != other.png
    assert any("P(None, 'data')" in t for t in other.texts)


def test_grid_wraps_after_ncols_and_mixes_meshes():
    items = _matmul_case(P("data", None), P(None, "data"), P("data", None))
    m2 = meshes.mesh_2d()
    w = jax.device_put(jnp.ones((8, 4 * N)), NamedSharding(m2, P(None, "model")))
    row = draw.shardings(items + [("W", w)])
    grid = draw.shardings(items + [("W", w)], ncols=2)
    assert row.png != grid.png
    assert any("P(None, 'model')" in t for t in grid.texts)
    assert "シャーディング" in repr(grid)
