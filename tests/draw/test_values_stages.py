"""ch6.draw.device_stages: 集団通信を続けたときの各段階のデバイスごとの値（6.3b の all-reduce = RS + AG）。"""
from __future__ import annotations

import numpy as np
import pytest

from ch6 import draw
from tests.drawcheck import small_and_deterministic


def _stages(n):
    m = np.arange(n * n).reshape(n, n)
    part = m.sum(0).reshape(n, 1)
    return [m, part, np.tile(m.sum(0), (n, 1))]


def test_device_stages_shows_every_stage_and_op():
    stages = _stages(4)
    d = small_and_deterministic(lambda: draw.device_stages(stages, ["psum_scatter", "all_gather"]))
    texts = set(d.texts)
    assert {"D0", "D3", "psum_scatter", "all_gather", "前", "psum_scatter の後", "後"} <= texts
    assert {str(v) for v in stages[1].ravel()} <= texts  # 担当の部分の和 24, 28, 32, 36
    assert "15" in texts  # 前の段の値
    assert "psum_scatter → all_gather" in d.caption


def test_device_stages_labels_and_a_different_input_differ():
    stages = _stages(3)
    d = draw.device_stages(stages, ["psum_scatter", "all_gather"], labels=["前", "担当の部分の和", "後"], title="RS + AG")
    assert "担当の部分の和" in d.texts and "RS + AG" in d.texts
    other = draw.device_stages(_stages(2), ["psum_scatter", "all_gather"], labels=["前", "担当の部分の和", "後"],
                               title="RS + AG")
    assert other.png != d.png and "D2" not in other.texts
    one = draw.device_stages(stages[:2], ["psum_scatter"])  # 2 段（device_values と同じ形）
    assert {"前", "後", "psum_scatter"} <= set(one.texts)


def test_device_stages_rejects_mismatched_input():
    stages = _stages(3)
    with pytest.raises(ValueError, match="矢印"):
        draw.device_stages(stages, ["psum_scatter"])
    with pytest.raises(ValueError, match="デバイス"):
        draw.device_stages([stages[0], np.zeros((2, 1))], ["psum_scatter"])
