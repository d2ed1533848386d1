"""nbgrader 版を本物の nbgrader（requirements-nbgrader.txt の版）で通す: 先生がするのと同じ順に。

python -m ch6.grading.nbgrader → nbgrader generate_assignment → 学生の提出（1 問正解・1 問不正解・残りは未解答。
配布版を書き換えて作る）→ nbgrader autograde → nbgrader export。点数（6.1 は 1 / 6、6.3b は 1 / 5）、
不正解のセルに出る講座の 1 行、nbgrader validate が不正解と未解答で失敗し、全問正解で通ることを確かめます。
最後に ch6-grade で autograded/ を採点し、学習者の名前と点数が同じになることも確かめます。

nbgrader は講座の環境に入れないので、このテストは ``make test-nbgrader``（.venv-nbgrader）で動きます
（CH6_NBGRADER=1 のときは、nbgrader がなければ失敗します。ほかの環境では飛ばします）。速さのため 2 デバイスで動かします。
"""
import csv
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

if os.environ.get("CH6_NBGRADER") != "1":
    pytest.importorskip("nbgrader", reason="nbgrader は make test-nbgrader の環境（.venv-nbgrader）にだけ入れます")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ("6_1_vmap", "6_3b_shard_map")
STUB = re.compile(r"^([ \t]*)# TODO: ここにコードを書いてください\n[ \t]*raise NotImplementedError$", re.M)
# 学生の答え: 正解 1 問（解答例の本体）と、よくある間違い 1 問
RIGHT = {"6_1_vmap": "6.1-1", "6_3b_shard_map": "6.3b-1"}
WRONG = {"6_1_vmap": ("6.1-2", 'return jax.vmap(fn, in_axes=(1, 0))(seqs, lengths)  # out_axes を忘れた'),
         "6_3b_shard_map": ("6.3b-2", 'return lax.all_gather(block, "x", axis=1, tiled=True)  # ppermute を使わない')}
DEVICES = "2"


