"""nbgrader 版（python -m ch6.grading.nbgrader）の中身: nbgrader を入れなくても確かめられること。

本物の nbgrader で通すテストは tests/grading/test_nbgrader_roundtrip.py（make test-nbgrader）。
"""
import json
import re
from pathlib import Path

import nbformat
import pytest

from ch6.grading import gradecells
from ch6.grading import nbgrader as edition
from ch6.grading.exercises import DATA, check_calls

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
# 演習の番号と数は ch6/grading/exercises.json（exercises/ から作られる）だけが正本: ここに数を書かない
KNOWN = json.loads(DATA.read_text(encoding="utf-8"))["notebooks"]


def ids_of(stem: str) -> list[str]:
    return [e["id"] for e in KNOWN[stem]["exercises"]]


def _meta(cell):
    return cell.metadata.get("nbgrader", {})


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_every_solution_notebook_becomes_an_nbgrader_source(path):
    sol = nbformat.read(path, as_version=4)
    src = edition.to_source(sol, path.stem)
    nbformat.validate(src)
    ids = [e for c in sol.cells if c.cell_type == "code" for e, _, _ in check_calls(c.source)]
    tests = [c for c in src.cells if _meta(c).get("grade")]
    assert [_meta(c)["grade_id"] for c in tests] == [edition.grade_id(i, "test_") for i in ids]
    assert all(_meta(c)["locked"] and _meta(c)["points"] == 1.0 and edition.is_test_cell(c) for c in tests)
    for k, c in enumerate(src.cells):  # 採点のセルは、その演習の解答のセルのすぐ後
        if _meta(c).get("grade"):
            assert _meta(src.cells[k - 1]).get("solution"), (path.stem, k)
    gids = [_meta(c)["grade_id"] for c in src.cells if _meta(c)]
    assert len(gids) == len(set(gids)) and all(re.fullmatch(r"[a-zA-Z0-9_\-]+", g) for g in gids)
    assert _meta(next(c for c in src.cells if c.cell_type == "code"))["locked"]  # セットアップのセル
    text = nbformat.writes(src)
    assert "<!-- BEGIN SOLUTION -->" not in text and "blob/main/solutions/" not in text
    assert f"blob/main/exercises/{path.stem}.ipynb" in text
    assert all(not c.get("outputs") for c in src.cells if c.cell_type == "code")


def test_solution_only_prose_goes_to_hidden_tests_of_its_exercise():
    """6.5 の解説（解答版だけの文）は、その問の採点のセルの隠しテストに入る（nbgrader が配布版から消す）。"""
    sol = nbformat.read(ROOT / "solutions" / "6_5_summary.ipynb", as_version=4)
    src = edition.to_source(sol, "6_5_summary")
    test1 = next(c for c in src.cells if _meta(c).get("grade_id") == edition.grade_id(ids_of("6_5_summary")[0], "test_"))
    hidden = test1.source.split("### BEGIN HIDDEN TESTS\n", 1)[1]
    assert "問 1 の解説" in hidden and hidden.rstrip().endswith("### END HIDDEN TESTS")
    assert all(ln.startswith("#") for ln in hidden.splitlines())
    assert not any("問 1 の解説" in c.source for c in src.cells if c.cell_type == "markdown")


def test_points_are_configurable_and_unknown_ids_are_refused(tmp_path):
    stems = ("6_1_vmap", "6_3b_shard_map")
    sols = [ROOT / "solutions" / f"{stem}.ipynb" for stem in stems]
    heavy = ids_of("6_3b_shard_map")[-1]  # 1 つの演習だけ 2 点、ほかは既定の 0.5 点
    written = edition.write_edition(tmp_path, sols, "ps1", {heavy: 2}, default_points=0.5)
    want = [(f"source/ps1/{stem}.ipynb", len(ids_of(stem)),
             sum(2.0 if i == heavy else 0.5 for i in ids_of(stem))) for stem in stems]
    assert [(p.relative_to(tmp_path).as_posix(), n, total) for p, n, total in written] == want
    assert "raise NotImplementedError" in (tmp_path / "nbgrader_config.py").read_text(encoding="utf-8")
    unknown = "6.9-1"  # 6.9 は 6.9a / 6.9b / 6.9c に分かれているので、この番号の演習はない
    assert all(unknown not in ids_of(stem) for stem in KNOWN)
    with pytest.raises(edition.EditionError, match=unknown):
        edition.write_edition(tmp_path, sols, "ps1", {unknown: 2})


def test_one_assignment_per_notebook_by_default(tmp_path, capsys):
    sols = [str(ROOT / "solutions" / "6_1_vmap.ipynb"), str(ROOT / "solutions" / "6_2_pmap.ipynb")]
    assert edition.main([str(tmp_path), *sols]) == 0
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.ipynb")) == [
        "source/6_1_vmap/6_1_vmap.ipynb", "source/6_2_pmap/6_2_pmap.ipynb"]
    out = capsys.readouterr().out
    n = len(ids_of("6_1_vmap"))
    assert f"演習 {n} 問、{n} 点" in out and "nbgrader generate_assignment 6_1_vmap" in out
    assert edition.main([str(tmp_path), "--assignment", "ps 1", *sols]) == 2
    with pytest.raises(SystemExit):
        edition.main([str(tmp_path), "--points", ids_of("6_1_vmap")[0], *sols])
    assert "「番号=点数」の形で" in capsys.readouterr().err


