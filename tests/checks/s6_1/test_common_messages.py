"""ch6/checks/s6_1/common.py の expect_tree のメッセージ: 値の説明と「でした」の継ぎ目（editor2_a K15）。

全角の ）の後は空白なし（「list（要素 3 個）でした」）、型の名前は「の値」で日本語に続ける（「NoneTypeでした」にしない）。"""
import numpy as np
import pytest

from ch6.checking import Fail
from ch6.checks.s6_1.common import expect_tree


@pytest.mark.parametrize("got, words", [(None, "、NoneType の値でした。"), ([1, 2, 3], "、list（要素 3 個）でした。"),
                                        ({"v": 1}, "でした。")])
def test_expect_tree_names_the_value_without_a_stray_space(got, words):
    with pytest.raises(Fail) as err:
        expect_tree(got, {"w": np.zeros(2), "b": np.zeros(())}, "clipped_mean_grad の結果")
    msg = str(err.value)
    assert words in msg and " でした" not in msg, msg
