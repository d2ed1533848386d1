"""ch6-grade と nbgrader のフォルダの形: 学習者はいつも学生のフォルダ（1 冊に提出者が 1 人だけでも）。

nbgrader の形は ``<コース>/submitted/<学生>/<課題>/<ノートブック>.ipynb``（autograde の後は ``autograded/``）。
カーネルは起動しません（採点の実行は差し替えます）。
"""
import asyncio
from pathlib import Path

import nbformat
import pytest

from ch6 import Status
from ch6.grading import batch, cli, exercises
from ch6.grading.identify import learner_name, nbgrader_student
from ch6.grading.model import Config, ExerciseResult

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = exercises.from_folder(ROOT / "exercises")


def _course(tmp_path, tree="submitted"):
    """1 冊に提出者 1 人: student1 は 6.1、student2 は 6.3b だけ（課題はどちらも ps1）。"""
    files = {}
    for student, name in (("student1", "6_1_vmap"), ("student2", "6_3b_shard_map")):
        folder = tmp_path / "course" / tree / student / "ps1"
        folder.mkdir(parents=True)
        (folder / f"{name}.ipynb").write_bytes((ROOT / "exercises" / f"{name}.ipynb").read_bytes())
        (folder / "timestamp.txt").write_text("2025-01-01 00:00:00.000000 UTC")
        files[student] = folder / f"{name}.ipynb"
    (tmp_path / "course" / "nbgrader_config.py").write_text("c = get_config()\n")
    return tmp_path / "course", files


@pytest.fixture
def fake_run(monkeypatch):
    """採点の実行を差し替える: どの演習も ⏳（学習者の名前と表の組み立てだけを見る）。"""
    async def run(nb, assignment, cfg, cwd):
        return {i: ExerciseResult(i, assignment.titles[i], Status.NOT_DONE, "まだ") for i in assignment.ids}, []

    monkeypatch.setattr("ch6.grading.execute.execute_and_check", run)


@pytest.mark.parametrize("tree", ["submitted", "autograded"])
def test_one_submitter_per_notebook_is_named_after_the_student_folder(tmp_path, tree, fake_run):
    course, files = _course(tmp_path, tree)
    for student, path in files.items():
        assert learner_name(path, path.stem) == student == nbgrader_student(path)
    rows = asyncio.run(batch.grade_all(batch.collect([course / tree]), ASSIGNMENTS, Config(jobs=1)))
    assert [(r.learner, r.notebook) for r in rows] == [("student1", "6_1_vmap"), ("student2", "6_3b_shard_map")]
    assert all(r.notes == [] for r in rows), [r.notes for r in rows]


def test_nbgrader_layout_without_the_tree_name_is_known_by_timestamp(tmp_path):
    """フォルダを別の場所へ写しても（submitted/ という名前がなくても）、nbgrader の timestamp.txt で分かる。"""
    folder = tmp_path / "集めたもの" / "tanaka" / "ps1"
    folder.mkdir(parents=True)
    (folder / "timestamp.txt").write_text("2025-01-01 00:00:00.000000 UTC")
    assert learner_name(folder / "6_1_vmap.ipynb", "6_1_vmap") == "tanaka"


def test_other_layouts_keep_their_names(tmp_path):
    assert learner_name(tmp_path / "提出" / "tanaka_6_1_vmap.ipynb", "6_1_vmap") == "tanaka"
    assert learner_name(tmp_path / "提出" / "suzuki" / "6_1_vmap.ipynb", "6_1_vmap") == "suzuki"
    assert nbgrader_student(tmp_path / "提出" / "ps1" / "6_1_vmap.ipynb") is None


