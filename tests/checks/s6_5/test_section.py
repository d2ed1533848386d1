"""ch6/checks/s6_5 の全体にかかわるテスト（複数の演習をまたぐもの）。

6.5 小テストのチェックの単体テスト: 正解は通り、誤答・不正な値・例外・未解答はそれぞれの状態と言葉で返る。

正解はチェックがその場で JAX を動かして求めるので、ここでは「2 個以上のデバイスでの正解」を書き、
デバイスが 1 個のときに区別できなくなる選択肢は、チェックが求めた正解の集合から読みます。"""
from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest

import ch6
from ch6.checking import cannot_tell
from ch6.checks import s6_5
from tests.checks.s6_5.common import const

ROOT = Path(__file__).resolve().parents[3]


# デバイスが 2 個以上のときの正解
ANSWERS = {"6.5-1": "b", "6.5-2": "b", "6.5-3": "b", "6.5-4": "b", "6.5-5": "b",
           "6.5-6": "b", "6.5-7": "c", "6.5-8": "b", "6.5-9": "c", "6.5-10": "b"}


# 誤答ごとに、説明に含まれるべき言葉（その選択肢がなぜ違うかの要点）
WRONG = {
    "6.5-1": {"a": "行列積の形が合いません", "c": "スカラーを返す関数だけ", "d": "argnums の既定は 0"},
    "6.5-2": {"a": "pmap の形", "c": "1 デバイスの関数が返す形", "d": "エラーにはなりません"},
    "6.5-3": {"a": "1 つのデバイスのデータだけ", "c": "pmean を入れることはない", "d": "{V:data} の印がなく"},
    "6.5-4": {"a": "割り切れない", "c": "1 回しか使えない", "d": "エラーにならないものが 1 つある"},
    "6.5-5": {"a": "out_axes=0", "c": "out_axes=2", "d": "エラーにはなりません"},
    "6.5-6": {"a": "1 デバイスの関数が返す形", "c": "入力 x6 全体", "d": "次元の数を保つ"},
    "6.5-7": {"a": "検査を止めるだけ", "b": "jit で包んでも", "d": "そのシャードだけ"},
    "6.5-8": {"a": "部分和", "c": "足し合わせる", "d": "入れ替える"},
    "6.5-9": {"a": "一部の列", "b": "部分和は生じず", "d": "入れ替える"},
    "6.5-10": {"a": "分割する意味がなくなります", "c": "足し合わせない", "d": "scatter_dimension=1"},
}


# 選択肢のコードを実際に動かしたときに起きること（デバイス 2 個以上）。説明がこれと食い違ってはいけない
RAN = {
    ("6.5-1", "a"): "TypeError になります", ("6.5-1", "c"): "TypeError になります",
    ("6.5-1", "d"): "形 {W: (64, 3, 10), b: (64, 3)} の勾配が返ります",
    ("6.5-4", "a"): "ValueError になります", ("6.5-4", "c"): "DuplicateSpecError になります",
    ("6.5-7", "a"): "エラーは出ず", ("6.5-7", "b"): "ValueError になります", ("6.5-7", "d"): "ValueError になります",
    ("6.5-10", "a"): "全体の形が W の", ("6.5-10", "c"): "全体の形が W の",
}


IDS = sorted(ANSWERS, key=lambda q: int(q.split("-")[1]))


OUTCOMES = {"6.5-1": lambda n: s6_5.q1_outcomes(), "6.5-3": s6_5.q3_outcomes, "6.5-4": s6_5.q4_outcomes,
            "6.5-7": s6_5.q7_outcomes, "6.5-10": s6_5.q10_outcomes}


TRUTHS = {"6.5-2": s6_5.q2_truth, "6.5-5": lambda n: s6_5.q5_truth(), "6.5-6": s6_5.q6_truth}


def correct_now(qid: str) -> set[str]:
    """いまのデバイス数でチェックが正解とする選択肢。"""
    n = jax.device_count()
    if qid in OUTCOMES:
        return {k for k, o in OUTCOMES[qid](n).items() if o.ok}
    if qid in TRUTHS:
        return set(TRUTHS[qid](n))
    return {ANSWERS[qid]}  # 問 8・9: 1 個なら規則で採点


