"""nbgrader 版を本物の nbgrader（requirements-nbgrader.txt の版）で通す: 先生がするのと同じ順に、README のコマンドで。

python -m ch6.grading.nbgrader → nbgrader generate_assignment → 学生の提出 → nbgrader autograde → nbgrader export
→ ch6-grade。学生（提出物は配布版を書き換えて作る。コースはチェックアウトの外 ~/ch6-course）:

- student1: 各冊 1 問正解・1 問不正解・残りは未解答（点数、講座の 1 行、validate の失敗と成功）
- tamper:   何も解かず、``ch6.run_check`` を「いつも正解」に差し替える 1 行（0 点で、差し替えを名指し）。
            正解の答えも書くが、差し替えた後の演習は 0 点
- exercises: 配布版でなく exercises/ の演習版から解いた提出物（採点のセルがない）: student1 と同じ点数
- deleted:  student1 と同じ答えで、不正解の演習の採点のセルを消した提出物: 採点では戻して student1 と同じ点数、
            validate（講座の validate も、コースの外での nbgrader validate も）は終了コード 1 でヒントを最後まで表示
- broken:   壊れたファイル: autograde は止まらず 0 点で理由を採点のセルに、ch6-grade の表にも ⚠️ not_graded で名前が出る
- issue 40 の攻撃（autograde は監視つきで採点し直し、全問 0 点で何が見つかったかを採点のセルに。validate も失敗）:
  alias（``ch6.grading.nbgrader`` の ``grade`` を別名で差し替え）、strings（``sys.modules`` を文字列の組み立てで）、
  thread（採点の最中も生きているスレッド）、reference（``ch6.checks`` から参照の答え）
- meta:     student1 と同じ答えで、セルのメタデータを壊した提出物: その人の autograde もクラスも止まらない

演習の番号・数・点数は ch6/grading/exercises.json から取ります（手で書いた数はありません）。
nbgrader は講座の環境に入れないので、このテストは ``make test-nbgrader``（.venv-nbgrader）で動きます
（CH6_NBGRADER=1 のときは、nbgrader がなければ失敗します。ほかの環境では飛ばします）。速さのため 2 デバイスで動かします。
"""
import csv
import json
import os
import shutil
from pathlib import Path

import nbformat
import pytest

from ch6.grading import nbgrader as edition
from ch6.grading.exercises import packaged
from tests.grading.attacks import THREAD_SWAP
from tests.grading.nbcourse import answer, answer_cell, env_for, readme_commands, run, snapshot, solution_body

if os.environ.get("CH6_NBGRADER") != "1":
    pytest.importorskip("nbgrader", reason="nbgrader は make test-nbgrader の環境（.venv-nbgrader）にだけ入れます")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ("6_1_vmap", "6_3b_shard_map")
COURSE = {name: packaged()[name] for name in NOTEBOOKS}  # exercises.json
IDS = {name: COURSE[name].ids for name in NOTEBOOKS}
# 学生の答え: 正解 1 問（各冊の最初の演習、解答例の本体）と、よくある間違い 1 問
RIGHT = {name: IDS[name][0] for name in NOTEBOOKS}
WRONG = {"6_1_vmap": ("6.1-2", 'return jax.vmap(fn, in_axes=(1, 0))(seqs, lengths)  # out_axes を忘れた'),
         "6_3b_shard_map": ("6.3b-2", 'return lax.all_gather(block, "x", axis=1, tiled=True)  # ppermute を使わない')}
TAMPER = "from types import SimpleNamespace\nch6.run_check = lambda *a, **k: SimpleNamespace(ok=True, line='')"
ATTACKS = {
    "alias": "import ch6.grading.nbgrader as g\ng.grade = lambda *a, **k: __import__('types').SimpleNamespace("
             "ok=True, line='')",
    "strings": "m = getattr(__import__('sy' + 's'), 'mod' + 'ules')\n__import__('ch6._core')\n"
               "setattr(m['ch6.' + '_core'], 'run_' + 'check', lambda i, f: m['ch6._core'].Result(i, 'pass', 'ok'))",
    "thread": THREAD_SWAP,
    "reference": "from ch6.checks.s6_1.ensemble_sgd_step import _sgd_reference",
}
DEVICES = "2"
MAX = {name: float(len(IDS[name])) for name in NOTEBOOKS}  # 既定 1 問 1 点


