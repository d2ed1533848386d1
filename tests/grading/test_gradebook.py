"""ch6-grade --gradebook: 成績簿（1 人 1 行）、メッセージ、演習ごとのまとめ。

6 人 × 2 冊のクラスを手で作った結果（Row）で、列・合計・読めないファイル・提出のないノートブックを確かめます
（カーネルなし）。最後の 1 つだけ、tests/test_grade.py と同じ作り方（tests/grade_class.py）の本物の提出物
（solutions/ と exercises/ の 6_1_vmap から、例のセルを除いたもの）を ch6-grade で採点し、
コマンドから 3 つのファイルができることを確かめます。
"""
from __future__ import annotations

import csv

import pytest

from ch6 import Status
from ch6.grading import cli, gradebook
from ch6.grading.model import STATUS_WORDS, ExerciseResult, Row

V = {"6.1-1": "rbf_features", "6.1-2": "time_major_apply", "6.1-3": "batched_distances"}
P = {"6.2-1": "normalize_across_devices", "6.2-2": "sgd_step"}
BROKEN = "ファイルが壊れていて読めません（JSON の 53 行目 5 文字目で解析エラー）。"
SHAPE = "rbf_features: 出力の形が (バッチ, 中心) ではありません。"


def _row(learner, book, statuses, notes=(), messages=None):
    titles = V if book == "6_1_vmap" else P
    messages = messages or {}
    return Row(learner, f"subs/{learner}_{book}.ipynb", book, {
        i: ExerciseResult(i, titles[i], s, messages.get(i, f"{titles[i]}: {s}")) for i, s in zip(titles, statuses)},
        notes=list(notes))


def _class():
    """6 人、2 冊: 全問正解、一部、読めないファイル、提出のない冊、2 冊とも未解答、どの冊か分からないファイル。"""
    return [
        _row("aoki", "6_1_vmap", ["pass", "pass", "pass"]),
        _row("aoki", "6_2_pmap", ["pass", "pass"]),
        _row("ito", "6_1_vmap", ["pass", "fail", "error"], messages={"6.1-2": "time_major_apply: 形が違います。"}),
        _row("ito", "6_2_pmap", ["fail", "not_done"], notes=["チェックの呼び出しが書き換えられたか消されています（6.2-2）。"]),
        _row("ueda", "6_1_vmap", ["not_graded"] * 3, notes=[BROKEN], messages=dict.fromkeys(V, BROKEN)),
        _row("ueda", "6_2_pmap", ["fail", "pass"]),
        _row("endo", "6_1_vmap", ["fail", "pass", "timeout"], messages={"6.1-1": SHAPE}),
        _row("kato", "6_1_vmap", ["fail", "not_done", "not_done"], messages={"6.1-1": SHAPE}),
        _row("kato", "6_2_pmap", ["not_done", "not_done"]),
        Row("=mori", "subs/=mori_report.ipynb", None, notes=["ノートブックではありません（.ipynb の JSON ではないファイルです）。"]),
    ]


def _csv(path):
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")  # BOM つき UTF-8（Excel が日本語を正しく読む）
    with path.open(encoding="utf-8-sig", newline="") as f:
        return list(csv.reader(f))


@pytest.fixture
def written(tmp_path):
    return gradebook.write(_class(), tmp_path / "成績簿.csv")


def test_one_row_per_learner_with_numeric_points_and_a_total(written):
    book, msgs, summ = written
    assert [p.name for p in written] == ["成績簿.csv", "成績簿_messages.csv", "成績簿_summary.csv"]
    rows = _csv(book)
    assert rows[0] == ["learner", "6_1_vmap (max 3)", "6_2_pmap (max 2)", "total (max 5)"]  # 見出しに満点
    assert rows[1:] == [["'=mori", "", "", "0"],  # 式として実行されないように ' を前に
                        ["aoki", "3", "2", "5"],
                        ["endo", "1", "", "1"],  # 6_2_pmap の提出なし: 空欄（0 点ではない。理由はメッセージのファイルに）
                        ["ito", "1", "0", "1"],
                        ["kato", "0", "0", "0"],
                        ["ueda", "0", "1", "1"]]  # 読めないファイル: 0 点で行はある
    assert all(c.isdigit() or c == "" for r in rows[1:] for c in r[1:])  # 点の列は数値か空欄だけ


def test_messages_name_every_learner_and_the_reason(written):
    rows = _csv(written[1])
    assert rows[0] == ["learner", "notebook", "exercise", "status", "message", "file"]
    by = {(r[0], r[1], r[2], r[3]): r for r in rows[1:]}
    # 読めないファイル: 理由が 1 行（演習ごとには繰り返さない、備考の同じ文も 1 回）
    ueda = [r for r in rows if r[:2] == ["ueda", "6_1_vmap"]]
    assert ueda == [["ueda", "6_1_vmap", "", "not_graded", BROKEN, "ueda_6_1_vmap.ipynb"]]  # 提出物のフォルダから
    assert by["endo", "6_2_pmap", "", "not_submitted"][4] == gradebook.NOT_SUBMITTED_MESSAGE
    assert by["'=mori", "", "", "not_graded"][4].startswith("ノートブックではありません")
    assert by["ito", "6_2_pmap", "", "note"][4].startswith("チェックの呼び出しが書き換えられた")
    assert by["ito", "6_1_vmap", "6.1-2", "fail"][4] == "time_major_apply: 形が違います。"
    # 1 冊の中は演習の順、備考はその後
    assert [r[2] for r in rows if r[:2] == ["ito", "6_2_pmap"]] == ["6.2-1", "6.2-2", ""]
    assert {r[3] for r in rows[1:]} <= set(STATUS_WORDS)


