"""ch6-grade: クラス全員の採点（端から端まで 1 回）と、コマンドライン。

テストが自分で提出フォルダを作ります（solutions/ と exercises/ の 6_1_vmap から）:
正解、一部だけ、ノートブックでない、壊れた JSON、カーネルが落ちる、無限ループ（中断できる・できない）、
セルの削除と並べ替え、チェック呼び出しの変更と ch6 の差し替え、答えのハードコード。
採点は 1 回（--jobs 4、短い制限時間）だけ実行し、点数と理由を細かく確かめます。

提出物は演習の中身によらない作り方をします（関数名と番号は演習ノートブックから読み、正解は解答ノートブックの
セル、間違いは「文字列を返す」「例外を送出する」「終わらない」）。6.1 の演習が変わっても、このテストは変わりません。
関数を試すだけの例のセルは、配るノートブック（--reference）からも提出物からも除きます（採点には要らず、時間だけかかる）。
チェックそれぞれのメッセージは tests/checks/s6_N/test_<module>.py が確かめます。
部品（名前、判別、ファイルの読み込み、備考、カーネルでの流れ、カーネル内のコード、表）は tests/grading/test_<module>.py で
カーネルなしに確かめます。
"""
from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ch6 import grade
from ch6.grading import cli
from ch6.grading.model import ExerciseResult, Row
from tests.grade_class import CHECK_TIMEOUT, EXERCISE, IDS, SOLUTION, TIMEOUT, F, N, build_class

JOBS = 4  # 時間切れを待つあいだはカーネルが眠っているので、コア数より多く並べても遅くならない

pytestmark = pytest.mark.skipif(not (SOLUTION.exists() and EXERCISE.exists()),
                                reason="solutions/ と exercises/ の 6_1_vmap が必要")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    assert N >= 6, "このテストは 6 問以上ある演習ノートブックを前提にしています"
    folder = tmp_path_factory.mktemp("class")
    subs, reference = folder / "提出", folder / "配布"
    subs.mkdir()
    reference.mkdir()
    expected = build_class(subs, reference)
    (subs / ".ipynb_checkpoints").mkdir()
    (subs / ".ipynb_checkpoints" / "aoki_6_1_vmap-checkpoint.ipynb").write_text("{}")
    out_csv, out_json = folder / "seiseki.csv", folder / "seiseki.json"
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        # --reference: 配ったノートブック（同梱の exercises.json が exercises/ と同じかは tests/grading/test_exercises.py が見る）
        rc = cli.main([str(subs), "--csv", str(out_csv), "--json", str(out_json), "--jobs", str(JOBS),
                       "--timeout", str(TIMEOUT), "--check-timeout", str(CHECK_TIMEOUT), "--devices", "2",
                       "--reference", str(reference), "--quiet"])
    assert rc == 0
    data = json.loads(out_json.read_text(encoding="utf-8"))
    return expected, data, buf.getvalue(), out_csv


def _by_learner(data):
    return {r["learner"]: r for r in data["rows"]}


def test_every_submission_is_graded(graded):
    expected, data, _, _ = graded
    rows = _by_learner(data)
    assert sorted(rows) == sorted(expected)  # チェックポイントのフォルダは数えない
    assert all(r["notebook"] == "6_1_vmap" and r["max_score"] == N for r in rows.values())
    assert all(list(r["exercises"]) == IDS for r in rows.values())


@pytest.mark.parametrize("learner", ["aoki", "ito", "ueda", "endo", "ota", "kato", "kimura", "sasaki",
                                     "kudo", "hayashi", "mori", "noguchi",
                                     "fujita", "abe", "ikeda", "ueno", "okada", "matsui"])
def test_scores_marks_and_reasons(graded, learner):
    expected, data, _, _ = graded
    row, exp = _by_learner(data)[learner], expected[learner]
    marks = "".join(row["exercises"][i]["mark"] for i in IDS)
    # 食い違ったときは備考と各問のメッセージを出す（CI のログだけで理由が分かるように）
    why = {"notes": row["notes"], **{i: (row["exercises"][i]["status"], row["exercises"][i]["message"]) for i in IDS}}
    assert (marks, row["score"]) == (exp["marks"], exp["score"]), why
    if exp.get("notes") is not None:
        assert row["notes"] == exp["notes"]
    if "note_re" in exp:
        assert len(row["notes"]) == len(exp["note_re"]), row["notes"]
        for pattern, note in zip(exp["note_re"], row["notes"]):
            assert re.fullmatch(pattern, note), note
    for eid, words in exp.get("messages", {}).items():
        assert words in row["exercises"][eid]["message"], row["exercises"][eid]
    for eid, status in exp.get("statuses", {}).items():
        assert row["exercises"][eid]["status"] == status
    if "flagged" in exp:  # 監視の指摘: 全問 tampered、備考の 1 行目に何が見つかったか
        assert {x["status"] for x in row["exercises"].values()} == {"tampered"}, why
        assert row["notes"][0].startswith("採点のしくみへの干渉が見つかりました: "), why
        assert all(w in row["notes"][0] for w in exp["flagged"]), why


