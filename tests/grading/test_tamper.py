"""ch6.grading.tamper: 配った演習ノートブックとの違いと、改ざんの手がかり（カーネルなし）。"""
from __future__ import annotations

import copy
import re
from pathlib import Path

import nbformat
import pytest

from ch6.grading import exercises
from ch6.grading.tamper import TAMPER, longest_increasing, structure_notes
from tests.grade_class import problem_heading

ROOT = Path(__file__).resolve().parents[2]
EXERCISE = ROOT / "exercises" / "6_1_vmap.ipynb"
CALLS_CHANGED = "チェックの呼び出しが書き換えられたか消されています（{}）。採点は講座のチェックで行いました。"


@pytest.fixture(scope="module")
def given():
    nb = nbformat.read(str(EXERCISE), as_version=4)
    return nb, exercises.from_notebook(EXERCISE.stem, nb)


def _cell_with(nb, pattern):
    return next(c for c in nb.cells if c.cell_type == "code" and re.search(pattern, c.source, re.M))


def _replace_call(nb, eid, line):
    call = rf"check\(\s*[\"']{re.escape(eid)}[\"']"
    cell = _cell_with(nb, call)
    cell.source = re.sub(rf"^.*{call}.*$", line, cell.source, flags=re.M)


def test_structure_notes_are_quiet_for_untouched_and_filled_notebooks(given):
    ex, a = given
    nb = copy.deepcopy(ex)
    assert structure_notes(nb, a) == []
    for c in nb.cells:  # 別のツールで保存されてセルの id が変わっても、内容と関数名で対応がつく
        c.id = "x" + c.id
    first, second = a.ids[:2]
    cell = _cell_with(nb, rf"^def {a.titles[first]}\(")
    cell.source = re.sub(rf"def {a.titles[first]}\(.*\n(    .*\n)+", f"def {a.titles[first]}(*args, unused=None):\n"
                         "    return args\n", cell.source)
    nb.cells.insert(3, nbformat.v4.new_markdown_cell("メモ: 学習者が足したセルは数えません"))
    _replace_call(nb, second, f"ch6.check( '{second}', {a.titles[second]} )  # できた!")
    assert structure_notes(nb, a) == []
    _replace_call(nb, second, f"# ch6.check('{second}', {a.titles[second]})")
    assert structure_notes(nb, a) == [CALLS_CHANGED.format(second)]


def test_deleted_and_moved_cells(given):
    ex, a = given
    nb = copy.deepcopy(ex)
    last, before = (f"def {a.titles[i]}(" for i in a.ids[-1:-3:-1])
    md = problem_heading(nb, a.titles[a.ids[1]])  # 2 問目の見出しのセル
    deleted = nb.cells.pop(md)
    six = next(i for i, c in enumerate(nb.cells) if last in c.source)
    five = next(i for i, c in enumerate(nb.cells) if before in c.source)
    moved = nb.cells[six]
    nb.cells.insert(five, nb.cells.pop(six))
    ref_moved = next(i for i, c in enumerate(ex.cells) if last in c.source)
    assert structure_notes(nb, a) == [
        f"演習ノートブックのセルが 1 個見つかりません（削除?）: {md + 1} 番目「{exercises.snippet_of(deleted.source)}」。",
        f"セルの順番が演習ノートブックと違います（1 個が移動: 演習ノートブックの {ref_moved + 1} 番目"
        f"「{exercises.snippet_of(moved.source)}」など）。"]


def test_tamper_patterns_look_only_at_the_learners_cells(given):
    ex, a = given
    # 配ったままのセットアップのセルは importlib を使う: それは備考にしない
    assert any("importlib" in c.source for c in ex.cells)
    assert structure_notes(ex, a) == []
    nb = copy.deepcopy(ex)
    nb.cells.append(nbformat.v4.new_code_cell("import importlib, sys\nsys.meta_path.insert(0, object())"))
    nb.cells.append(nbformat.v4.new_code_cell("ch6.check = lambda *a: print('✅')"))
    assert structure_notes(nb, a) == [
        "ch6 のチェックを置き換えるコードがあります（採点には影響しません）。",
        "採点に使う仕組み（sys.meta_path, importlib）に触れるコードがあります。"
        "採点は改ざんを検出するだけで防げないので、結果とコードを確かめてください。"]
    # 参照のセルが分からなければ（登録表からの節ごとの演習）、すべてのコードを見る
    bare = exercises.Assignment(a.name, a.ids, a.titles)
    assert "importlib" in structure_notes(ex, bare)[0]


@pytest.mark.parametrize("code, name", [
    ("from IPython.display import display", "IPython.display"),
    ("get_ipython().display_pub.publish = print", "IPython.display"),
    ("import builtins\nbuiltins.print = len", "builtins"),
    ("get_ipython().input_transformers_post.append(f)", "input_transformers"),
    ("get_ipython().events.register('post_run_cell', f)", "events.register"),
    ("__ch6_grader__ = None", "__ch6_grader__"),
    ("import sys\nsys.path_importer_cache[folder] = Finder()", "sys.path_importer_cache"),
])
def test_each_tamper_pattern(given, code, name):
    ex, a = given
    assert name in dict(TAMPER)
    nb = copy.deepcopy(ex)
    nb.cells.append(nbformat.v4.new_code_cell(code))
    notes = structure_notes(nb, a)
    assert len(notes) == 1 and f"（{name}）" in notes[0], notes


def test_longest_increasing():
    assert longest_increasing([]) == set()
    assert longest_increasing([0, 1, 2]) == {0, 1, 2}
    assert longest_increasing([0, 3, 1, 2]) == {0, 2, 3}
