"""学習者版（tools/learner_edition.py、make learner-edition）: 解答を含まず、本編と演習とチェックはそのまま動く。

速いテストは作った学習者版のファイルを読むだけです。学習者版の wheel を pip で入れてカーネルを起動するテスト
（見張りが ch6.checks を止め、ch6.check は採点する）は遅いテスト（conftest.py の SLOW_TESTS）です。
"""
from __future__ import annotations

import ast
import base64
import csv
import hashlib
import io
import json
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import learner_edition  # noqa: E402

from ch6 import edition, nbrun  # noqa: E402

MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION", "<!-- BEGIN SOLUTION -->", "<!-- END SOLUTION -->")
# 採点のツールは印そのものを扱うので、その名前を含む（答えではない）
MARKER_HANDLERS = {"ch6/grading/nbgrader.py"}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("learner")
    return learner_edition.build(out, record=False)  # 記録（プロセスを起こす）は test_learner_answers（遅いテスト）で


def _text_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and p.suffix != ".whl" and ".git" not in p.parts]


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def test_edition_holds_lessons_and_exercises_and_no_solutions(built):
    folder = built.folder
    top = sorted(p.name for p in folder.iterdir())
    assert top == sorted([".gitignore", ".jupyter", ".python-version", "GLOSSARY.md", "Makefile", "README.md",
                          "exercises", "notebooks", "packages", "requirements.txt"]), top
    for left_out in learner_edition.LEFT_OUT:
        assert not (folder / left_out).exists(), left_out
    assert sorted(p.name for p in (folder / "notebooks").iterdir()) == sorted(
        p.name for p in (ROOT / "notebooks").glob("*.ipynb")), "本編は .ipynb だけ（MyST の双子と出力の文字版は除く）"
    exercises = sorted((ROOT / "exercises").glob("*.ipynb"))
    assert sorted(p.name for p in (folder / "exercises").iterdir()) == [p.name for p in exercises]
    for nb in exercises:  # 演習はそのまま（採点はセルの中身で提出物を見分ける）
        assert (folder / "exercises" / nb.name).read_bytes() == nb.read_bytes(), nb.name
    for p in _text_files(folder):
        text = p.read_text(encoding="utf-8")
        for marker in MARKERS:
            assert marker not in text, f"{p.relative_to(folder)} に {marker}"
        if p.suffix == ".ipynb":
            assert "solutions/" not in text, f"{p.relative_to(folder)} が solutions/ を案内しています"
            assert "jupytext" not in json.loads(text)["metadata"], "保存で .md の双子を作らない"


def test_no_solution_block_survives_in_the_edition(built):
    """solutions/ の解答のブロック（2 行以上）が、学習者版の演習ノートブックのどこにもない。"""
    block = re.compile(r"### BEGIN SOLUTION\n(.*?)\n\s*### END SOLUTION", re.S)
    checked = 0
    for sol in sorted((ROOT / "solutions").glob("*.ipynb")):
        text = (built.folder / "exercises" / sol.name).read_text(encoding="utf-8")
        for cell in _cells(sol):
            for m in block.finditer(_source(cell)):
                lines = [ln.strip() for ln in m.group(1).splitlines() if ln.strip() and not ln.strip().startswith("#")]
                if len(lines) >= 2:
                    checked += 1
                    assert not all(json.dumps(ln, ensure_ascii=False)[1:-1] in text for ln in lines), (
                        f"{sol.name}: 解答のブロックが学習者版に残っています: {lines[:2]}")
    assert checked >= 20, checked


