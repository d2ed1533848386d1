"""ch6.draw の 6.8a 節の図（pipeline.py）: ステージ × ティックのスケジュール表と、バブルの割合。
図の文字に実際の番号と空きの数が入り、入力が違えば図も違い、小さく決定的であること。"""
from __future__ import annotations

import numpy as np
import pytest

from ch6 import draw
from ch6.draw.pipeline import busy_fraction, schedule_cells
from tests.drawcheck import small_and_deterministic


def _gpipe(n, m):
    return np.array([[t - s if 0 <= t - s < m else -1 for t in range(m + n - 1)] for s in range(n)])


def test_recorded_schedule_names_microbatches_and_counts_idle_cells():
    table = _gpipe(3, 4)
    d = small_and_deterministic(lambda: draw.pipeline_schedule(table))
    assert d.texts.count("0") >= 3 and "3" in d.texts          # マイクロバッチの番号
    assert d.texts.count("空き 2") == 3                          # どのステージも S − 1 個の空き
    assert "ステージ 2" in d.texts
    assert "バブル 0.333" in d.caption                            # 6 / 18
    assert draw.pipeline_schedule(_gpipe(3, 5)).png != d.png


def test_forward_backward_labels_and_stage_label():
    table = [["F0", "F1", "", "B1", "B0"], ["", "F0", "F1", "B1", "B0"][:5]]
    d = small_and_deterministic(lambda: draw.pipeline_schedule(table, title="題", stage_label="デバイス"))
    assert "F1" in d.texts and "B0" in d.texts and "題" in d.texts and "デバイス 1" in d.texts
    assert any("逆伝播" in t for t in d.texts)                    # B があるときだけ凡例の説明
    assert not any("逆伝播" in t for t in draw.pipeline_schedule(_gpipe(2, 2)).texts)
    looped = draw.pipeline_schedule([[(0, 0), (1, 0), (0, 1)], ["", (0, 0), (1, 0)]])
    assert "v=1" in looped.texts and "0" in looped.texts
    assert not any("." in t for t in looped.texts)  # 番号と周は別の行（「0.1」のような小数に見えない）
    assert draw.pipeline_schedule([["0.0", "1.0", "0.1"], ["", "0.0", "1.0"]]).texts == looped.texts


def test_in_flight_peak_per_stage():
    table = [["F0", "F1", "F2", "B0", "F3", "B1", "B2", "B3"], ["F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"]]
    d = small_and_deterministic(lambda: draw.pipeline_schedule(table, in_flight_peak=True))
    assert "空き 0・活性値 最大 3" in d.texts and "空き 0・活性値 最大 1" in d.texts
    assert d.caption.endswith("活性値の最大 3 1")
    assert not any("活性値" in t for t in draw.pipeline_schedule(table).texts)


def test_cells_and_busy_fraction():
    assert schedule_cells([["F12", "", "B3.1", -1, None, 4, (2, 1), (-1, 0)]]) == [
        [("F", 12, None), None, ("B", 3, 1), None, None, ("", 4, None), ("", 2, 1), None]]
    assert busy_fraction(_gpipe(4, 4)) == pytest.approx(4 / 7)
    with pytest.raises(ValueError):
        draw.pipeline_schedule([["X?"]])
    with pytest.raises(ValueError):
        draw.pipeline_schedule([])


def test_bubble_fractions_plot_shows_measured_values_and_formula():
    d = small_and_deterministic(lambda: draw.bubble_fractions([1, 2, 4], [0.75, 0.6, 3 / 7], 4))
    assert "0.75" in d.texts and "0.43" in d.texts
    assert any("(S − 1)/(M + S − 1)" in t for t in d.texts) and any("表から数えた" in t for t in d.texts)
    assert "M=4: 0.429" in d.caption
    v = draw.bubble_fractions([1, 2], [0.6, 3 / 7], 4, n_virtual=2)
    assert any("V = 2" in t for t in v.texts) and v.png != d.png
    with pytest.raises(ValueError):
        draw.bubble_fractions([1, 2], [0.5], 3)