def test_every_question_is_registered():
    reg = ch6.registry()
    assert {k for k in reg if k.startswith("6.5-")} == set(IDS)
    assert [reg[k].title for k in IDS] == [f"q{i}" for i in range(1, 11)]


@pytest.mark.parametrize("qid", IDS)
def test_reference_passes(qid):
    r = ch6.run_check(qid, const(ANSWERS[qid]))
    assert r.status == "pass", r.message
    assert r.message.startswith(f"{r.message.split(':')[0]}: ") and "正解です" not in r.message  # 解説だけ（issue 46）


@pytest.mark.parametrize("spelling", [" {}\n", "{}", "{upper}", "\u3000{full}\u3000"])
@pytest.mark.parametrize("qid", IDS)
def test_other_spellings_pass(qid, spelling):
    # 大文字、前後の空白（全角の空白も）、全角の英字も同じ答えとして受け付ける
    a = ANSWERS[qid]
    answer = spelling.format(a, upper=a.upper(), full=chr(ord(a) - ord("a") + ord("ａ")))
    r = ch6.run_check(qid, const(answer))
    assert r.status == "pass", (answer, r.message)


@pytest.mark.parametrize("qid,choice", [(q, c) for q in IDS for c in sorted(WRONG[q])])
def test_wrong_choice_is_explained(qid, choice):
    correct = correct_now(qid)
    r = ch6.run_check(qid, const(choice))
    if choice in correct:  # デバイス 1 個で区別できなくなった選択肢
        assert jax.device_count() == 1, (qid, choice, correct)
        assert r.status == "pass" and cannot_tell(f"選択肢 {'・'.join(sorted(correct))} の違い") in r.message
        return
    assert r.status == "fail", r.message
    assert f"「{choice}」は違います" in r.message
    assert WRONG[qid][choice] in r.message
    # 説明は正解の記号を明かさない
    for c in correct:
        assert f"「{c}」" not in r.message and f'"{c}"' not in r.message
    if (qid, choice) in RAN and jax.device_count() > 1:
        assert "実際に動かすと、" + RAN[qid, choice] in r.message, r.message


def test_every_wrong_choice_has_an_explanation():
    for qid in IDS:
        assert set(WRONG[qid]) | {ANSWERS[qid]} == set(s6_5.CHOICES), qid


@pytest.mark.parametrize("qid", IDS)
def test_correct_set_depends_on_the_device_count_only_as_stated(qid):
    correct = correct_now(qid)
    if jax.device_count() > 1:
        assert correct == {ANSWERS[qid]}, (qid, correct)
    else:
        assert ANSWERS[qid] in correct


def test_explanations_match_what_the_options_do():
    """説明が言う「エラーになる」「値が違う」が、実際に動かした結果と一致する（JAX の版が変われば気づく）。"""
    n = jax.device_count()
    q1 = s6_5.q1_outcomes()
    assert [q1[k].ok for k in "abcd"] == [False, True, False, False]
    q7 = s6_5.q7_outcomes(n)
    assert q7["b"].text.startswith("ValueError") and q7["d"].text.startswith("ValueError") and q7["c"].ok
    q4 = s6_5.q4_outcomes(n)
    assert q4["c"].text.startswith("DuplicateSpecError") and q4["b"].ok and not q4["d"].ok
    q10 = s6_5.q10_outcomes(n)
    assert q10["b"].ok
    if n > 1:
        assert q4["a"].text.startswith("ValueError")
        assert not q7["a"].ok and "エラーは出ず" in q7["a"].text
        assert not q10["a"].ok and not q10["c"].ok and not q10["d"].ok
        assert s6_5.q3_outcomes(n)["b"].ok and not s6_5.q3_outcomes(n)["c"].ok


@pytest.mark.parametrize("value,words", [("z", "どれか 1 つ"), ("ab", "どれか 1 つ"), ("", "どれか 1 つ"),
                                          ("b\nc", "どれか 1 つ"), ("x" * 100, "…"),
                                          (3, "int の 3 です"), (None, "None です"), (True, "bool の True です"),
                                          (["b"], "list（要素 1 個）です"), (float("nan"), "float の nan です"),
                                          (np.float32(2.5), "float32）です")])