def test_the_wrong_answers_are_exercises_of_the_course():
    assert all(WRONG[n][0] in IDS[n] and WRONG[n][0] != RIGHT[n] for n in NOTEBOOKS)


def _solve(nb, source, name: str) -> None:
    """student1 の答え: 正解 1 問と不正解 1 問。"""
    answer(answer_cell(nb, RIGHT[name]), solution_body(answer_cell(source, RIGHT[name])))
    eid, wrong = WRONG[name]
    answer(answer_cell(nb, eid), wrong)


def _tests(nb) -> list:
    return [c for c in nb.cells if edition.test_exercise(c)]


def _submissions(course: Path) -> dict[str, dict[str, str]]:
    """学生 -> {ノートブック名: ファイルの中身}。"""
    subs: dict[str, dict[str, str]] = {}
    for name in NOTEBOOKS:
        source = nbformat.read(course / "source" / "ps1" / f"{name}.ipynb", as_version=4)
        release = nbformat.read(course / "release" / "ps1" / f"{name}.ipynb", as_version=4)
        nb = nbformat.from_dict(json.loads(json.dumps(release)))
        _solve(nb, source, name)
        subs.setdefault("student1", {})[name] = nbformat.writes(nb)
        if name != "6_1_vmap":
            continue
        tamper = nbformat.from_dict(json.loads(json.dumps(release)))
        answer(answer_cell(tamper, RIGHT[name]), solution_body(answer_cell(source, RIGHT[name])))
        setup = next(k for k, c in enumerate(tamper.cells) if c.cell_type == "code")
        tamper.cells.insert(setup + 1, nbformat.v4.new_code_cell(TAMPER))
        subs["tamper"] = {name: nbformat.writes(tamper)}
        ex = nbformat.read(ROOT / "exercises" / f"{name}.ipynb", as_version=4)
        _solve(ex, source, name)
        assert not _tests(ex)
        subs["exercises"] = {name: nbformat.writes(ex)}
        deleted = nbformat.from_dict(json.loads(json.dumps(nb)))
        gone = edition.grade_id(WRONG[name][0], "test_")
        deleted.cells = [c for c in deleted.cells if c.metadata.get("nbgrader", {}).get("grade_id") != gone]
        subs["deleted"] = {name: nbformat.writes(deleted)}
        subs["broken"] = {name: nbformat.writes(nb)[:5000]}  # 保存の途中で切れたファイル
        for student, code in ATTACKS.items():
            attack = nbformat.from_dict(json.loads(json.dumps(release)))
            attack.cells.insert(setup + 1, nbformat.v4.new_code_cell(code))
            if student == "reference":  # 参照の答えを返す（答えは正しい）
                answer(answer_cell(attack, "6.1-5"), "return _sgd_reference(loss_fn, stacked, xs, ys, lrs)")
            subs[student] = {name: nbformat.writes(attack)}
        meta = json.loads(nbformat.writes(nb))
        code = [c for c in meta["cells"] if c["cell_type"] == "code"]
        code[1]["metadata"]["tags"] = 7
        code[2]["metadata"]["ch6"] = "broken"
        meta["metadata"]["ch6"] = ["broken"]
        subs["meta"] = {name: json.dumps(meta, ensure_ascii=False)}
    return subs


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """README のコマンドを順に実行する。generate_assignment の後に、学生の提出物を submitted/ に置く。"""
    tmp = tmp_path_factory.mktemp("nbgrader")
    env = env_for(tmp)
    commands = readme_commands()
    assert [c.split()[:3] for c in commands[:5]] == [
        ["python", "-m", "ch6.grading.nbgrader"], ["cd", "~/ch6-course"], ["nbgrader", "generate_assignment", "ps1"],
        ["nbgrader", "autograde", "ps1"], ["nbgrader", "export"]], commands
    assert commands[5:] == ["ch6-grade . --csv ch6-grades.csv"], commands
    run(commands[0], ROOT, env)  # チェックアウトで実行し、コースはその外（~/ch6-course）に
    env = env_for(tmp, package=snapshot(tmp))  # 採点はこの時点の ch6 の写しで（nbcourse.snapshot）
    course = tmp / "ch6-course"
    run(commands[2], course, env)
    for student, files in _submissions(course).items():
        sub = course / "submitted" / student / "ps1"
        sub.mkdir(parents=True)
        (sub / "timestamp.txt").write_text("2025-01-01 00:00:00.000000 UTC")
        for name, text in files.items():
            (sub / f"{name}.ipynb").write_text(text, encoding="utf-8")
    autograde = run(commands[3], course, env)
    run(commands[4], course, env)
    return course, env, autograde.stdout + autograde.stderr


