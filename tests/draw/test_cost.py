"""ch6.draw のコストとメモリの図（6.7 節、ch6/draw/cost.py）: 図の文字に渡した名前と数が入り、入力が違えば図も違い、
小さく決定的であること。おかしな入力は分かる言葉で断ること。"""
from __future__ import annotations

import pytest

from ch6 import draw
from ch6.hardware import CHIPS, chip
from tests.drawcheck import small_and_deterministic

ROWS = [(c.name, c.flops, c.hbm_bw) for c in CHIPS[:3]]
POINTS = [("行列積", 85.3), ("学習ステップ", 12.0)]


def test_roofline_names_every_chip_and_point():
    d = small_and_deterministic(lambda: draw.roofline(ROWS, POINTS))
    for name, _, _ in ROWS:
        assert f" {name}" in d.texts  # direct label at the end of each roof (readable without colour)
    assert "行列積" in d.texts and "学習ステップ" in d.texts
    assert "演算強度（FLOP / バイト）" in d.texts
    assert "計算 2 個" in repr(d)
    assert draw.roofline(ROWS, POINTS[:1]).png != d.png


def test_roofline_rejects_non_positive_intensity():
    with pytest.raises(ValueError, match="正の有限"):
        draw.roofline(ROWS, [("x", 0.0)])
    with pytest.raises(ValueError, match="1 つ以上"):
        draw.roofline([], POINTS)


def test_step_times_labels_each_line_at_its_end():
    counts = [1, 2, 4, 8]
    curves = {"DP（和）": [1 / n + 0.01 for n in counts], "TP（和）": [1 / n + 0.02 * n for n in counts]}
    d = small_and_deterministic(lambda: draw.step_times(counts, curves, mark=4))
    assert "DP（和）" in d.texts and "TP（和）" in d.texts
    assert " 今: 4 デバイス" in d.texts
    assert "1〜8 デバイス" in repr(d)
    assert draw.step_times(counts, curves).png != d.png
    with pytest.raises(ValueError, match="値が 3 個"):
        draw.step_times(counts, {"DP": [1.0] * 3})


def test_memory_bars_stack_parts_and_show_budget():
    rows = [("DP", {"引数": 2e6, "出力": 1e6, "一時領域": 3e6}), ("FSDP", {"引数": 5e5, "一時領域": 1e6})]
    d = small_and_deterministic(lambda: draw.memory_bars(rows, budget=4e6))
    assert " 6.00 MB" in d.texts and " 1.50 MB" in d.texts
    assert "予算 4.00 MB" in d.texts
    assert "DP" in d.texts and "一時領域" in d.texts
    assert draw.memory_bars(rows).png != d.png
    with pytest.raises(ValueError, match="負"):
        draw.memory_bars([("x", {"引数": -1})])


def test_decision_marks_the_chosen_layout_and_what_does_not_fit():
    rows = [("DP", 30e9, 0.15), ("FSDP", 5e9, 0.18)]
    cap = chip("TPU v5e").hbm_bytes
    d = small_and_deterministic(lambda: draw.decision(rows, cap, "FSDP"))
    assert " 30.0 GB 収まらない" in d.texts and " 5.0 GB" in d.texts
    assert any(t.endswith("★") and " 180 ms" in t for t in d.texts)
    assert "容量 16 GB" in d.texts
    assert "1 デバイスのメモリ（GB、対数）" in d.texts
    assert "選んだ方式: FSDP" in repr(d)
    with pytest.raises(ValueError, match="rows にありません"):
        draw.decision(rows, cap, "TP")
    with pytest.raises(ValueError, match="正の数"):
        draw.decision([("DP", 0.0, 0.1)], cap, None)


def test_hardware_rows_name_their_source():
    for c in CHIPS:
        assert c.url.startswith("https://") and c.source
        assert 10 < c.ridge < 2000  # FLOP/バイト: どのチップも数百前後
    with pytest.raises(KeyError):
        chip("TPU v9")
