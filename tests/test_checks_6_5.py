"""6.5 小テストのチェックの単体テスト: 正解は通り、誤答・不正な値・例外・未解答はそれぞれの状態と言葉で返る。"""
from __future__ import annotations

import jax
import pytest

import ch6
from ch6.checks import s6_5

# 2 台以上での正解（1 台では問 6 の "a" も正解になる）
ANSWERS = {"6.5-1": "b", "6.5-2": "c", "6.5-3": "a", "6.5-4": "d", "6.5-5": "b",
           "6.5-6": "b", "6.5-7": "c", "6.5-8": "b", "6.5-9": "c"}

# 誤答ごとに、説明に含まれるべき言葉（その選択肢がなぜ違うかの要点）
WRONG = {
    "6.5-1": {"a": "先頭軸", "c": "スカラー出力", "d": "複数デバイス"},
    "6.5-2": {"a": "旧式", "b": "1 台の中", "d": "自分で書く"},
    "6.5-3": {"b": "コンパイラ", "c": "デバイス間の通信ではありません", "d": "旧式"},
    "6.5-4": {"a": "1 台の中", "b": "1 回しか", "c": "check_vma"},
    "6.5-5": {"a": "out_axes=0", "c": "out_axes=2", "d": "エラーにはなりません"},
    "6.5-6": {"a": "1 台の関数が返す形", "c": "入力 x 全体", "d": "次元の数を保ちます"},
    "6.5-7": {"a": "黙らせる", "b": "同じエラー", "d": "台ごとに違います"},
    "6.5-8": {"a": "部分和", "c": "足し合わせる", "d": "入れ替える"},
    "6.5-9": {"a": "一部の列", "b": "部分和は生まれません", "d": "入れ替える"},
}
IDS = sorted(ANSWERS)


def _const(value):
    return lambda: value


def test_every_question_is_registered():
    reg = ch6._core.registry()
    assert {k for k in reg if k.startswith("6.5-")} == set(IDS)
    assert [reg[k].title for k in IDS] == [f"q{i}" for i in range(1, 10)]


@pytest.mark.parametrize("qid", IDS)
def test_reference_passes(qid):
    r = ch6.run_check(qid, _const(ANSWERS[qid]))
    assert r.status == "pass", r.message
    assert "正解です" in r.message


@pytest.mark.parametrize("qid", IDS)
def test_other_spelling_passes(qid):
    # 大文字や前後の空白も同じ答えとして受け付ける
    r = ch6.run_check(qid, _const(f" {ANSWERS[qid].upper()}\n"))
    assert r.status == "pass", r.message


@pytest.mark.parametrize("qid,choice", [(q, c) for q in IDS for c in sorted(WRONG[q])])
def test_wrong_choice_is_explained(qid, choice):
    if qid == "6.5-6" and choice == "a" and jax.device_count() == 1:
        pytest.skip("1 台では (1, 6) も正解")
    r = ch6.run_check(qid, _const(choice))
    assert r.status == "fail", r.message
    assert f"「{choice}」は違います" in r.message
    assert WRONG[qid][choice] in r.message
    # 説明は正解の記号を明かさない
    correct = ANSWERS[qid]
    assert f"「{correct}」" not in r.message and f'"{correct}"' not in r.message


def test_every_wrong_choice_has_an_explanation():
    for qid in IDS:
        assert set(WRONG[qid]) | {ANSWERS[qid]} == set(s6_5.CHOICES), qid


def test_q6_first_choice_depends_on_device_count():
    r = ch6.run_check("6.5-6", _const("a"))
    if jax.device_count() == 1:
        assert r.status == "pass" and "同じ形" in r.message
    else:
        assert r.status == "fail" and "1 台の関数が返す形" in r.message


@pytest.mark.parametrize("value,words", [("z", "どれか 1 つ"), ("ab", "どれか 1 つ"), ("", "どれか 1 つ"),
                                          (3, "文字列で"), (None, "文字列で"), (True, "文字列で"),
                                          (["b"], "文字列で")])
@pytest.mark.parametrize("qid", ["6.5-1", "6.5-6", "6.5-8"])
def test_invalid_values_fail(qid, value, words):
    r = ch6.run_check(qid, _const(value))
    assert r.status == "fail", r.message
    assert words in r.message


@pytest.mark.parametrize("qid", IDS)
def test_not_implemented_is_not_done(qid):
    def q():
        raise NotImplementedError

    r = ch6.run_check(qid, q)
    assert r.status == "not_done"
    assert "まだ解答されていません" in r.message


@pytest.mark.parametrize("qid", ["6.5-2", "6.5-9"])
def test_exception_in_learner_code(qid):
    def q():
        return {"a": 1}["z"]

    r = ch6.run_check(qid, q)
    assert r.status == "error"
    assert "KeyError" in r.message and "あなたのコード" in r.message


def test_not_a_function():
    r = ch6.run_check("6.5-1", "b")
    assert r.status == "fail" and "関数を渡して" in r.message


def test_measured_answers_match_the_devices():
    n = jax.device_count()
    assert s6_5._q5_truth() == {"b"}
    assert s6_5._q6_truth(n) == ({"a", "b"} if n == 1 else {"b"})
    if n == 1:
        assert s6_5._q8_truth(n) == {"a"} and s6_5._q9_truth(n) == {"a"}
        assert "実測できず" in ch6.run_check("6.5-8", _const("b")).message
    else:
        assert s6_5._q8_truth(n) == {"b"}
        assert s6_5._q9_truth(n) == {"c"}
        assert f"{n} デバイスでコンパイル" in ch6.run_check("6.5-9", _const("c")).message


def test_unexpected_collective_is_a_checker_problem():
    with pytest.raises(RuntimeError):
        s6_5._collective_choices({"reduce-scatter": 1})
    assert s6_5._collective_choices({"all-reduce": 1, "all-gather": 2}) == {"b", "c"}
    assert s6_5._collective_choices({}) == {"a"}