def _grades(course: Path) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        out = {}
        for student in ("student1", "tamper", "exercises", "deleted", "broken", *ATTACKS, "meta"):
            sub = gb.find_submission("ps1", student)
            out[student] = {n.name: {g.name: g.score for g in n.grades} for n in sub.notebooks}
        return out


def _autograded(course: Path, student: str, name: str = "6_1_vmap"):
    nb = nbformat.read(course / "autograded" / student / "ps1" / f"{name}.ipynb", as_version=4)
    return {edition.test_exercise(c): [o.get("evalue", "") for o in c.outputs if o.output_type == "error"]
            for c in _tests(nb)}


def test_release_is_the_exercise_notebook_plus_locked_test_cells(course):
    """配布版 = exercises/ の演習版 + 採点のセル: 解答も解説も YOUR ANSWER HERE もなく、バッジは exercises/ へ。"""
    course, _, _ = course
    for name in NOTEBOOKS:
        text = (course / "release" / "ps1" / f"{name}.ipynb").read_text(encoding="utf-8")
        for leak in ("YOUR ANSWER HERE", "BEGIN SOLUTION", "HIDDEN TESTS", "解答例付き", "blob/main/solutions/"):
            assert leak not in text, (name, leak)
        assert f"blob/main/exercises/{name}.ipynb" in text
        rel = nbformat.reads(text, as_version=4)
        ex = nbformat.read(ROOT / "exercises" / f"{name}.ipynb", as_version=4)
        tests = _tests(rel)
        assert [c.source.strip() for c in rel.cells if c not in tests] == [c.source.strip() for c in ex.cells]
        assert [edition.test_exercise(c) for c in tests] == IDS[name]
        assert all(c.metadata.nbgrader.locked and c.metadata.nbgrader.points == 1 for c in tests)
    # 配布版と一緒に、講座の制限時間を使う nbgrader の設定が配られる
    assert "configure(c)" in (course / "release" / "ps1" / "nbgrader_config.py").read_text(encoding="utf-8")


def test_export_has_the_points(course):
    """grades.csv: student1・exercises・deleted は 2 点（各冊 1 問正解）、tamper は 0 点、broken は 6.3b を出さず 0 点。"""
    course, _, _ = course
    with open(course / "grades.csv", encoding="utf-8") as f:
        rows = {r["student_id"]: (float(r["score"]), float(r["max_score"])) for r in csv.DictReader(f)}
    full = sum(MAX.values())
    assert rows == {"student1": (2.0, full), "exercises": (1.0, full), "deleted": (1.0, full),
                    "tamper": (0.0, full), "broken": (0.0, full), "meta": (1.0, full),
                    **{s: (0.0, full) for s in ATTACKS}}, rows


def test_gradebook_has_points_per_exercise(course):
    course, _, _ = course
    grades = _grades(course)
    for name in NOTEBOOKS:
        want = {edition.grade_id(e, "test_"): float(e == RIGHT[name]) for e in IDS[name]}
        assert grades["student1"][name] == want, name
    want = {edition.grade_id(e, "test_"): float(e == RIGHT["6_1_vmap"]) for e in IDS["6_1_vmap"]}
    assert grades["exercises"]["6_1_vmap"] == want  # exercises/ から: 採点のセルを戻して同じ点数
    assert grades["deleted"]["6_1_vmap"] == want    # 消した採点のセルは戻して採点（不正解は 0 点のまま）
    assert set(grades["tamper"]["6_1_vmap"].values()) == {0.0}  # 正解の演習も、差し替えた後は 0 点
    assert set(grades["broken"]["6_1_vmap"].values()) == {0.0}


