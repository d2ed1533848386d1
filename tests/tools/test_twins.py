"""MyST の双子（tools/twins.py）と、JupyterLab で開いても変わらない保存形式。"""
import copy
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import twins  # noqa: E402

from ch6 import nbrun  # noqa: E402

PAIRED = twins.notebooks()
ALL = sorted(p for f in ("notebooks", "solutions", "exercises") for p in (ROOT / f).glob("*.ipynb"))


def test_every_hand_written_notebook_is_paired():
    assert len(PAIRED) >= 15
    orphans = [md.name for f in twins.PAIRED for md in (ROOT / f).glob("*.md")
               if not md.with_suffix(".ipynb").exists()]
    assert not orphans, f"a .md twin without its notebook: {orphans}"


@pytest.mark.parametrize("path", PAIRED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_twins_in_sync(path):
    assert twins.problems(path) == [], "run: python tools/twins.py (make sync)"


@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_opening_in_jupyterlab_changes_nothing(path):
    """JupyterLab は開いたときにカーネル指定を書き込む。保存済みのものと同じなら差分は出ない。"""
    text = path.read_text(encoding="utf-8")
    nb = nbformat.reads(text, as_version=4)
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    assert nbrun.writes(nb) == text


def test_exercises_have_no_twins():
    for path in (ROOT / "exercises").glob("*.ipynb"):
        assert "jupytext" not in nbrun.read(path).metadata, path.name
    assert not list((ROOT / "exercises").glob("*.md"))


@pytest.fixture
def pair(tmp_path):
    src = ROOT / "notebooks" / "6_2_pmap.ipynb"
    for p in (src, twins.md_path(src), twins.outputs_path(src)):
        shutil.copy(p, tmp_path / p.name)
    return tmp_path / src.name


def test_md_round_trip_is_lossless(pair):
    before = pair.read_bytes()
    assert twins.sync(pair, source="md") is False
    assert pair.read_bytes() == before
    assert twins.problems(pair) == []


def test_an_md_edit_reaches_the_notebook_and_keeps_other_outputs(pair):
    md = twins.md_path(pair)
    old = nbrun.read(pair)
    md.write_text(md.read_text(encoding="utf-8").replace("## 1. デバイスを数える", "## 1. デバイスの数を調べる"),
                  encoding="utf-8")
    assert twins.sync(pair, source="md") is True
    new = nbrun.read(pair)
    assert any("## 1. デバイスの数を調べる" in c.source for c in new.cells)
    assert [c.get("outputs") for c in new.cells] == [c.get("outputs") for c in old.cells]
    assert twins.problems(pair) == []


def test_outputs_twin_reads_figures_as_text(pair):
    text = twins.outputs_path(pair).read_text(encoding="utf-8")
    assert "[PNG " in text and "<図: デバイスごとの値 psum（後は全デバイスの値を合わせたもの）>" in text
    assert "iVBOR" not in text  # base64 の PNG は入らない


# ------------------------------------------------------------------ セルの id は中身についていく（issue 34）

def _cells(*specs):
    return [nbformat.v4.new_markdown_cell(s[3:]) if s.startswith("md:") else nbformat.v4.new_code_cell(s)
            for s in specs]


def test_match_cells_by_content_not_by_position():
    old = _cells("md:# 題", "x = 1", "md:## 問題 5", "def f(x):\n    return x", "md:## ふりかえり\n- 全体の和は psum")
    new = _cells("md:# 題", "x = 1", "md:## 問題 5", "def f(x):\n    return x",
                 "md:## 問題 6（新しい問）", "def g(y):\n    return 2 * y",
                 "md:## ふりかえり\n- 全体の和は psum で集めます")
    assert twins.match_cells(new, old) == [0, 1, 2, 3, None, None, 4]
    moved = [new[1], new[0]]  # 並べ替えたセルも中身で
    assert twins.match_cells(moved, old) == [1, 0]
    rewritten = _cells("md:# 題", "import jax\nprint(jax.devices())", "md:## 問題 5")  # その場で書き換えたセル
    assert twins.match_cells(rewritten, old[:3]) == [0, 1, 2]


def test_moved_ids_reports_an_id_that_left_its_content():
    old = nbformat.v4.new_notebook(cells=_cells("md:# 題", "md:## 問題 5", "md:## ふりかえり\n- 全体の和は psum"))
    bad = copy.deepcopy(old)  # 以前の同期: 挿入した見出しが、まとめのセルの id を受け取った
    bad.cells.insert(2, nbformat.v4.new_markdown_cell("## 問題 6（新しい問）"))
    bad.cells[2].id, bad.cells[3].id = old.cells[2].id, "fresh001"
    assert len(twins.moved_ids(old, bad)) == 1 and "moved to other content" in twins.moved_ids(old, bad)[0]
    good = copy.deepcopy(bad)
    good.cells[2].id, good.cells[3].id = "fresh001", old.cells[2].id
    assert twins.moved_ids(old, good) == []
    kind = copy.deepcopy(old)
    kind.cells[1] = nbformat.v4.new_code_cell("x = 1", id=old.cells[1].id)
    assert "another kind of cell" in twins.moved_ids(old, kind)[0]


def test_inserting_a_problem_keeps_every_id_with_its_content(tmp_path):
    """issue 34 の試し: 解答の最後の問のあとに問を挿入し、まとめも直す。まとめは自分の id を保ち、新しいセルは
    新しい id を受け取る（以前は、まとめの id が新しい見出しへ移った）。"""
    src = ROOT / "solutions" / "6_3b_shard_map.ipynb"
    for p in (src, twins.md_path(src), twins.outputs_path(src)):
        shutil.copy(p, tmp_path / p.name)
    nb_path = tmp_path / src.name
    md = twins.md_path(nb_path)
    text = md.read_text(encoding="utf-8")
    head = text.rindex("\n## ")  # 最後の見出し（まとめ）の前に問を挿入する
    problem = ("\n## 問題：psum_scatter で平均\n\n各デバイスの平均を、reduce-scatter 1 回で返してください。\n\n"
               "```{code-cell} ipython3\ndef psum_scatter_mean(x_blk):\n"
               "    return lax.psum_scatter(x_blk, \"x\", tiled=True) / lax.axis_size(\"x\")\n```\n")
    recap = text[head:].replace("。", "（新しい問も同じ）。", 1)
    md.write_text(text[:head] + problem + recap, encoding="utf-8")
    old = nbrun.read(nb_path)
    assert twins.sync(nb_path, source="md") is True
    new = nbrun.read(nb_path)
    assert len(new.cells) == len(old.cells) + 2
    assert [c.id for c in new.cells[:-3]] == [c.id for c in old.cells[:-1]]
    assert new.cells[-1].id == old.cells[-1].id, "the recap keeps its id"
    fresh = {new.cells[-3].id, new.cells[-2].id}
    assert len(fresh) == 2 and not fresh & {c.id for c in old.cells}
    assert twins.moved_ids(old, new) == []


def _git(*args):
    try:
        r = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout if r.returncode == 0 else None


@pytest.mark.parametrize("base, head", [("HEAD", None), ("HEAD~1", "HEAD")],
                         ids=["work tree vs HEAD", "HEAD vs HEAD~1"])
def test_no_cell_id_moved_to_other_content(base, head):
    """採点は id で演習ノートブックのセルを対応させる: 配った版と次の版で、id が別の中身へ移ってはいけない。"""
    if _git("rev-parse", "--verify", "--quiet", f"{base}^{{commit}}") is None:
        pytest.skip(f"no git history here ({base})")
    found = []
    for path in ALL:
        rel = path.relative_to(ROOT).as_posix()
        before = _git("show", f"{base}:{rel}")
        after = path.read_text(encoding="utf-8") if head is None else _git("show", f"{head}:{rel}")
        if before is None or after is None or before == after:
            continue
        found += [f"{rel}: {line}" for line in
                  twins.moved_ids(nbformat.reads(before, as_version=4), nbformat.reads(after, as_version=4))]
    assert not found, "cell ids moved to other content (sync with tools/twins.py, which keeps ids with content):\n" \
        + "\n".join(found)


def test_exercises_carry_the_solutions_cell_ids():
    for sol in (ROOT / "solutions").glob("*.ipynb"):
        ex = ROOT / "exercises" / sol.name
        if ex.exists():
            assert [c.id for c in nbrun.read(ex).cells] == [c.id for c in nbrun.read(sol).cells], sol.name


# ------------------------------------------------------------------ make lab: レッスンごとに 1 つ（issue 34）

def _lab_contents():
    """make lab と同じ設定（tools/jupyter/jupyter_server_config.json）で、JupyterLab のファイルブラウザが読む一覧。"""
    pytest.importorskip("jupyter_server")
    from jupyter_server.services.contents.filemanager import FileContentsManager
    from traitlets.config.loader import JSONFileConfigLoader

    config = JSONFileConfigLoader("jupyter_server_config.json", str(ROOT / "tools" / "jupyter")).load_config()
    cm = FileContentsManager(root_dir=str(ROOT), config=config)
    return lambda folder: {m["name"] for m in cm.get(folder, content=True)["content"]}


def test_make_lab_uses_the_config():
    lab = (ROOT / "Makefile").read_text(encoding="utf-8").split("\nlab:", 1)[1].split("\n\n", 1)[0]
    assert 'JUPYTER_CONFIG_PATH="$(CURDIR)/tools/jupyter' in lab and "jupyter lab" in lab


def test_make_lab_shows_one_entry_per_lesson():
    listed = _lab_contents()
    for folder in twins.PAIRED:
        names = listed(folder)
        lessons = sorted(p.name for p in (ROOT / folder).glob("*.ipynb"))
        twins_here = [t.name for p in (ROOT / folder).glob("*.ipynb") for t in (twins.md_path(p), twins.outputs_path(p))]
        assert set(lessons) <= names, f"{folder}/: a lesson is hidden"
        assert not names & set(twins_here), f"{folder}/: twins shown: {sorted(names & set(twins_here))}"
    assert {"README.md", "CONTRIBUTING.md", "notebooks", "exercises"} <= listed(""), "hid more than the twins"
    assert sorted(listed("exercises")) == sorted(p.name for p in (ROOT / "exercises").glob("*.ipynb"))
