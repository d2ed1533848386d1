"""ch6.grading.report: 表（--details つき）、自己チェック、CSV、JSON を手で作った結果から（カーネルなし）。"""
from __future__ import annotations

import csv
import io
import json

from rich.console import Console

from ch6.grading import exercises, report
from ch6.grading.model import ExerciseResult, Row

A = exercises.Assignment("6_1_vmap", ["6.1-1", "6.1-2"], {"6.1-1": "batched_predict", "6.1-2": "predict_feature_major"})


def _rows():
    ok = Row("aoki", "s/aoki.ipynb", "6_1_vmap", {
        "6.1-1": ExerciseResult("6.1-1", "batched_predict", "pass", "batched_predict: 正解です。"),
        "6.1-2": ExerciseResult("6.1-2", "predict_feature_major", "not_done", "predict_feature_major: まだです。")})
    broken = Row("ueda", "s/ueda.ipynb", "6_1_vmap", {
        i: ExerciseResult(i, A.titles[i], "not_graded", "空のファイルです。") for i in A.ids}, notes=["空のファイルです。"])
    stray = Row("x", "s/x.ipynb", None, notes=["どの演習ノートブックか判別できません。"])
    return [ok, broken, stray]


def _text(fn, *args, **kwargs):
    buf = io.StringIO()
    fn(*args, console=Console(file=buf, width=200, color_system=None), **kwargs)
    return buf.getvalue()


def test_table_with_details():
    text = _text(report.render, _rows(), {"6_1_vmap": A}, details=True)
    assert "6_1_vmap（2 件）" in text and "\x1b" not in text
    aoki = next(ln for ln in text.splitlines() if ln.startswith("│ aoki "))
    ueda = next(ln for ln in text.splitlines() if ln.startswith("│ ueda "))
    assert "✅" in aoki and "⏳" in aoki and "1/2" in aoki
    assert ueda.count("⚠") == 2 and "\ufe0f" not in ueda and "0/2" in ueda
    assert "6.1-1 batched_predict（正解 1/2）, 6.1-2 predict_feature_major（正解 0/2）" in text
    assert "  ⏳ 未解答 [6.1-2] predict_feature_major: まだです。" in text
    assert "  ⚠️ 採点できません 空のファイルです。" in text and "[6.1-1] 空のファイル" not in text  # 同じ理由は 1 回
    assert "⚠️ s/x.ipynb: どの演習ノートブックか判別できません。" in text


def test_self_check_of_an_unreadable_file_says_the_reason_once():
    text = _text(report.render_self_check, _rows()[1])
    assert text.splitlines() == ["s/ueda.ipynb（6_1_vmap）", "備考: 空のファイルです。", "合計 / total: 0/2"]


def test_csv_and_json(tmp_path):
    rows = _rows()
    report.write_csv(rows, tmp_path / "a.csv")
    report.write_json(rows, tmp_path / "a.json")
    assert (tmp_path / "a.csv").read_bytes().startswith(b"\xef\xbb\xbf")  # Excel 用の BOM
    with (tmp_path / "a.csv").open(encoding="utf-8-sig", newline="") as f:
        got = {r["学習者 / learner"]: r for r in csv.DictReader(f)}
    assert got["aoki"]["6.1-1"] == "✅ pass" and got["aoki"]["6.1-2 メッセージ / message"] == "predict_feature_major: まだです。"
    assert got["x"]["6.1-1"] == "" and got["x"]["得点 / score"] == "0"
    data = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))
    assert data["rows"][0]["exercises"]["6.1-2"] == {"title": "predict_feature_major", "status": "not_done",
                                                     "mark": "⏳", "message": "predict_feature_major: まだです。"}
    assert [r["score"] for r in data["rows"]] == [1, 0, 0]
