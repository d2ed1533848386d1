"""ch6.draw.device_values_from: 集団通信の後の各マスに、値を送ったデバイスの番号を書き、その色で塗る図。"""
import numpy as np

from ch6 import draw
from tests.drawcheck import MAX_PNG_BYTES


def test_texts_carry_values_devices_and_op():
    before = np.array([8.0, 7.0, 4.0, 3.0])
    after = np.roll(before, 1)
    origin = np.roll(np.arange(4), 1)
    d = draw.device_values_from(before, after, origin, op="ppermute")
    for t in ("D0", "D3", "ppermute", "8", "3", "前"):
        assert t in d.texts
    assert "送信元 3,0,1,2" in d.caption
    assert d.texts.count("D3") >= 3  # 行の名前、前のマス、後で D0 が受け取ったマス


def test_origin_changes_the_picture_and_png_is_small_and_stable():
    before = np.arange(4.0)
    after = np.roll(before, 1)
    a = draw.device_values_from(before, after, np.roll(np.arange(4), 1), op="ppermute")
    b = draw.device_values_from(before, after, np.arange(4), op="ppermute")  # 同じ値でも送り元が違えば色が違う
    assert a.png != b.png
    assert a.png == draw.device_values_from(before, after, np.roll(np.arange(4), 1), op="ppermute").png
    assert len(a.png) < MAX_PNG_BYTES


def test_all_gather_shape():
    before = np.arange(3.0)
    after = np.tile(before, (3, 1))
    origin = np.tile(np.arange(3), (3, 1))
    d = draw.device_values_from(before, after, origin, op="all_gather")
    assert d.texts.count("2") >= 4  # 前に 1 つ、後に 3 つ
    assert len(d.png) < MAX_PNG_BYTES
