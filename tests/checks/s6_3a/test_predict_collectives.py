"""6.3a-2 predict_collectives のチェック（ch6/checks/s6_3a/predict_collectives.py）のテスト。"""
from __future__ import annotations

import numpy as np
import pytest

from ch6.checks import s6_3a
from tests.checkhelp import N, multi, not_done
from tests.checks.s6_3a.common import expect_fail, expect_pass

ANSWER = dict(s6_3a.ANSWER)


def test_predict_right_and_spellings():
    expect_pass("6.3a-2", lambda: dict(ANSWER))
    # 表記ゆれ（大文字、下線、空白、None、「なし」、小文字のキー）も受け付ける
    loose = {k.lower() if k in "AC" else k: (v.upper().replace("-", "_") if v != "none" else None)
             for k, v in ANSWER.items()}
    loose["D"] = "なし"
    expect_pass("6.3a-2", lambda: loose)


def test_predict_wrong_case_names_the_case_without_revealing():
    first = sorted(ANSWER)[0]
    other = "none" if ANSWER[first] != "none" else "all-gather"
    r = expect_fail("6.3a-2", lambda: {**ANSWER, first: other}, f"ケース {first} は {other!r} ではありません")
    assert ANSWER[first] not in r.message.split("。")[0]


def test_predict_bad_shapes_of_answer():
    expect_fail("6.3a-2", lambda: {"A": "none"}, "ケース B, C, D, E の予想がありません")
    expect_fail("6.3a-2", lambda: {**ANSWER, "E": "broadcast"}, "通信の名前ではありません")
    expect_fail("6.3a-2", lambda: {**ANSWER, "E": 3}, "通信の名前ではありません")
    expect_fail("6.3a-2", lambda: list(ANSWER.values()), "辞書のはず")
    expect_fail("6.3a-2", lambda: 1 / 0, "ZeroDivisionError", status="error")
    expect_fail("6.3a-2", not_done, status="not_done")


@multi
@pytest.mark.parametrize("case", sorted(s6_3a.PREDICT_CASES))
def test_predict_answer_key_matches_the_compiler(case):
    """答えの表は、このデバイス数で実際にコンパイルした HLO と一致する。"""
    out, counts = s6_3a.compiled_case(case)
    a, b = s6_3a.case_arrays(N)
    np.testing.assert_allclose(np.asarray(out), a.T @ b, rtol=1e-4, atol=1e-4)
    want = ANSWER[case]
    assert set(counts) == (set() if want == "none" else {want}), counts


@multi
def test_predict_judges_by_the_compilation_it_claims(monkeypatch):
    """回帰: 「コンパイルした HLO と一致」と書くなら、チェックは本当にコンパイルした結果で判定する。"""
    calls = []
    real = s6_3a.compiled_answers

    def spy():
        calls.append(1)
        return real()

    monkeypatch.setattr(s6_3a, "compiled_answers", spy)
    r = expect_pass("6.3a-2", lambda: dict(ANSWER))
    assert calls and "コンパイルした HLO" in r.message
    # コンパイルの結果が違えば、それに従う（表ではなく HLO が正解）
    monkeypatch.setattr(s6_3a, "compiled_answers", lambda: {**ANSWER, "B": "all-to-all"})
    expect_fail("6.3a-2", lambda: dict(ANSWER), "ケース B")


@pytest.mark.skipif(N != 1, reason="1 デバイスのときだけ")
def test_predict_one_device_does_not_claim_a_compilation():
    r = expect_pass("6.3a-2", lambda: dict(ANSWER))
    assert "2 個以上" in r.message
