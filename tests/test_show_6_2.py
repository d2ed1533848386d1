"""ch6.show の value_text / before_after（デバイスごとの値の表）。"""
import numpy as np
import pytest

from ch6 import show


def test_value_text_scalars_vectors_matrices():
    assert show.value_text(np.float32(36.0)) == "36"
    assert show.value_text(4.5) == "4.5"
    assert show.value_text(np.int32(7)) == "7"
    assert show.value_text(np.float32(-0.00001)) == "0"  # -0 はそろえる
    assert show.value_text(np.float32(0.354312), digits=3) == "0.354"
    assert show.value_text(np.array([1.0, 4.0, 7.0])) == "[1 4 7]"
    assert show.value_text(np.arange(4).reshape(2, 2)) == "[0 1] | [2 3]"


def test_value_text_hides_last_digits():
    a = np.float32(0.1) * 3  # 0.3 に近いが末尾の桁は計算の順で変わりうる
    assert show.value_text(a) == show.value_text(np.nextafter(a, np.float32(1))) == "0.3"


def test_before_after_is_plain_and_aligned():
    out = show.before_after("psum", np.array([1.0, 4.0, 17.0]), np.full(3, 22.0))
    lines = out.splitlines()
    assert lines[0] == "psum"
    assert lines[1].split() == ["デバイス", "前", "後"]
    assert [ln.split() for ln in lines[3:]] == [["0", "1", "22"], ["1", "4", "22"], ["2", "17", "22"]]
    assert len({show._width(ln) for ln in lines[1:]}) == 1  # 右寄せで幅がそろう
    assert "\x1b" not in out
    assert show.before_after(None, [[1, 2]], [[3, 4]]).splitlines()[0].startswith("デバイス")


def test_before_after_lengths_must_match():
    with pytest.raises(ValueError):
        show.before_after("x", [1, 2], [1])