def test_failing_test_cells_show_the_course_line(course):
    """不正解は ❌ とヒント、未解答は ⏳: AssertionError のメッセージが講座の 1 行（改行なし）。"""
    course, _, _ = course
    errors = _autograded(course, "student1")
    assert [e for e, v in errors.items() if v] == [e for e in IDS["6_1_vmap"] if e != RIGHT["6_1_vmap"]], errors
    wrong = WRONG["6_1_vmap"][0]
    assert errors[wrong][0].startswith(f"❌ 不正解 [{wrong}] ") and "\n" not in errors[wrong][0]
    assert all(v[0].startswith(f"⏳ 未解答 [{e}] ") for e, v in errors.items() if v and e != wrong)


def test_a_replaced_run_check_is_flagged_and_scores_zero(course):
    """ch6.run_check を差し替えた提出物: 採点のセルはインストールされたチェックで採点し、差し替えを名指しして 0 点。"""
    course, _, log = course
    errors = _autograded(course, "tamper")
    assert all(v for v in errors.values()), errors
    assert all(any("ch6.run_check" in x and "0 点" in x for x in v) for v in errors.values()), errors
    assert "tamper/ps1: 6_1_vmap: セル" in log and "採点のしくみに触れています" in log, log[-3000:]


@pytest.mark.parametrize("student, found", [
    ("alias", "ch6.grading.nbgrader.grade"), ("strings", "ch6._core.run_check"), ("thread", "swap"),
    ("reference", "ch6.checks.s6_1.ensemble_sgd_step")])
def test_issue_40_attacks_score_zero_with_what_was_found(course, student, found, tmp_path):
    """autograde は監視つきで採点し直す: すべての採点のセルが 0 点で、何が見つかったかを書く。validate も失敗。"""
    course, env, log = course
    errors = _autograded(course, student)
    assert all(any("採点のしくみへの干渉" in x and found in x for x in v) for v in errors.values()), errors
    assert f"ch6: {student}/ps1: 6_1_vmap: 採点のしくみへの干渉" in log, log[-3000:]
    folder = tmp_path / "ps1"
    shutil.copytree(course / "release" / "ps1", folder)
    shutil.copy(course / "submitted" / student / "ps1" / "6_1_vmap.ipynb", folder / "6_1_vmap.ipynb")
    theirs = run("nbgrader validate 6_1_vmap.ipynb", folder, env, check=False)
    assert theirs.returncode != 0, (theirs.stdout + theirs.stderr)[-3000:]


def test_broken_metadata_is_graded_and_stops_nobody(course):
    """セルとノートブックのメタデータを壊した提出物: その人も（student1 の 6.1 と同じ点）クラスも止まらない。"""
    course, _, _ = course
    grades = _grades(course)
    assert grades["meta"]["6_1_vmap"] == grades["student1"]["6_1_vmap"]


def test_a_submission_from_exercises_is_recognised(course):
    course, _, log = course
    assert "ch6: exercises/ps1/6_1_vmap.ipynb: nbgrader の採点のセルがない提出物です" in log, log[-3000:]
    assert "ch6: deleted/ps1/6_1_vmap.ipynb: 採点のセルが消されています" in log, log[-3000:]
    errors = _autograded(course, "exercises")
    assert list(errors) == IDS["6_1_vmap"] and not errors[RIGHT["6_1_vmap"]]


