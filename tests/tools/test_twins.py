"""MyST の双子（tools/twins.py）と、JupyterLab で開いても変わらない保存形式。"""
import shutil
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