def test_a_changed_test_cell_is_not_the_course_test_cell():
    cell = nbformat.v4.new_code_cell(edition.test_source("6.1-1", "rbf_features"))
    cell.metadata["nbgrader"] = edition.nbgrader_meta("test_6_1-1", grade=True, locked=True, points=1.0)
    assert edition.is_test_cell(cell)
    cell.source += "\nprint('x')"
    assert not edition.is_test_cell(cell)
    plain = nbformat.v4.new_code_cell(edition.test_source("6.1-1", "rbf_features"))
    assert not edition.is_test_cell(plain)  # nbgrader の採点のセルでなければ、学習者のセルとして実行する


# ---------------------------------------------------------------- 採点する側（nbgrader なしで確かめられるところ）

def _exercise_notebook(name="6_1_vmap"):
    return nbformat.read(ROOT / "exercises" / f"{name}.ipynb", as_version=4)


def test_grade_cells_are_put_back_after_their_exercise_in_a_notebook_made_from_exercises():
    nb = _exercise_notebook()
    restored, had_none = gradecells.restore_grade_cells(nb, "6_1_vmap")
    ids = gradecells.course_notebook("6_1_vmap").ids
    assert had_none and restored == ids
    for k, c in enumerate(nb.cells):
        if edition.test_exercise(c):
            assert edition.is_test_cell(c) and f'ch6.check("{edition.test_exercise(c)}"' in nb.cells[k - 1].source
    assert _meta(next(c for c in nb.cells if c.cell_type == "code"))["grade_id"] == "setup"
    gone = next(c for c in nb.cells if edition.test_exercise(c) == ids[1])
    nb.cells.remove(gone)
    assert gradecells.restore_grade_cells(nb, "6_1_vmap") == ([ids[1]], False)


def _executed(nb, lines: dict):
    """採点のセルに、実行したときの出力（✅ の 1 行か、エラー）を付ける。"""
    for c in nb.cells:
        eid = edition.test_exercise(c)
        if eid in lines:
            c.outputs = [nbformat.v4.new_output("stream", name="stdout", text=lines[eid] + "\n")]
        elif eid:
            c.outputs = [nbformat.v4.new_output("error", ename="AssertionError", evalue=f"⏳ 未解答 [{eid}] まだ", traceback=[])]


def test_guard_zeroes_grade_cells_after_code_that_replaces_the_checks():
    nb = _exercise_notebook()
    gradecells.restore_grade_cells(nb, "6_1_vmap")
    ids = gradecells.course_notebook("6_1_vmap").ids
    setup = next(k for k, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells.insert(setup + 1, nbformat.v4.new_code_cell("ch6.run_check = lambda *a, **k: None"))
    _executed(nb, {i: f"✅ 正解 [{i}] 正解です。" for i in ids})
    said = gradecells.guard(nb, "6_1_vmap")
    assert len(said) == 1 and "採点のしくみに触れています" in said[0] and "ch6.run_check" in said[0]
    for c in nb.cells:
        if edition.test_exercise(c):
            assert any(o.output_type == "error" and "0 点" in o.evalue for o in c.outputs)


def test_guard_zeroes_a_grade_cell_that_shows_no_result_and_names_an_unreadable_file():
    nb = _exercise_notebook()
    gradecells.restore_grade_cells(nb, "6_1_vmap")
    ids = gradecells.course_notebook("6_1_vmap").ids
    _executed(nb, {ids[0]: f"✅ 正解 [{ids[0]}] 正解です。"})
    silent = next(c for c in nb.cells if edition.test_exercise(c) == ids[1])
    silent.outputs = []  # 表示もエラーもない（エラーの報告が止められた）
    assert gradecells.guard(nb, "6_1_vmap") == []
    first = next(c for c in nb.cells if edition.test_exercise(c) == ids[0])
    assert not any(o.output_type == "error" for o in first.outputs)
    assert "結果の 1 行を表示しませんでした" in silent.outputs[-1].evalue
    stand_in = gradecells.unreadable_notebook("6_1_vmap", "ファイルが壊れていて読めません。", "submitted/s/ps1/6_1_vmap.ipynb")
    gradecells.restore_grade_cells(stand_in, "6_1_vmap")
    said = gradecells.guard(stand_in, "6_1_vmap")
    assert said and all("submitted/s/ps1/6_1_vmap.ipynb" in c.outputs[0].evalue
                        for c in stand_in.cells if edition.test_exercise(c))


def test_grade_uses_the_installed_checks_and_flags_a_replaced_run_check(tmp_path):
    """採点のセルの grade() を新しいプロセスで: 正解・関数がない・ch6.run_check の差し替え。"""
    import subprocess
    import sys

    script = tmp_path / "k.py"
    script.write_text(
        "import jax, ch6\n"
        "def rbf_features(kernel, x, centers, gammas):\n"
        "    return jax.vmap(kernel, in_axes=(None, 0, 0))(x, centers, gammas)\n"
        + "\n".join(f"r{k} = __import__('ch6.grading.nbgrader', fromlist=['grade']).grade({eid!r}, {fn!r})\n"
                    f"print('R{k}', r{k}.ok, r{k}.line)" for k, (eid, fn) in
                    enumerate([("6.1-1", "rbf_features"), ("6.1-2", "time_major_apply")]))
        + "\nfrom types import SimpleNamespace\nch6.run_check = lambda *a, **k: SimpleNamespace(ok=True, line='')\n"
        "r2 = __import__('ch6.grading.nbgrader', fromlist=['grade']).grade('6.1-1', 'rbf_features')\n"
        "print('R2', r2.ok, r2.line)\n", encoding="utf-8")
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                       env={"JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": "2", "PATH": "/usr/bin:/bin"})
    got = {ln[:2]: ln[3:] for ln in p.stdout.splitlines() if ln[:2] in ("R0", "R1", "R2")}
    assert got["R0"].startswith("True ✅ 正解 [6.1-1]"), p.stdout + p.stderr
    assert got["R1"].startswith("False ⚠️ 未定義 [6.1-2] time_major_apply が定義されていません"), p.stdout
    assert got["R2"].startswith("False ⚠️ 採点できません [6.1-1]") and "ch6.run_check" in got["R2"] and "0 点" in got["R2"], p.stdout