def test_table_and_csv_show_the_same(graded):
    expected, data, text, out_csv = graded
    assert f"6_1_vmap（{len(expected)} 件）" in text
    for learner, exp in expected.items():
        line = next(ln for ln in text.splitlines() if ln.startswith(f"│ {learner} "))
        assert f"{exp['score']}/{N}" in line
        # 表の ⚠ は異体字セレクタなし（列がずれない）
        assert "\ufe0f" not in line and line.count("⚠") == exp["marks"].count("⚠")
    n_pass = sum(exp["marks"].startswith("✅") for exp in expected.values())
    assert f"{IDS[0]} {F[0]}（正解 {n_pass}/{len(expected)}）" in text
    with out_csv.open(encoding="utf-8-sig", newline="") as f:
        rows = {r["学習者 / learner"]: r for r in csv.DictReader(f)}
    assert set(rows) == set(expected)
    for name, r in _by_learner(data).items():
        assert int(rows[name]["得点 / score"]) == r["score"] and int(rows[name]["満点 / max_score"]) == N
        assert [rows[name][i] for i in IDS] == [f"{r['exercises'][i]['mark']} {r['exercises'][i]['status']}"
                                                for i in IDS]
        assert [rows[name][f"{i} メッセージ / message"] for i in IDS] == [r["exercises"][i]["message"] for i in IDS]
        assert rows[name]["備考 / notes"] == " ".join(r["notes"])


def test_self_check_prints_each_message(tmp_path, monkeypatch, capsys):
    """1 冊だけなら自己チェック: 演習ごとの 1 行と合計（採点そのものは上の end-to-end で確かめた）。"""
    path = tmp_path / "6_1_vmap.ipynb"
    path.write_text("{}", encoding="utf-8")
    row = Row("x", str(path), "6_1_vmap", {
        "6.1-1": ExerciseResult("6.1-1", "batched_predict", "pass", "batched_predict: 正解です。"),
        "6.1-5": ExerciseResult("6.1-5", "ensemble_predict", "fail",
                                "ensemble_predict: 出力の形が (バッチ, モデル, 出力) ではありません。")},
              notes=["上から 3 番目のセルでエラー: ValueError: x"])

    async def fake_grade_all(paths, assignments, cfg, forced=None, progress=None):
        assert [str(p) for p in paths] == [str(path)] and progress is None
        return [row]

    monkeypatch.setattr(cli, "grade_all", fake_grade_all)
    assert grade.main([str(path), "--devices", "2", "--timeout", "60"]) == 0
    out = capsys.readouterr().out
    assert "✅ 正解 [6.1-1] batched_predict: 正解です。" in out
    assert "❌ 不正解 [6.1-5] ensemble_predict: 出力の形が (バッチ, モデル, 出力)" in out
    assert "備考: 上から 3 番目のセルでエラー: ValueError: x" in out
    assert "合計 / total: 1/2" in out


def test_command_line_help():
    out = subprocess.run([sys.executable, "-m", "ch6.grade", "--help"], capture_output=True, text=True, check=True)
    assert "--timeout" in out.stdout and "--jobs" in out.stdout and "--csv" in out.stdout
    # --help は nbformat（jsonschema 経由で数秒）を読み込まずに答える
    out = subprocess.run([sys.executable, "-c", "import sys, ch6.grade\n"
                          "print(sorted(m for m in sys.modules if m.startswith(('nbformat', 'nbclient'))))"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "ch6-grade"
    assert script.exists(), "pip install -e . で ch6-grade が入ります（pyproject.toml の [project.scripts]）"
    out = subprocess.run([str(script), "--help"], capture_output=True, text=True, check=True)
    assert "usage: ch6-grade" in out.stdout


def test_a_broken_check_module_does_not_stop_the_others(request, monkeypatch, tmp_path, capsys):
    import ch6
    from ch6 import checks

    # 本当に読み込めないチェックモジュールを ch6.checks に足す（構文エラー）
    (tmp_path / "s9_9_broken.py").write_text("def oops(:\n    pass\n", encoding="utf-8")
    monkeypatch.setattr(checks, "__path__", [*checks.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "ch6.checks.s9_9_broken", raising=False)
    request.addfinalizer(lambda: (monkeypatch.undo(), ch6.registry(reload=True)))  # __path__ を戻してから読み込み直す
    ch6.registry(reload=True)
    broken = cli.load_checks()
    assert list(broken) == ["s9_9_broken"] and broken["s9_9_broken"].startswith("SyntaxError"), broken
    assert {"6.1-1", "6.1-6"} <= set(cli.registry_titles())  # ほかの節のチェックは使える
    # コマンドは警告を出し、残りの節は採点に使う
    (tmp_path / "x.ipynb").write_text("{}", encoding="utf-8")
    assert grade.main([str(tmp_path / "x.ipynb"), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "ch6/checks/s9_9_broken.py を読み込めません（SyntaxError" in err


def test_output_folders_are_checked_before_grading(tmp_path, capsys):
    for option in ("--csv", "--json"):
        out = tmp_path / "no_such_folder" / "seiseki.x"
        assert grade.main([str(SOLUTION), option, str(out)]) == 2  # 採点を始める前に（カーネルなし）
        err = capsys.readouterr().err
        assert f"{option} {out}: 書き出し先のフォルダがありません / output folder does not exist" in err


def test_unknown_notebook_and_reference_are_refused_before_grading(tmp_path, capsys):
    assert grade.main([str(SOLUTION), "--notebook", "9_9_nothing"]) == 2
    assert "--notebook 9_9_nothing: 知らない演習ノートブックです（あるのは 6_1_vmap" in capsys.readouterr().err
    assert grade.main([str(SOLUTION), "--reference", str(tmp_path / "none")]) == 2
    assert "フォルダがありません / not a folder" in capsys.readouterr().err