def test_wheel_is_the_package_with_the_learner_marker(built):
    with zipfile.ZipFile(built.wheel) as zf:
        names = zf.namelist()
        info = json.loads(zf.read("ch6/edition.json"))
        dist = "ch6-0.1.0.dist-info"
        record = list(csv.reader(io.StringIO(zf.read(f"{dist}/RECORD").decode())))
        for path, digest, size in record:
            if path == f"{dist}/RECORD":
                continue
            data = zf.read(path)
            want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, int(size)) == (want, len(data)), path
        assert sorted(r[0] for r in record) == sorted(names)
        metadata = zf.read(f"{dist}/METADATA").decode()
        entry_points = zf.read(f"{dist}/entry_points.txt").decode()
    assert info["edition"] == "learner"
    package = {p.relative_to(ROOT).as_posix() for p in learner_edition.package_files()}
    assert {n for n in names if n.startswith("ch6/")} == package | {"ch6/edition.json"}
    assert "ch6/checks/s6_1/ensemble_sgd_step.py" in package  # チェックは入る（採点に要る）。読み込みは見張りが止める
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert [ln.removeprefix("Requires-Dist: ") for ln in metadata.splitlines() if ln.startswith("Requires-Dist")] \
        == project["dependencies"]
    assert "ch6-grade = ch6.grade:main" in entry_points
    with zipfile.ZipFile(built.wheel) as zf:
        holders = {n for n in names if n.endswith(".py") and b"BEGIN SOLUTION" in zf.read(n)}
    assert holders <= MARKER_HANDLERS, holders


def test_every_exercise_check_resolves_in_the_edition(built):
    """学習者版の演習ノートブックの ch6.check の番号が、wheel のチェックにすべてある（読み込まずに ast で）。"""
    registered = set()
    with zipfile.ZipFile(built.wheel) as zf:
        for name in zf.namelist():
            if name.startswith("ch6/checks/") and name.endswith(".py"):
                registered |= set(re.findall(r'@exercise\("([^"]+)"', zf.read(name).decode()))
    for nb in sorted((built.folder / "exercises").glob("*.ipynb")):
        called = set(re.findall(r'ch6\.check\("([^"]+)"', "".join(_source(c) for c in _cells(nb))))
        assert called, nb.name
        assert called <= registered, f"{nb.name}: {sorted(called - registered)}"


def test_no_learner_notebook_imports_the_checks(built):
    """学習者版ではノートブックから ch6.checks を読み込めないので、配るノートブックもそれをしない。"""
    for nb in sorted((built.folder / "notebooks").glob("*.ipynb")) + sorted((built.folder / "exercises").glob("*.ipynb")):
        for cell in _cells(nb):
            if cell["cell_type"] != "code":
                continue
            code = "\n".join(ln for ln in _source(cell).splitlines() if not ln.lstrip().startswith(("%", "!")))
            for node in ast.walk(ast.parse(code)):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                assert not any(n == "ch6.checks" or n.startswith("ch6.checks.") for n in names), (nb.name, names)
                if isinstance(node, ast.ImportFrom) and node.module == "ch6":
                    assert "checks" not in [a.name for a in node.names], nb.name
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                    assert (node.value.id, node.attr) != ("ch6", "checks"), nb.name


def test_build_is_reproducible(built, tmp_path):
    again = learner_edition.build(tmp_path, record=False)
    for a, b in zip(built.archives, again.archives):
        assert a.read_bytes() == b.read_bytes(), a.name
    assert built.wheel.read_bytes() == again.wheel.read_bytes()


def test_learner_makefile_installs_the_wheel_and_can_run_offline(built):
    def dry(*args):
        return subprocess.run(["make", "-n", *args, "PYTHON=python3"], cwd=built.folder, capture_output=True,
                              text=True, check=True).stdout

    setup = dry("setup")
    assert "-m venv .venv" in setup and "-r requirements.txt" in setup
    assert f"--no-index --no-deps --force-reinstall packages/{built.wheel.name}" in setup
    assert "--no-index --find-links \"/media/usb/wheelhouse\" -r requirements.txt" in dry(
        "setup", "WHEELHOUSE=/media/usb/wheelhouse")
    (built.folder / "wheelhouse").mkdir()  # 先生が配った wheel をフォルダに置いたとき: 引数なしでネットワークを使わない
    try:
        assert "--no-index --find-links \"wheelhouse\" -r requirements.txt" in dry("setup")
    finally:
        (built.folder / "wheelhouse").rmdir()
    assert ".jupyter" in dry("lab") and "jupyter lab" in dry("lab")
    hidden = json.loads((built.folder / ".jupyter/jupyter_server_config.json").read_text())
    assert {"packages", "wheelhouse"} <= set(hidden["ContentsManager"]["hide_globs"])


