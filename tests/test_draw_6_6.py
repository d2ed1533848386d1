"""ch6.draw.process_grid（6.6 節）: 各プロセスが報告した値から、プロセス → デバイス → グローバルメッシュ
（と配列の行）を描くこと。図の文字に番号と範囲が入り、入力が違えば図も違い、小さく決定的であること。
ch6.multihost.global_layout / draw_global が、プロセスの報告の食い違いを見逃さないこと。"""
from __future__ import annotations

import copy

import pytest

from ch6 import draw, multihost
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
