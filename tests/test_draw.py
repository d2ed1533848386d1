"""ch6.draw: 図は本物のオブジェクトから描かれ、日本語のラベルを持ち、小さく決定的であること。"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from ch6 import draw, meshes
from tests.drawcheck import small_and_deterministic


def test_mesh_shows_every_device_and_axis():
    m = meshes.mesh_2d()
    d = small_and_deterministic(lambda: draw.mesh(m))
    for dev in m.devices.flat:
        assert f"D{dev.id}" in d.texts
    assert any("data" in t for t in d.texts) and any("model" in t for t in d.texts)
    assert any("メッシュ" in t for t in d.texts)


def test_sharding_shows_blocks_from_the_real_shards():
    m = meshes.mesh_1d("data")
    n = jax.device_count()
    x = jax.device_put(jnp.zeros((2 * n, 4)), NamedSharding(m, P("data", None)))
    d = small_and_deterministic(lambda: draw.sharding(x))
    assert sorted(t for t in d.texts if t.startswith("D")) == sorted(f"D{i}" for i in range(n))
    assert any("P('data', None)" in t for t in d.texts)
    layout = draw.shard_layout(x)
    assert len(layout) == n and all(r1 - r0 == 2 for (r0, r1, _, _) in layout)
    y = jax.device_put(jnp.zeros((2 * n, 4)), NamedSharding(m, P()))
    other = draw.sharding(y)
    assert other.png != d.png, "a different sharding must give a different picture"
    assert any("P()" in t for t in other.texts)
    assert len(draw.shard_layout(y)) == 1  # 複製: 1 ブロックを全デバイスが持つ


def test_device_values_before_and_after():
    before = np.arange(6).reshape(3, 2)
    after = np.tile(before.sum(0), (3, 1))
    d = small_and_deterministic(lambda: draw.device_values(before, after, op="psum"))
    assert {"前", "後", "psum", "D0", "D2", "6", "9"} <= set(d.texts)


def test_ring_steps_lists_blocks():
    held = [[[0], [1], [2]], [[0, 2], [0, 1], [1, 2]], [[0, 1, 2]] * 3]
    d = small_and_deterministic(lambda: draw.ring_steps(held))
    assert "0 2" in d.texts and "0 1 2" in d.texts and "最初" in d.texts


def test_timeline():
    d = draw.timeline([("all-gather", "通信"), ("順伝播", "計算")], title="FSDP")
    assert {"all-gather", "順伝播", "通信", "計算", "FSDP"} <= set(d.texts)
    assert repr(d).startswith("<図: ")


def test_japanese_font_is_used():
    from matplotlib import font_manager

    draw.mesh(meshes.mesh_1d())
    from matplotlib import rcParams

    assert rcParams["font.family"] == ["IPAexGothic"]
    assert "IPAexGothic" in {f.name for f in font_manager.fontManager.ttflist}