def test_same_student_in_submitted_and_autograded_is_told_apart():
    from ch6.grading.identify import disambiguate
    from ch6.grading.model import Row

    paths = ["c/submitted/student1/ps1/6_1_vmap.ipynb", "c/autograded/student1/ps1/6_1_vmap.ipynb"]
    rows = [Row(learner_name(Path(p), "6_1_vmap"), p, "6_1_vmap") for p in paths]
    disambiguate(rows)
    assert [r.learner for r in rows] == ["student1 (submitted)", "student1 (autograded)"]


def test_course_root_grades_submitted_only_and_says_so(tmp_path, fake_run, capsys):
    """コースのフォルダを渡すと、submitted/ だけを採点する（source/・release/ は解答や配布版なので採点しない）。"""
    course, files = _course(tmp_path)
    for extra in ("source", "release", "autograded"):
        d = course / extra / ("student1" if extra == "autograded" else "") / "ps1"
        d.mkdir(parents=True)
        (d / "6_1_vmap.ipynb").write_bytes(files["student1"].read_bytes())
    out = tmp_path / "out.json"
    assert cli.main([str(course), "--json", str(out), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "nbgrader のコース" in err and "submitted/" in err
    import json

    rows = json.loads(out.read_text(encoding="utf-8"))
    rows = rows["rows"] if isinstance(rows, dict) else rows
    assert sorted((r["learner"], r["notebook"]) for r in rows) == [("student1", "6_1_vmap"),
                                                                  ("student2", "6_3b_shard_map")]


def test_feedback_tree_is_refused_in_japanese(tmp_path, capsys):
    """nbgrader の feedback/ は HTML だけ: 採点できない理由と、代わりに渡すフォルダを言う。"""
    folder = tmp_path / "course" / "feedback" / "student1" / "ps1"
    folder.mkdir(parents=True)
    (folder / "6_1_vmap.html").write_text("<html></html>")
    assert cli.main([str(tmp_path / "course" / "feedback")]) == 2
    err = capsys.readouterr().err
    assert "HTML" in err and "autograded/" in err and "submitted/" in err


def test_autograded_notebooks_are_read_as_submissions(tmp_path, fake_run):
    """autograde の後のノートブック（nbgrader のメタデータと採点のセルつき）も、同じ演習ノートブックとして読む。"""
    course, files = _course(tmp_path, "autograded")
    nb = nbformat.read(files["student1"], as_version=4)
    for c in nb.cells:
        c.metadata["nbgrader"] = {"grade": False, "grade_id": c.get("id", "x"), "locked": True,
                                  "schema_version": 3, "solution": False, "task": False}
    nb.cells.append(nbformat.v4.new_code_cell('ch6_result = ch6.run_check("6.1-1", rbf_features)\n'
                                              "assert ch6_result.ok, ch6_result.line"))
    nbformat.write(nb, files["student1"])
    rows = asyncio.run(batch.grade_all([files["student1"]], ASSIGNMENTS, Config(jobs=1)))
    assert (rows[0].learner, rows[0].notebook, rows[0].notes) == ("student1", "6_1_vmap", [])


@pytest.mark.parametrize("path, learner", [
    ("tanaka/6_1_vmap-Copy1.ipynb", "tanaka"),                # JupyterLab の複製（フォルダが学習者）
    ("subs/tanaka_6_1_vmap-Copy2.ipynb", "tanaka"),
    ("subs/suzuki_6_1_vmap (1).ipynb", "suzuki"),             # ブラウザが 2 度目のダウンロードに付ける印
    ("dl/Taro Tanaka_123456_assignsubmission_file_/6_1_vmap.ipynb", "Taro_Tanaka"),  # Moodle（フォルダあり）
    ("dl/Taro Tanaka_123456_assignsubmission_file_6_1_vmap.ipynb", "Taro_Tanaka"),   # Moodle（フォルダなし）
    ("dl/田中 花子_77_assignsubmission_file_/6_1_vmap-Copy1.ipynb", "田中_花子"),
])
def test_learner_ids_from_jupyter_copies_and_moodle_downloads(path, learner):
    assert learner_name(Path(path), "6_1_vmap") == learner
