"""ch6.draw の 6.9 節の図（capstone.py）: 損失の曲線。凡例にラベル、許容誤差の確かめ、小さく決定的であること。"""
from __future__ import annotations

import pytest

from ch6 import draw
from tests.drawcheck import small_and_deterministic

BASE = [5.5, 5.2, 5.0, 4.9, 4.7, 4.5]


def test_curves_are_labelled_and_checked_against_the_reference():
    curves = [("中断なし", 0, BASE), ("再開", 3, BASE[3:])]
    d = small_and_deterministic(lambda: draw.loss_curves(curves, title="題", tolerance=1e-3))
    assert "中断なし" in d.texts and "再開" in d.texts and "題\n「中断なし」との差はどのステップでも 0.001 未満" in d.texts
    assert "再開（ステップ 4〜6、最後 4.50）" in d.caption
    assert draw.loss_curves([("中断なし", 0, BASE)]).png != d.png


def test_curve_outside_tolerance_is_refused():
    with pytest.raises(ValueError, match="tolerance"):
        draw.loss_curves([("a", 0, BASE), ("b", 2, [5.0, 4.8])], tolerance=1e-3)   # ステップ 4 で 0.1 違う
    with pytest.raises(ValueError, match="空"):
        draw.loss_curves([("a", 0, [])])
