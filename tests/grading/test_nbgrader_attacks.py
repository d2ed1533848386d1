"""issue 47 の攻撃を学生として、本物の nbgrader（autograde → export → 両方の validate）で。

コースは 6_1_vmap だけ（README のコマンドのとおり。部品は tests/grading/nbcourse.py）。
採点は一時フォルダに写した ``ch6``（PYTHONPATH）で動かします: 隔離なしの採点で攻撃が本当に書き換えても、講座の
チェックアウトには届きません。学生:

- a_delete: ほかの学生（z_victim）の submitted/ と autograded/ を消す
- b_gradebook: 別のコースの成績簿（gradebook.db、CH6_PROTECT で守る）を書き換える
- c_grader: インストールした採点のしくみ（ch6/grading/inkernel.py）に「いつも正解」を書き足す
- f_*: 採点を偽る攻撃（tests/grading/attacks.py の FORGERIES: 読み込みのキャッシュの探し方、np.allclose・np.abs・
  jnp.allclose・assert_allclose の既定値の差し替え）
- y_blank（白紙）、z_victim（全問正解）

攻撃した学生はどの採点のセルも 0 点で、何が見つかったかが採点のセルに出ます（隔離で書けなかった攻撃も
「書き換えようとしました」と名指し）。白紙は 0 点、z_victim は満点、ほかのコースの成績簿・z_victim のファイル・
採点のしくみは元のまま。採点を偽る攻撃は、講座の validate と nbgrader validate の両方で失敗します。
"""
import csv
import json
import os
import shutil
import sqlite3
from pathlib import Path

import nbformat
import pytest

from tests.grading.attacks import FORGERIES

if os.environ.get("CH6_NBGRADER") != "1":
    pytest.importorskip("nbgrader", reason="nbgrader は make test-nbgrader の環境（.venv-nbgrader）にだけ入れます")

from ch6.grading import isolate
from ch6.grading import nbgrader as edition
from ch6.grading.exercises import packaged
from tests.grading.nbcourse import env_for, readme_commands, run, snapshot

ROOT = Path(__file__).resolve().parents[2]
NAME = "6_1_vmap"
IDS = packaged()[NAME].ids
TRIED = "採点の外のファイルを書き換えようとしました"
# 採点のしくみに書き足す: これより後に採点される提出物は、白紙でも全問正解になる（issue 47 で実際にあった攻撃）
PAYLOAD = '''

_ch6_grader = grader


def grader(emit, user_ns):
    _ch6_grader(emit, user_ns)
    return lambda exercise_id: emit(dict(id=exercise_id, title="?", status="pass", message="ok"))
'''


def _notebook(release, code: str | None):
    nb = nbformat.from_dict(json.loads(json.dumps(release)))
    if code:
        setup = next(k for k, c in enumerate(nb.cells) if c.cell_type == "code")
        nb.cells.insert(setup + 1, nbformat.v4.new_code_cell(code))
    return nb


def _solved(release, source):
    nb = _notebook(release, None)
    by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in source.cells}
    for c in nb.cells:  # 解答のセルを解答版のものに（採点のセルはそのまま）
        gid = c.metadata.get("nbgrader", {}).get("grade_id")
        if c.metadata.get("nbgrader", {}).get("solution") and gid in by_id:
            c.source = "\n".join(ln for ln in by_id[gid].source.split("\n") if "### BEGIN SOLUTION" not in ln
                                 and "### END SOLUTION" not in ln)
    return nb


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nbgrader-attacks")
    pkg = snapshot(tmp)
    other = tmp / "別のコース" / "gradebook.db"
    other.parent.mkdir()
    with sqlite3.connect(other) as db:
        db.execute("create table grade (student text, score real)")
        db.execute("insert into grade values ('watanabe', 5)")
    env = dict(env_for(tmp, package=pkg), PYTHONDONTWRITEBYTECODE="1", CH6_PROTECT=str(other.parent))
    commands = readme_commands()
    first = commands[0].split(" solutions/")[0] + f" solutions/{NAME}.ipynb"
    run(first, ROOT, env)
    course = tmp / "ch6-course"
    run(commands[2], course, env)
    release = nbformat.read(course / "release" / "ps1" / f"{NAME}.ipynb", as_version=4)
    source = nbformat.read(course / "source" / "ps1" / f"{NAME}.ipynb", as_version=4)
    inkernel = pkg / "ch6" / "grading" / "inkernel.py"
    victim = course / "submitted" / "z_victim"
    attacks = {
        "a_delete": f"import shutil\nfor d in ({str(victim)!r}, {str(course / 'autograded' / 'z_victim')!r}):\n"
                    "    shutil.rmtree(d, ignore_errors=True)",
        "b_gradebook": f"import sqlite3\nwith sqlite3.connect({str(other)!r}) as db:\n"
                       "    db.execute('update grade set score = 0')",
        "c_grader": f"open({str(inkernel)!r}, 'a').write({PAYLOAD!r})",
        **{f"f_{name}": code for name, (code, _) in FORGERIES.items()},
    }
    subs = {name: _notebook(release, code) for name, code in attacks.items()}
    subs["y_blank"], subs["z_victim"] = _notebook(release, None), _solved(release, source)
    for student, nb in subs.items():
        sub = course / "submitted" / student / "ps1"
        sub.mkdir(parents=True)
        (sub / "timestamp.txt").write_text("2025-01-01 00:00:00.000000 UTC")
        nbformat.write(nb, sub / f"{NAME}.ipynb")
    before = {p: p.read_bytes() for p in [*pkg.rglob("*.py"), *victim.rglob("*.ipynb"), other]}
    autograde = run(commands[3], course, env)
    run(commands[4], course, env)
    return course, env, autograde.stdout + autograde.stderr, list(attacks), before


