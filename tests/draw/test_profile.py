"""ch6.draw の 6.11a 節の図（profile.py）: 記録したチップのトレースから描く時間軸と、分類ごとの横棒。"""
from __future__ import annotations

import pytest

from ch6 import draw, profile
from tests.drawcheck import small_and_deterministic


def test_timeline_rows_are_the_categories_of_that_execution():
    prof = profile.recorded("decode_bf16")
    d = small_and_deterministic(lambda: draw.op_timeline(prof, end=400))
    assert "行列積" in d.texts and "コピー・レイアウト" in d.texts
    assert "decode_bf16" in d.caption and f"演算 {len(prof.step_ops(0))} 個" in d.caption
    assert draw.op_timeline(prof, step=1).png != draw.op_timeline(prof, step=0).png
    with pytest.raises(ValueError):
        draw.op_timeline(prof, step=5)


def test_category_bars_total_each_trace():
    a, b = profile.recorded("decode_bf16"), profile.recorded("decode_bf16_token")
    d = small_and_deterministic(lambda: draw.category_bars({"層ごと": a, "トークン": b}))
    assert f"層ごと {sum(a.by_category().values()) / 1e3:.2f} ms" in d.caption
    assert "層ごと" in d.texts and "トークン" in d.texts and "行列積" in d.texts
