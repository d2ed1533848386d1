"""6.5 の小テストの誤答（issue 39）: どの問も、正解でない記号は 1・3・8 デバイスで理由つきで落ちるか、
デバイスが 1 個で区別できない選択肢なら、正解の 1 行がそう言う。"""
import pytest

from ch6.checks.s6_5.common import CHOICES
from tests.checkhelp import N, expect

ANSWERS = {1: "b", 2: "b", 3: "b", 4: "b", 5: "b", 6: "b", 7: "c", 8: "b", 9: "c", 10: "b"}
# デバイスが 1 個では区別できず、正解として扱う記号（問ごと）
ALIKE_AT_ONE = {2: "c", 3: "ac", 4: "a", 6: "a", 7: "a", 10: "acd"}


@pytest.mark.parametrize("q", sorted(ANSWERS))
def test_every_wrong_letter(q):
    for letter in CHOICES:
        if letter == ANSWERS[q]:
            continue
        if N == 1 and letter in ALIKE_AT_ONE.get(q, ""):
            expect(f"6.5-{q}", lambda letter=letter: letter, "pass", "デバイスが 1 個なので", "確かめられません")
        else:
            expect(f"6.5-{q}", lambda letter=letter: letter, "fail", f"「{letter}」は違います")