def test_summary_counts_and_most_frequent_wrong_messages(written):
    rows = _csv(written[2])
    head, body = rows[0], {r[1]: dict(zip(rows[0], r)) for r in rows[1:]}
    assert head[:8] == ["notebook", "exercise", "function", "submissions", "solved", "wrong", "not_done", "not_graded"]
    assert list(body) == ["6.1-1", "6.1-2", "6.1-3", "6.2-1", "6.2-2"]
    one = body["6.1-1"]
    assert (one["submissions"], one["solved"], one["wrong"], one["not_done"], one["not_graded"]) == ("5", "2", "2", "0", "1")
    assert (one["wrong_message_1"], one["wrong_count_1"], one["wrong_message_2"]) == (SHAPE, "2", "")
    three = body["6.1-3"]  # error と timeout も ❌、件数が同じなら文の順
    assert (three["solved"], three["wrong"], three["wrong_count_1"], three["wrong_count_2"]) == ("1", "2", "1", "1")
    assert body["6.2-2"]["not_done"] == "2" and body["6.2-2"]["submissions"] == "4"


def test_notebook_columns_in_section_order():
    rows = [Row("a", "a.ipynb", "6_10_inference"), Row("a", "b.ipynb", "6_2_pmap"), Row("a", "c.ipynb", "6_1_vmap")]
    assert gradebook.table(rows)[0] == ["learner", "6_1_vmap (max 0)", "6_2_pmap (max 0)", "6_10_inference (max 0)",
                                        "total (max 0)"]


def test_file_paths_are_relative_to_the_submissions_folder(tmp_path):
    """先生のマシンの絶対パス（ユーザー名やフォルダの名前）を CSV に書かない。"""
    rows = [Row("a", str(tmp_path / "class" / "a" / "6_1_vmap.ipynb"), "6_1_vmap", notes=["x"]),
            Row("b", str(tmp_path / "class" / "b" / "6_1_vmap.ipynb"), "6_1_vmap", notes=["y"])]
    files = {m[5] for m in gradebook.messages(rows)}
    assert files == {"a/6_1_vmap.ipynb", "b/6_1_vmap.ipynb"}, files
    gradebook.write(rows, tmp_path / "g.csv")
    assert str(tmp_path) not in (tmp_path / "g_messages.csv").read_text(encoding="utf-8-sig")


def test_every_status_word_is_documented_once():
    assert {s.value for s in Status} | {"not_submitted", "note"} == set(STATUS_WORDS)
    assert all(STATUS_WORDS[s.value][0] == s.mark for s in Status)  # 印は ch6._core の表と同じ


def test_output_folder_is_checked_before_grading(tmp_path, capsys):
    out = tmp_path / "none" / "成績簿.csv"
    assert cli.main([str(tmp_path), "--gradebook", str(out)]) == 2
    assert "--gradebook" in capsys.readouterr().err


@pytest.mark.slow
def test_command_writes_the_gradebook_from_real_submissions(tmp_path):
    from tests.grade_class import EXERCISE, SOLUTION, lean_notebook, read_notebook, save_notebook

    if not (SOLUTION.exists() and EXERCISE.exists()):
        pytest.skip("solutions/ と exercises/ の 6_1_vmap が必要")
    subs = tmp_path / "subs"
    subs.mkdir()
    save_notebook(lean_notebook(read_notebook(SOLUTION)), subs / "aoki_6_1_vmap.ipynb")  # 全問正解
    save_notebook(lean_notebook(read_notebook(EXERCISE)), subs / "ito_6_1_vmap.ipynb")   # 未解答
    text = (subs / "aoki_6_1_vmap.ipynb").read_text(encoding="utf-8")
    (subs / "ueda_6_1_vmap.ipynb").write_text(text[: len(text) // 2], encoding="utf-8")  # 壊れた JSON
    (subs / "ito_6_2_pmap.ipynb").write_text("明日出します\n", encoding="utf-8")  # 2 冊目: ノートブックでない
    out = tmp_path / "成績簿.csv"
    assert cli.main([str(subs), "--gradebook", str(out), "--jobs", "2", "--devices", "2", "--quiet"]) == 0
    n = len(cli.load_assignments(None)["6_1_vmap"].ids)
    m = len(cli.load_assignments(None)["6_2_pmap"].ids)
    assert _csv(out) == [["learner", f"6_1_vmap (max {n})", f"6_2_pmap (max {m})", f"total (max {n + m})"],
                         ["aoki", str(n), "", str(n)], ["ito", "0", "0", "0"], ["ueda", "0", "", "0"]]
    msgs = [r[:4] for r in _csv(out.with_name("成績簿_messages.csv"))]
    assert ["ueda", "6_1_vmap", "", "not_graded"] in msgs and ["ito", "6_2_pmap", "", "not_graded"] in msgs
    assert ["aoki", "6_2_pmap", "", "not_submitted"] in msgs and ["ueda", "6_2_pmap", "", "not_submitted"] in msgs
    summary = [r[:8] for r in _csv(out.with_name("成績簿_summary.csv"))[1:]]
    assert [r[3:] for r in summary if r[0] == "6_1_vmap"] == [["3", "1", "0", "1", "1"]] * n
    assert {tuple(r[3:]) for r in summary if r[0] == "6_2_pmap"} == {("1", "0", "0", "0", "1")}