def _env(tmp: Path) -> dict:
    """nbgrader とカーネルの環境: この venv の python3 カーネル、ユーザーの Jupyter 設定は読まない、2 デバイス。"""
    kernel = tmp / "jupyter" / "kernels" / "python3"
    kernel.mkdir(parents=True, exist_ok=True)
    (kernel / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (ipykernel)", "language": "python"}))
    env = dict(os.environ, JUPYTER_PATH=str(tmp / "jupyter"), JUPYTER_CONFIG_DIR=str(tmp / "jupyter-config"),
               JAX_NUM_CPU_DEVICES=DEVICES, JAX_PLATFORMS="cpu", PYTHONHASHSEED="0")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # nbgrader は alembic を PATH から呼ぶ
    return env


def readme_commands() -> list[str]:
    """README の「nbgrader で点数をつける場合」のコマンド（インストールの行を除く）。このテストはこのとおりに実行します。"""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    item = text[text.index("6. **nbgrader で点数をつける場合**"):]
    block = item[item.index("```bash\n") + 8:item.index("```", item.index("```bash\n") + 8)]
    lines = [ln.strip() for ln in block.splitlines() if ln.strip()]
    assert lines[0].startswith("source .venv/bin/activate && python -m pip install -r requirements-nbgrader.txt")
    return lines[1:]


def argv(line: str) -> list[str]:
    """README の 1 行 -> このテストの venv で動かす argv（venv を有効にしたのと同じ）。"""
    words = shlex.split(line)
    head = {"python": [sys.executable], "nbgrader": [sys.executable, "-m", "nbgrader"],
            "ch6-grade": [sys.executable, "-m", "ch6.grade"]}[words[0]]
    return head + words[1:]


def run(line: str, cwd: Path, env: dict, *extra: str) -> subprocess.CompletedProcess:
    p = subprocess.run(argv(line) + list(extra), cwd=cwd, env=env, text=True, capture_output=True, timeout=600)
    assert p.returncode == 0, f"{line}: {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


def nbgrader(course: Path, env: dict, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env, text=True,
                       capture_output=True, timeout=600)
    if check and p.returncode != 0:
        raise AssertionError(f"nbgrader {' '.join(args)}: {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def _cell(nb, eid: str):
    """演習 eid の解答のセル（nbgrader の solution のセル）。"""
    gid = eid.replace(".", "_")
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == gid)


def _body(source_cell) -> str:
    lines = source_cell.source.split("\n")
    a = next(k for k, ln in enumerate(lines) if "### BEGIN SOLUTION" in ln)
    b = next(k for k, ln in enumerate(lines) if "### END SOLUTION" in ln)
    return "\n".join(lines[a + 1:b])


def _answer(cell, body: str) -> None:
    m = STUB.search(cell.source)
    assert m, cell.source
    indent = m.group(1)
    body = "\n".join(indent + ln.strip() if not ln.startswith(indent) else ln for ln in body.split("\n"))
    cell.source = cell.source[:m.start()] + body + cell.source[m.end():]


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """README のコマンドを順に実行する。generate_assignment の後に、学生 student1 の提出物を作って置く。"""
    tmp = tmp_path_factory.mktemp("nbgrader")
    env = _env(tmp)
    (tmp / "solutions").symlink_to(ROOT / "solutions")  # README のコマンドはリポジトリのフォルダで動かす
    commands = readme_commands()
    assert [c.split()[:3] for c in commands[:4]] == [
        ["python", "-m", "ch6.grading.nbgrader"], ["cd", "course"], ["nbgrader", "generate_assignment", "ps1"],
        ["nbgrader", "autograde", "ps1"]], commands
    assert commands[4:] == ["nbgrader export", "ch6-grade autograded/ --csv ch6-grades.csv"], commands
    run(commands[0], tmp, env)
    course = tmp / "course"
    run(commands[2], course, env)
    _submit(course)
    run(commands[3], course, env)
    run(commands[4], course, env)
    return course, env


def _submit(course: Path) -> None:
    sub = course / "submitted" / "student1" / "ps1"
    sub.mkdir(parents=True)
    (sub / "timestamp.txt").write_text("2025-01-01 00:00:00.000000 UTC")
    for name in NOTEBOOKS:
        source = nbformat.read(course / "source" / "ps1" / f"{name}.ipynb", as_version=4)
        nb = nbformat.read(course / "release" / "ps1" / f"{name}.ipynb", as_version=4)
        _answer(_cell(nb, RIGHT[name]), _body(_cell(source, RIGHT[name])))
        eid, wrong = WRONG[name]
        _answer(_cell(nb, eid), wrong)
        nbformat.write(nb, sub / f"{name}.ipynb")


def test_release_is_the_exercise_notebook_plus_locked_test_cells(course):
    """配布版 = exercises/ の演習版 + 採点のセル: 解答も解説も YOUR ANSWER HERE もなく、バッジは exercises/ へ。"""
    course, _ = course
    for name in NOTEBOOKS:
        text = (course / "release" / "ps1" / f"{name}.ipynb").read_text(encoding="utf-8")
        for leak in ("YOUR ANSWER HERE", "BEGIN SOLUTION", "HIDDEN TESTS", "解答例つき", "blob/main/solutions/"):
            assert leak not in text, (name, leak)
        assert f"blob/main/exercises/{name}.ipynb" in text
        rel = nbformat.reads(text, as_version=4)
        ex = nbformat.read(ROOT / "exercises" / f"{name}.ipynb", as_version=4)
        tests = [c for c in rel.cells if c.metadata.get("nbgrader", {}).get("grade")]
        assert [c.source.strip() for c in rel.cells if c not in tests] == [c.source.strip() for c in ex.cells]
        ids = [m.group(1) for c in ex.cells for m in re.finditer(r'ch6\.check\("([^"]+)"', c.source)]
        assert [c.metadata.nbgrader.grade_id for c in tests] == ["test_" + i.replace(".", "_") for i in ids]
        assert all(c.metadata.nbgrader.locked and c.metadata.nbgrader.points == 1 for c in tests)
        assert all(re.fullmatch(r"[a-zA-Z0-9_\-]+", c.metadata.nbgrader.grade_id)
                   for c in rel.cells if "nbgrader" in c.metadata)


def test_export_has_the_points(course):
    course, _ = course
    with open(course / "grades.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [(r["assignment"], r["student_id"], float(r["score"]), float(r["max_score"])) for r in rows] == \
        [("ps1", "student1", 2.0, 11.0)]


def test_gradebook_has_points_per_notebook_and_cell(course):
    course, _ = course
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        sub = gb.find_submission("ps1", "student1")
        per_nb = {n.name: (n.score, n.max_score) for n in sub.notebooks}
        assert per_nb == {"6_1_vmap": (1.0, 6.0), "6_3b_shard_map": (1.0, 5.0)}
        scores = {g.name: g.score for n in sub.notebooks for g in n.grades}
    assert scores["test_6_1-1"] == 1.0 and scores["test_6_1-2"] == 0.0 and scores["test_6_1-3"] == 0.0
    assert scores["test_6_3b-1"] == 1.0 and scores["test_6_3b-2"] == 0.0


def test_failing_test_cells_show_the_course_line(course):
    """不正解は ❌ とヒント、未解答は ⏳: AssertionError のメッセージが講座の 1 行。"""
    course, _ = course
    nb = nbformat.read(course / "autograded" / "student1" / "ps1" / "6_1_vmap.ipynb", as_version=4)
    errors = {c.metadata.nbgrader.grade_id: o["evalue"] for c in nb.cells if c.cell_type == "code"
              for o in c.outputs if o.output_type == "error"}
    assert set(errors) == {f"test_6_1-{k}" for k in range(2, 7)}, errors
    assert errors["test_6_1-2"].startswith("❌ [6.1-2] ") and errors["test_6_1-3"].startswith("⏳ [6.1-3] ")
    assert "\n" not in errors["test_6_1-2"]
    # 採点のセルの解説（隠しテスト）は、採点後のノートブックに戻る: 6.1 には解説がないので、ないまま
    assert all("HIDDEN" not in c.source for c in nb.cells)


def test_validate_fails_on_wrong_and_not_done_and_passes_when_right(course, tmp_path):
    course, env = course
    wrong = nbgrader(course, env, "validate", "submitted/student1/ps1/6_3b_shard_map.ipynb", check=False)
    assert "VALIDATION FAILED" in wrong.stdout and "❌ [6.3b-2]" in wrong.stdout, wrong.stdout[-2000:]
    release = course / "release" / "ps1" / "6_3b_shard_map.ipynb"
    blank = nbgrader(course, env, "validate", str(release), check=False)
    assert "VALIDATION FAILED" in blank.stdout and "⏳ [6.3b-1]" in blank.stdout, blank.stdout[-2000:]
    source = nbformat.read(course / "source" / "ps1" / "6_3b_shard_map.ipynb", as_version=4)
    right = nbformat.read(release, as_version=4)
    for c in right.cells:
        if c.metadata.get("nbgrader", {}).get("solution"):
            _answer(c, _body(_cell(source, c.metadata.nbgrader.grade_id.replace("_", ".", 1))))
    done = tmp_path / "6_3b_shard_map.ipynb"
    nbformat.write(right, done)
    ok = nbgrader(course, env, "validate", str(done), check=False)
    assert "Success! Your notebook passes all the tests." in ok.stdout, ok.stdout[-2000:]


def test_ch6_grade_reads_the_autograded_tree(course):
    """README の ch6-grade の行（速さのため --devices 2 を足す）: 学習者は student1、点数は nbgrader と同じ、備考なし。"""
    course, env = course
    line = readme_commands()[-1]
    run(line, course, env, "--devices", DEVICES, "--json", "ch6-grades.json", "--quiet")
    data = json.loads((course / "ch6-grades.json").read_text(encoding="utf-8"))
    rows = data["rows"] if isinstance(data, dict) else data
    got = sorted((r["learner"], r["notebook"], r["score"], r["max_score"], tuple(r["notes"])) for r in rows)
    assert got == [("student1", "6_1_vmap", 1, 6, ()), ("student1", "6_3b_shard_map", 1, 5, ())], got
    assert (course / "ch6-grades.csv").exists()
