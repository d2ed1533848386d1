"""ch6.draw.values（device_values、ring_steps）: 図は本物の値から描かれ、日本語のラベルを持ち、小さく決定的であること。"""
from __future__ import annotations

import numpy as np

from ch6 import draw
from tests.drawcheck import small_and_deterministic


def test_device_values_before_and_after():
    before = np.arange(6).reshape(3, 2)
    after = np.tile(before.sum(0), (3, 1))
    d = small_and_deterministic(lambda: draw.device_values(before, after, op="psum"))
    assert {"前", "後", "psum", "D0", "D2", "6", "9"} <= set(d.texts)


def test_ring_steps_lists_blocks():
    held = [[[0], [1], [2]], [[0, 2], [0, 1], [1, 2]], [[0, 1, 2]] * 3]
    d = small_and_deterministic(lambda: draw.ring_steps(held))
    assert "0 [2]" in d.texts and "0 [1] 2" in d.texts and "最初" in d.texts  # 新しく届いたシャードは [ ]
    assert "0 1 2" not in d.texts