def test_a_corrupted_file_is_named_in_both_tables(course):
    """壊れたファイル: autograde は止まらず（終了コード 0）、採点のセルとログに理由、ch6-grade の表にも名前と理由。"""
    course, env, log = course
    assert "ch6: submitted/broken/ps1/6_1_vmap.ipynb: ファイルが壊れていて読めません" in log, log[-3000:]
    errors = _autograded(course, "broken")
    assert all(v and "submitted/broken/ps1/6_1_vmap.ipynb" in v[0] and "壊れて" in v[0] for v in errors.values())
    line = readme_commands()[-1]
    run(line, course, env, "--devices", DEVICES, "--json", "ch6-grades.json", "--quiet", check=False)
    rows = json.loads((course / "ch6-grades.json").read_text(encoding="utf-8"))["rows"]
    broken = [r for r in rows if r["learner"] == "broken"]
    assert len(broken) == 1 and broken[0]["file"].endswith("broken/ps1/6_1_vmap.ipynb"), broken
    assert {x["status"] for x in broken[0]["exercises"].values()} == {"not_graded"}
    assert "壊れて" in json.dumps(broken[0], ensure_ascii=False)
    # ch6-grade の表（README の行、コースのフォルダ = submitted/）: 点数は nbgrader と同じ
    got = {(r["learner"], r["notebook"]): (r["score"], r["max_score"]) for r in rows}
    assert got[("student1", "6_1_vmap")] == (1, len(IDS["6_1_vmap"]))
    assert got[("student1", "6_3b_shard_map")] == (1, len(IDS["6_3b_shard_map"]))
    assert got[("exercises", "6_1_vmap")] == got[("deleted", "6_1_vmap")] == (1, len(IDS["6_1_vmap"]))
    assert got[("tamper", "6_1_vmap")][0] == 0  # ch6-grade の監視も差し替えを見つけて 0 点、備考に書く
    tamper = next(r for r in rows if r["learner"] == "tamper")
    assert tamper["notes"][0].startswith("採点のしくみへの干渉が見つかりました"), tamper
    assert all(got[(s, "6_1_vmap")][0] == 0 for s in ATTACKS) and got[("meta", "6_1_vmap")][0] == 1, got


def test_validate_fails_on_a_deleted_grade_cell_with_the_whole_hint(course, tmp_path):
    """講座の validate（nbgrader なしでも動く）: 消された採点のセルと不正解で終了コード 1、ヒントを最後まで表示。
    コースの外（配布版のフォルダを写したところ）の nbgrader validate も、講座の制限時間で動いて終了コード 1。"""
    course, env, _ = course
    folder = tmp_path / "ps1"
    shutil.copytree(course / "release" / "ps1", folder)
    shutil.copy(course / "submitted" / "deleted" / "ps1" / "6_1_vmap.ipynb", folder / "6_1_vmap.ipynb")
    nb = nbformat.read(folder / "6_1_vmap.ipynb", as_version=4)  # nbgrader の既定の 30 秒を超えるセル
    nb.cells.insert(2, nbformat.v4.new_code_cell("import time\ntime.sleep(32)"))
    nbformat.write(nb, folder / "6_1_vmap.ipynb")
    ours = run("python -m ch6.grading.nbgrader validate 6_1_vmap.ipynb", folder, env, check=False)
    wrong = WRONG["6_1_vmap"][0]
    full = _autograded(course, "student1")[wrong][0]
    assert ours.returncode == 1, ours.stdout[-3000:] + ours.stderr[-3000:]
    assert full in ours.stdout.splitlines() and "消されたか書き換えられています" in ours.stdout, ours.stdout
    theirs = run("nbgrader validate 6_1_vmap.ipynb", folder, env, check=False)
    out = theirs.stdout + theirs.stderr
    assert theirs.returncode != 0 and "VALIDATION FAILED" in out, out[-3000:]
    assert full in out and "Timeout" not in out and "CellTimeoutError" not in out, out[-3000:]


def test_validate_passes_when_everything_is_right(course, tmp_path):
    course, env, _ = course
    name = "6_3b_shard_map"
    source = nbformat.read(course / "source" / "ps1" / f"{name}.ipynb", as_version=4)
    right = nbformat.read(course / "release" / "ps1" / f"{name}.ipynb", as_version=4)
    for eid in IDS[name]:
        answer(answer_cell(right, eid), solution_body(answer_cell(source, eid)))
    nbformat.write(right, tmp_path / f"{name}.ipynb")
    ok = run(f"python -m ch6.grading.nbgrader validate {name}.ipynb", tmp_path, env)
    assert f"すべての採点のセルが通りました（{len(IDS[name])} 問）" in ok.stdout, ok.stdout
    blank = run(f"python -m ch6.grading.nbgrader validate {course / 'release' / 'ps1' / f'{name}.ipynb'}",
                tmp_path, env, check=False)
    assert blank.returncode == 1 and f"⏳ 未解答 [{IDS[name][0]}]" in blank.stdout, blank.stdout
