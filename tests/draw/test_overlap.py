"""ch6.draw の 6.11b 節の図（overlap.py）: リングで届いたシャードの表と、重ねたときと重ねないときの時間の帯。
図の文字に実際の番号と秒が入り、入力が違えば図も違い、小さく決定的であること。"""
from __future__ import annotations

import numpy as np
import pytest

from ch6 import cost, draw, overlap
from ch6.hardware import chip
from tests.drawcheck import small_and_deterministic


def _arrived(n, direction):
    """schedule() から作った、trace() と同じ形 (デバイス, ステップ, 2) の表。"""
    steps = overlap.schedule(n, direction)
    return np.array([[list(st.multiply[d]) + [-1] * (2 - len(st.multiply[d])) for st in steps] for d in range(n)])


def test_ring_schedule_writes_the_carried_shards_with_their_direction():
    d = small_and_deterministic(lambda: draw.ring_schedule(_arrived(4, "two")))
    assert "元0" in d.texts and "→3" in d.texts and "←1" in d.texts   # デバイス 0: 元 0、右回りで 3、左回りで 1
    assert "デバイス 3" in d.texts and "ステップ 2" in d.texts
    assert d.texts.count("送らない") == 1 and "送る →←" in d.texts and "送る →" in d.texts
    assert "左回りで届いたシャード 4 個" in d.caption                  # 4 デバイス × ステップ 1 の左回り
    one = draw.ring_schedule(_arrived(4, "one"))
    assert not any(t.startswith("←") for t in one.texts) and one.png != d.png
    assert "4 デバイス × 4 ステップ" in one.caption


def test_ring_schedule_of_one_device_and_bad_shapes():
    d = draw.ring_schedule(_arrived(1, "one"))
    assert "元0" in d.texts and "送らない" in d.texts
    with pytest.raises(ValueError):
        draw.ring_schedule(np.zeros((3, 2)))


def test_overlap_timeline_shows_serial_and_overlapped_seconds_of_the_model():
    v5e = chip("TPU v5e")
    t = cost.collective_matmul_times(v5e, 4096, 8192, 16384, 4)
    steps = cost.ring_steps(4, "one")
    math, comm = [a * t.math for a, _, _ in steps], [r * t.comm for _, r, _ in steps]
    d = small_and_deterministic(lambda: draw.overlap_timeline(math, comm, title="題"))
    assert "重ねない 2,513.8 μs" in d.texts and "重ねる 1,467.3 μs：行列積" in d.texts and "題" in d.texts
    assert "積3" in d.texts and "送2" in d.texts and "送3" not in d.texts   # 最後のステップは送らない
    assert d.caption.endswith("重ねる 1467.3 μs")
    assert draw.overlap_timeline(math, [c / 2 for c in comm]).png != d.png
    with pytest.raises(ValueError):
        draw.overlap_timeline([1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        draw.overlap_timeline([-1.0], [1.0])