def test_grade_shows_a_correct_answers_warnings_on_stdout_not_stderr(tmp_path):
    """nbgrader は stderr に何か書かれた採点のセルを 0 点にする: 正解の関数が警告や stderr への書き込みを出しても、
    採点のセルの stderr は空で、警告は stdout に 1 行で見え、結果は正解のまま。"""
    import subprocess
    import sys

    script = tmp_path / "k.py"
    script.write_text(
        "import sys, warnings, jax\n"
        "def rbf_features(kernel, x, centers, gammas):\n"
        "    warnings.warn('old API', DeprecationWarning)\n"
        "    print('debug', file=sys.stderr)\n"
        "    return jax.vmap(kernel, in_axes=(None, 0, 0))(x, centers, gammas)\n"
        "r = __import__('ch6.grading.nbgrader', fromlist=['grade']).grade('6.1-1', 'rbf_features')\n"
        "print('R', r.ok)\n", encoding="utf-8")
    p = subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning:jax", str(script)], capture_output=True,
                       text=True, timeout=600, env={"JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": "2", "PATH": "/usr/bin:/bin"})
    assert "R True" in p.stdout, p.stdout + p.stderr
    assert "DeprecationWarning: old API" in p.stdout and "debug" in p.stdout and "点数には関係しません" in p.stdout, p.stdout
    assert "old API" not in p.stderr and "debug" not in p.stderr, p.stderr


def _release_like():
    """配布版と同じ nbgrader のメタデータの 6.1（セットアップ、解答、採点のセル）。"""
    nb = nbformat.read(ROOT_NB / "exercises" / "6_1_vmap.ipynb", as_version=4)
    assert gradecells.normalize_metadata(nb, "6_1_vmap") == []  # exercises/ から（印なし）: 書き換えとは言わない
    gradecells.restore_grade_cells(nb, "6_1_vmap")
    return nb


ROOT_NB = Path(__file__).resolve().parents[2]


def test_metadata_is_rebuilt_from_the_cells_and_every_edit_is_named():
    """セットアップのセルの locked の写し、採点でないセルの grade: true、壊れた値、grade_id の重複: 配布版の形に戻し、
    どのセルかを言う（issue 47: nbgrader がクラスを止めないように）。"""
    nb = _release_like()
    clean = json.loads(nbformat.writes(nb))
    assert gradecells.normalize_metadata(nb, "6_1_vmap") == []  # 配布版のままなら何も言わない
    setup = next(c for c in nb.cells if c.cell_type == "code")
    learner = nbformat.v4.new_code_cell("x = 1")
    learner.metadata["nbgrader"] = dict(setup.metadata["nbgrader"])  # セットアップの印の写し
    nb.cells.insert(2, learner)
    other = nbformat.v4.new_code_cell("y = 2")
    other.metadata["nbgrader"] = {"grade": True, "grade_id": "mine", "points": 5, "locked": False, "solution": False}
    nb.cells.insert(3, other)
    test = next(c for c in nb.cells if edition.test_exercise(c))
    test.metadata["nbgrader"]["points"] = 9  # 点数の書き換え
    said = gradecells.normalize_metadata(nb, "6_1_vmap")
    assert len(said) == 3 and "セル 3（setup 編集不可 → なし）" in said[0], said
    assert "nbgrader のメタデータが配布版と違っていました" in gradecells.metadata_note(said)
    nb.cells = [c for c in nb.cells if c.source not in ("x = 1", "y = 2")]
    assert [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells] == \
        [c["metadata"].get("nbgrader", {}).get("grade_id") for c in clean["cells"]]
    assert test.metadata["nbgrader"]["points"] == 1.0
