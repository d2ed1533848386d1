"""1 クラスを本物の nbgrader で採点する（issue 47）: 終わらない関数の学生、カーネルを落とす学生、セットアップのセルの
メタデータを写した学生がいても、autograde は止まらず数分で終わり、grades.csv に全員が点数つきで並び、印のある学生は
列 ch6_flags に理由が出る（成績簿では needs_manual_grade と解答のセルのコメント）。

クラスの人数は CH6_CLASS_SIZE（既定 30、issue の人数）。1 人あたり 6.1 の 5 問のチェックで、測った値: 混んだ
2 コアのマシン（load average 約 8）で 4 人 244 秒、6 人 253 秒（終わらない関数の 60 秒を除くと 1 人 32〜46 秒）。
30 人では、このファイル全体が 8 分 37 秒でした（2026-12-07、新しいクローン、ロードアベレージ 4 前後の 2 コア）。
CI の nbgrader の脚（make test-nbgrader）は CLASS_SIZE=6（Makefile）で、数分で終わります。
終わらない関数は 60 秒（講座のチェック 1 つの制限時間）で止まり、落ちたカーネルは新しいカーネルで続けるので、
その学生も落ちる前に採点した 4 問の点が残ります（ch6-grade と同じ 4/5）。
"""
import csv
import json
import os
import time
from pathlib import Path

import nbformat
import pytest

from ch6.grading import nbgrader as edition
from ch6.grading.exercises import packaged
from ch6.grading.gradecells import CHECK_TIMEOUT
from tests.grading.nbcourse import ROOT, answer, answer_cell, env_for, run, snapshot, solution_body

if os.environ.get("CH6_NBGRADER") != "1":
    pytest.importorskip("nbgrader", reason="nbgrader は make test-nbgrader の環境（.venv-nbgrader）にだけ入れます")

NAME = "6_1_vmap"
IDS = packaged()[NAME].ids
SIZE = int(os.environ.get("CH6_CLASS_SIZE", "30"))
LOOP, DEAD = IDS[1], IDS[2]  # 終わらない関数・カーネルを落とす関数にする演習
SPECIAL = {"loop": (LOOP, "while True: pass"), "dying": (DEAD, "import os; os._exit(1)")}


def _students(course: Path) -> dict[str, str]:
    source = nbformat.read(course / "source" / "ps1" / f"{NAME}.ipynb", as_version=4)
    release = nbformat.read(course / "release" / "ps1" / f"{NAME}.ipynb", as_version=4)
    honest = nbformat.from_dict(json.loads(json.dumps(release)))
    for eid in IDS:
        answer(answer_cell(honest, eid), solution_body(answer_cell(source, eid)))
    subs = {f"s{k:02d}": nbformat.writes(honest) for k in range(1, SIZE - 2)}
    for student, (eid, body) in SPECIAL.items():
        nb = nbformat.from_dict(json.loads(json.dumps(release)))
        for e in IDS:
            answer(answer_cell(nb, e), body if e == eid else solution_body(answer_cell(source, e)))
        subs[student] = nbformat.writes(nb)
    meta = nbformat.from_dict(json.loads(json.dumps(honest)))  # セットアップのセルの locked のメタデータを写したセル
    setup = next(c for c in meta.cells if c.cell_type == "code")
    copied = nbformat.v4.new_code_cell("x = 1  # 学習者のセル")
    copied.metadata["nbgrader"] = json.loads(json.dumps(setup.metadata["nbgrader"]))
    meta.cells.insert(meta.cells.index(setup) + 2, copied)
    subs["meta"] = nbformat.writes(meta)
    assert len(subs) == SIZE
    return subs


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nbgrader-class")
    course = tmp / "course"
    run(f"python -m ch6.grading.nbgrader {course} --assignment ps1 solutions/{NAME}.ipynb", ROOT, env_for(tmp))
    env = env_for(tmp, package=snapshot(tmp))
    run("nbgrader generate_assignment ps1", course, env)
    for student, text in _students(course).items():
        sub = course / "submitted" / student / "ps1"
        sub.mkdir(parents=True)
        (sub / "timestamp.txt").write_text("2025-01-01 00:00:00.000000 UTC")
        (sub / f"{NAME}.ipynb").write_text(text, encoding="utf-8")
    start = time.monotonic()
    autograde = run("nbgrader autograde ps1", course, env)
    seconds = time.monotonic() - start
    print(f"nbgrader autograde: {SIZE} 人 {seconds:.0f} 秒")
    run("nbgrader export", course, env)
    with open(course / "grades.csv", encoding="utf-8") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    return course, rows, autograde.stdout + autograde.stderr, seconds


def test_every_student_is_in_grades_csv_with_a_score_or_a_flag(graded):
    _, rows, log, _ = graded
    assert len(rows) == SIZE, sorted(rows)
    full = float(len(IDS))
    honest = {s: r for s, r in rows.items() if s.startswith("s")}
    assert {(float(r["score"]), r["ch6_flags"]) for r in honest.values()} == {(full, "")}, honest
    assert float(rows["loop"]["score"]) == full - 1 and float(rows["dying"]["score"]) == full - 1
    assert float(rows["meta"]["score"]) == full
    assert f"[{LOOP}]" in rows["loop"]["ch6_flags"] and f"{CHECK_TIMEOUT} 秒以内に終わりませんでした" in rows["loop"]["ch6_flags"]
    assert f"[{DEAD}]" in rows["dying"]["ch6_flags"] and "カーネルが停止しました" in rows["dying"]["ch6_flags"]
    assert "nbgrader のメタデータが配布版と違っていました" in rows["meta"]["ch6_flags"], rows["meta"]
    for student in ("loop", "dying", "meta"):
        assert f"ch6: {student}/ps1/{NAME}.ipynb:" in log, log[-3000:]
    assert "nbgrader update" not in log and "There was an error processing" not in log, log[-3000:]


def test_the_class_takes_minutes_and_a_loop_costs_one_check_limit(graded):
    """1 人 60 秒を上限に（混んだ 2 コアで測って 1 人 32〜46 秒）、終わらない関数の分は 1 回のチェックの制限時間だけ。"""
    *_, seconds = graded
    assert seconds < 60 * SIZE + 2 * CHECK_TIMEOUT, seconds


def test_flags_are_in_the_gradebook(graded):
    from nbgrader.api import Gradebook

    course, *_ = graded
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        def grades(student):
            nb = gb.find_submission_notebook(NAME, "ps1", student)
            return {g.name: (g.score, g.needs_manual_grade) for g in nb.grades}, \
                {c.name: c.auto_comment or "" for c in nb.comments}

        scores, comments = grades("loop")
        assert scores[edition.grade_id(LOOP, "test_")] == (0.0, True)
        assert scores[edition.grade_id(IDS[0], "test_")] == (1.0, False)
        assert comments[edition.grade_id(LOOP)].startswith("⚠️ ch6: ❌ 時間切れ"), comments
        scores, _ = grades("s01")
        assert {v for v in scores.values()} == {(1.0, False)}


def test_the_grade_cells_say_what_happened(graded):
    course, *_ = graded
    nb = nbformat.read(course / "autograded" / "dying" / "ps1" / f"{NAME}.ipynb", as_version=4)
    said = {edition.test_exercise(c): "".join(o.get("evalue", "") or o.get("text", "") for o in c.outputs)
            for c in nb.cells if edition.test_exercise(c)}
    assert said[DEAD].startswith(f"❌ 停止 [{DEAD}]"), said
    assert all(said[e].startswith(f"✅ 正解 [{e}]") for e in IDS if e != DEAD), said