def test_learner_readme_lists_every_notebook(built):
    readme = (built.folder / "README.md").read_text(encoding="utf-8")
    for nb in (built.folder / "notebooks").glob("*.ipynb"):
        assert f"(notebooks/{nb.name})" in readme, nb.name
    assert "solutions/" not in readme and "colab.research.google.com" not in readme
    assert "## English" in readme


def test_the_full_repository_has_no_guard():
    """完全版（このリポジトリ）では見張りは入らず、テストとツールは ch6.checks を読み込める。"""
    assert edition.edition() == "full" and not edition.active()
    assert not edition.MARKER.exists()
    from ch6.checks import s6_1

    assert s6_1.ensemble_sgd_step.__name__ == "ch6.checks.s6_1.ensemble_sgd_step"


ATTEMPTS = (
    "from ch6.checks.s6_1.ensemble_sgd_step import _sgd_reference",
    "from ch6.checks.s6_3a.shard_gated_mlp import want_spec",
    "import ch6.checks.s6_7.dp_chips",
    "from ch6.checks.s6_10 import critical_batch",
    "from ch6 import checks",
    "ch6.checks.s6_9a",
    "importlib.import_module('ch6.checks.s6_2')",
    "importlib.util.find_spec('ch6.checks.s6_6')",
)

_ATTEMPT_CELL = """import importlib, importlib.util, sys
for attempt in {attempts!r}:
    try:
        exec(attempt)
        print("読み込めた:", attempt)
    except ImportError as e:
        print(type(e).__name__, "|", attempt, "|", e)
print("sys.modules:", sorted(n for n in sys.modules if n.startswith("ch6.checks")))"""


def _solution_cell(notebook: str, exercise_id: str) -> str:
    for cell in _cells(ROOT / "solutions" / notebook):
        src = _source(cell)
        if f'ch6.check("{exercise_id}"' in src:
            return "\n".join(ln for ln in src.splitlines() if "SOLUTION" not in ln)
    raise AssertionError(exercise_id)


def test_learner_kernel_refuses_the_checks_and_still_grades(built, tmp_path, monkeypatch):
    """学習者版の wheel を pip で入れた場所を使うカーネルで: 配ったままの最初のセルが動き、参照の答えの読み込みは
    どの書き方でも日本語 1 行の ImportError になり、ch6.check は正しい答えを ✅、解いていない答えを ⏳ にする。"""
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index",
                    "--no-deps", "--target", str(site), str(built.wheel)], check=True)
    monkeypatch.setenv("PYTHONPATH", str(site))
    exercise = _cells(built.folder / "exercises" / "6_1_vmap.ipynb")
    first = next(c for c in exercise if c["cell_type"] == "code")
    attempts = _ATTEMPT_CELL.format(attempts=ATTEMPTS)
    cells = [_source(first),
             f"print(ch6.__file__.startswith({str(site)!r}), ch6.edition.edition())",
             attempts,
             "import jax",
             _solution_cell("6_1_vmap.ipynb", "6.1-1"),
             "def ensemble_sgd_step(loss_fn, stacked_params, xs, ys, lrs):\n    raise NotImplementedError\n\n"
             "ch6.check(\"6.1-5\", ensemble_sgd_step)",
             attempts,
             "from ch6.models import gated_mlp\nprint(gated_mlp.__module__)"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb, _ = nbrun.execute(nb, cwd=tmp_path, devices=2)
    out = ["".join(o.get("text", "") for o in c.outputs if o.get("output_type") == "stream") for c in nb.cells]
    assert out[1].strip() == "True learner", out[1]
    for before_or_after in (out[2], out[6]):
        lines = [ln for ln in before_or_after.splitlines() if "|" in ln]
        assert len(lines) == len(ATTEMPTS), before_or_after
        for line in lines:
            kind, _, message = (part.strip() for part in line.split("|"))
            assert kind == "ChecksHidden", line
            assert "学習者版の ch6 では、演習のチェック" in message and "ch6.check(" in message and "\n" not in message
        assert "読み込めた" not in before_or_after
        assert "sys.modules: []" in before_or_after
    assert out[4].startswith("✅ 正解 [6.1-1] rbf_features: ") and "正解です" not in out[4], out[4]
    assert out[5].startswith("⏳ 未解答 [6.1-5]"), out[5]
    assert out[7].strip() == "ch6.models"