def _errors(course: Path, student: str) -> dict[str, str]:
    nb = nbformat.read(course / "autograded" / student / "ps1" / f"{NAME}.ipynb", as_version=4)
    return {edition.test_exercise(c): " ".join(o.get("evalue", "") for o in c.outputs if o.output_type == "error")
            for c in nb.cells if edition.test_exercise(c)}


def test_attackers_score_zero_and_no_one_else_is_harmed(course):
    course, _, log, attackers, before = course
    with open(course / "grades.csv", encoding="utf-8") as f:
        rows = {r["student_id"]: float(r["score"]) for r in csv.DictReader(f)}
    assert rows == {**{a: 0.0 for a in attackers}, "y_blank": 0.0, "z_victim": float(len(IDS))}, rows
    for path, data in before.items():  # ほかの学生のファイル、別のコースの成績簿、採点のしくみは元のまま
        assert path.exists() and path.read_bytes() == data, path
    assert (course / "autograded" / "z_victim" / "ps1" / f"{NAME}.ipynb").exists()
    assert isolate.describe(isolate.mode()) in log


@pytest.mark.parametrize("student, found", [
    ("a_delete", f"{TRIED}（"), ("a_delete", "z_victim"), ("b_gradebook", "gradebook.db"),
    ("c_grader", f"{TRIED}（ch6/grading/inkernel.py"),
    *[(f"f_{name}", found) for name, (_, found) in FORGERIES.items()]])
def test_every_grade_cell_of_an_attacker_names_what_was_found(course, student, found):
    course, _, _, _, _ = course
    errors = _errors(course, student)
    assert list(errors) == IDS and all("採点のしくみへの干渉" in e and found in e for e in errors.values()), errors
    if student.startswith("f_"):  # 採点を偽る攻撃は、書き換えのせいにされない
        assert TRIED not in " ".join(errors.values()), errors


def test_both_validators_fail_every_forgery(course, tmp_path):
    """講座の validate（nbgrader なし）と nbgrader validate（配布版の設定）: 採点を偽る提出物はどれも失敗し、見つかったものを書く。"""
    course, env, _, _, _ = course
    folder = tmp_path / "ps1"
    shutil.copytree(course / "release" / "ps1", folder)
    paths = []
    for name in FORGERIES:
        (folder / name).mkdir()
        shutil.copy(course / "submitted" / f"f_{name}" / "ps1" / f"{NAME}.ipynb", folder / name / f"{NAME}.ipynb")
        paths.append(f"{name}/{NAME}.ipynb")
    ours = run("python -m ch6.grading.nbgrader validate " + " ".join(paths), folder, env, check=False)
    assert ours.returncode == 1, ours.stdout[-3000:] + ours.stderr[-3000:]
    theirs = run("nbgrader validate " + " ".join(paths), folder, env, check=False)
    out = theirs.stdout + theirs.stderr
    assert theirs.returncode != 0 and "VALIDATION FAILED" in out, out[-3000:]
    for name, (_, found) in FORGERIES.items():
        assert found in ours.stdout and found in out, (name, ours.stdout[-3000:], out[-3000:])
