"""ch6.draw の 6.10 節の図（serving.py）: 連続バッチ処理のスロットの占有。
図の文字に実際の要求の番号とスロットが入り、入力が違えば図も違い、小さく決定的であること。"""
from __future__ import annotations

import numpy as np
import pytest

from ch6 import draw
from tests.drawcheck import small_and_deterministic

OCC = [[0, 1, 2], [0, 1, 2], [0, 3, 2], [4, 3, -1], [4, -1, -1]]   # (ステップ, スロット)


def test_slots_name_each_request_once_per_run():
    d = small_and_deterministic(lambda: draw.slot_occupancy(OCC))
    labels = [t for t in d.texts if t.startswith("要求 ")]
    assert sorted(labels) == ["要求 0", "要求 1", "要求 2", "要求 3", "要求 4"]   # 続く区間は 1 本の帯
    assert "スロット 2" in d.texts and "デコードのステップ" in d.texts
    assert "3 スロット × 5 ステップ" in d.caption and "要求 5 件" in d.caption and "占有率 80%" in d.caption


def test_a_different_table_gives_a_different_picture():
    a = draw.slot_occupancy(OCC)
    b = draw.slot_occupancy(np.array(OCC)[:, ::-1])
    assert a.png != b.png
    empty = draw.slot_occupancy([[-1, -1]], title="空き")
    assert "占有率 0%" in empty.caption and "空き" in empty.texts


@pytest.mark.parametrize("bad", [[1, 2, 3], [[0, -2]], np.zeros((0, 3))])
def test_rejects_tables_that_are_not_steps_by_slots(bad):
    with pytest.raises(ValueError):
        draw.slot_occupancy(bad)