@pytest.mark.parametrize("qid", ["6.5-1", "6.5-6", "6.5-8", "6.5-10"])
def test_invalid_values_fail(qid, value, words):
    # words は値と「です」の継ぎ目まで: 英数字の後は空白、全角の ）の後は空白なし（editor2_a K15）
    r = ch6.run_check(qid, const(value))
    assert r.status == "fail", r.message
    assert words in r.message, r.message
    assert "\n" not in r.message


@pytest.mark.parametrize("qid", IDS)
def test_not_implemented_is_not_done(qid):
    def q():
        raise NotImplementedError

    r = ch6.run_check(qid, q)
    assert r.status == "not_done"
    assert "関数の本体に答えを書いてから" in r.message


@pytest.mark.parametrize("qid", ["6.5-2", "6.5-9"])
def test_exception_in_learner_code(qid):
    def q():
        return {"a": 1}["z"]

    r = ch6.run_check(qid, q)
    assert r.status == "error"
    assert "KeyError" in r.message and "解答のコード" in r.message


def test_unexpected_collective_is_a_checker_problem():
    with pytest.raises(RuntimeError):
        s6_5.collective_choices({"reduce-scatter": 1})
    assert s6_5.collective_choices({"all-reduce": 1, "all-gather": 2}) == {"b", "c"}
    assert s6_5.collective_choices({}) == {"a"}


def _solution_markdown() -> dict[str, str]:
    """解答ノートブックの「## 問 N」で始まるマークダウン -> 本文。"""
    nb = json.loads((ROOT / "solutions" / "6_5_summary.ipynb").read_text(encoding="utf-8"))
    out = {}
    for cell in nb["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and "## 問 " in text:
            head = text[text.index("## 問 "):]
            number = head.split()[2].split("（")[0].split("：")[0]
            out[f"6.5-{number}"] = head
    return out


def test_quiz_text_shows_the_options_the_checker_runs():
    md = _solution_markdown()
    assert set(md) == set(IDS), sorted(md)
    for qid, options in (("6.5-1", s6_5.Q1_OPTIONS), ("6.5-4", s6_5.Q4_OPTIONS),
                         ("6.5-7", s6_5.Q7_OPTIONS), ("6.5-10", s6_5.Q10_OPTIONS)):
        for key, source in options.items():
            assert f"- {key}. `{source}`" in md[qid], (qid, key, source)
    for key, shape in s6_5.Q5_SHAPES.items():
        assert f"- {key}. `{shape}`" in md["6.5-5"]


def test_quiz_text_says_which_spellings_are_accepted():
    nb = json.loads((ROOT / "solutions" / "6_5_summary.ipynb").read_text(encoding="utf-8"))
    intro = "".join(nb["cells"][0]["source"])
    for word in ("大文字", "空白", "全角"):
        assert word in intro, word


def test_quiz_code_is_what_the_checker_runs():
    """問題文のセルのコードと、チェックが正解を求めるために動かすコードが同じ。"""
    nb = json.loads((ROOT / "solutions" / "6_5_summary.ipynb").read_text(encoding="utf-8"))
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    for snippet in (
        'return (jnp.tanh(params["W"] @ x + params["b"]).sum() - y) ** 2',            # 問 1 の loss（q1_loss）
        'jax.smap(col_sum, in_axes=0, out_axes=0, axis_name="data")',                  # 問 2
        'jax.smap(grad_body, in_axes=(None, 0), out_axes=None, axis_name="data")',     # 問 3
        "return jnp.mean((x @ w) ** 2)",
        "x4 = jnp.ones((3 * n_devices + 1, 2 * n_devices))",                            # 問 4
        'g = jax.vmap(f, in_axes=(2, None), out_axes=1)',                              # 問 5
        'in_specs=P("data", None), out_specs=P("data", None)',                         # 問 6
        'total = jax.shard_map(local_sum, mesh=auto_mesh, in_specs=P("data"), out_specs=P())',  # 問 7
        'out_shardings=NamedSharding(auto_mesh, P()))',                                # 問 8
        'out_shardings=NamedSharding(auto_mesh, P("data", None)))',                    # 問 9
        'in_specs=P("data"), out_specs=P("data", None)',                               # 問 10
    ):
        assert snippet in code, snippet
