"""ch6.draw.arrays: メッシュ（mesh）、シャーディング（sharding・shard_layout・shardings、6.3a）、プロセスの格子
（process_grid、6.6）。図は本物のオブジェクトから描かれ、番号・仕様・範囲が図の文字に入り、入力が違えば図も違い、
小さく決定的であること。ch6.multihost.global_layout / draw_global が、プロセスの報告の食い違いを見逃さないこと。"""
from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from ch6 import draw, meshes, multihost
from tests.drawcheck import small_and_deterministic

IDS = [0, 1, 2, 3, 2048, 2049, 2050, 2051]      # 2 プロセス × 4 個の CPU デバイスの実際の番号
OWNERS = [0, 0, 0, 0, 1, 1, 1, 1]
ROWS = {d: (8 * k, 8 * k + 8) for k, d in enumerate(IDS)}


def test_grid_names_every_device_and_its_process():
    d = small_and_deterministic(lambda: draw.process_grid(IDS, OWNERS, ["data"], [8]))
    for dev, p in zip(IDS, OWNERS):
        assert f"D{dev}\nP{p}" in d.texts
    assert "プロセス 0\nデバイス 4 個" in d.texts and "プロセス 1\nデバイス 4 個" in d.texts
    assert any("data=8" in t and "2 プロセス" in t for t in d.texts)
    assert not any("行 0:" in t for t in d.texts)   # rows を渡さなければ行の段はない


def test_rows_strip_shows_each_devices_rows_and_padding():
    d = small_and_deterministic(lambda: draw.process_grid(IDS, OWNERS, ["data"], [8], rows=ROWS, valid_rows=64))
    assert "D2048\n32:40" in d.texts and "D0\n0:8" in d.texts
    assert not any("パディング" in t for t in d.texts)   # 64 行はちょうど割り切れる
    three = draw.process_grid([0, 2048, 4096], [0, 1, 2], ["data"], [3],
                              rows={0: (0, 22), 2048: (22, 44), 4096: (44, 66)}, valid_rows=64)
    assert "D4096\n44:66" in three.texts
    assert any("パディング 2 行（64:66）" in t for t in three.texts)


def test_a_different_layout_gives_a_different_picture():
    a = draw.process_grid(IDS, OWNERS, ["data"], [8])
    b = draw.process_grid(IDS, [0, 1] * 4, ["data"], [8])          # 持ち主だけが違う
    c = draw.process_grid(IDS, OWNERS, ["data", "model"], [4, 2])   # 2 次元のメッシュ
    assert len({a.png, b.png, c.png}) == 3
    assert "D1\nP1" in b.texts and any("data=4×model=2" in t for t in c.texts)
    assert any("軸 model" in t for t in c.texts) and any("軸 data" in t for t in c.texts)


def test_sizes_must_agree():
    with pytest.raises(ValueError):
        draw.process_grid(IDS, OWNERS, ["data"], [4])


def _results():
    res = {}
    for p in (0, 1):
        res[p] = {"rows": 64, "mesh": {"axis_names": ["data"], "shape": [8], "device_ids": IDS,
                                       "process_index": OWNERS},
                  "shards": [[d, *ROWS[d]] for d in IDS if OWNERS[IDS.index(d)] == p]}
    return res


def test_draw_global_checks_what_the_processes_reported():
    mesh, rows = multihost.global_layout(_results())
    assert mesh["device_ids"] == IDS and rows == ROWS
    d = multihost.draw_global(_results())
    assert "D2051\nP1" in d.texts and "D2051\n56:64" in d.texts
    # 報告が食い違えば、図を描かずに止まる
    other_mesh = _results()
    other_mesh[1]["mesh"] = dict(other_mesh[1]["mesh"], process_index=[0, 1] * 4)
    wrong_owner = _results()
    wrong_owner[1]["shards"][0][0] = 0          # process 1 のシャードが process 0 のデバイスに
    gap = _results()
    gap[1]["shards"].pop()                      # 56:64 を誰も持たない
    for bad in (other_mesh, wrong_owner, gap):
        with pytest.raises(ValueError):
            multihost.global_layout(copy.deepcopy(bad))


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
