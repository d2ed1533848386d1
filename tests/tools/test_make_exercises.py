"""tools/make_exercises.py: 解答の印の置き換えと、演習ノートブックの作り方。"""
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import make_exercises  # noqa: E402


def test_strip_keeps_indentation_and_surroundings():
    src = "def f(x):\n    y = 1\n    ### BEGIN SOLUTION\n    return x + y\n    ### END SOLUTION\n\ncheck('a', f)"
    out = make_exercises.strip_code(src)
    assert out == ("def f(x):\n    y = 1\n    # TODO: ここにコードを書いてください\n    raise NotImplementedError\n"
                   "\ncheck('a', f)")


@pytest.mark.parametrize("src, why", [
    ("### BEGIN SOLUTION\nx = 1\n### END SOLUTION", "inside a function body"),
    ("def f():\n    ### BEGIN SOLUTION\n    return 1", "never closed"),
    ("def f():\n    return 1\n    ### END SOLUTION", "without BEGIN"),
    ("def f():\n    ### BEGIN SOLUTION\n    ### BEGIN SOLUTION\n", "inside another"),
])
def test_strip_rejects_bad_markers(src, why):
    with pytest.raises(make_exercises.MarkerError, match=why):
        make_exercises.strip_code(src)


def test_to_exercise_drops_markdown_solution_and_outputs():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("intro\n<!-- BEGIN SOLUTION -->\nsecret\n<!-- END SOLUTION -->\nend"),
        nbformat.v4.new_code_cell("def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION",
                                  outputs=[nbformat.v4.new_output("stream", text="hi")], execution_count=3),
    ])
    ex = make_exercises.to_exercise(nb)
    assert ex.cells[0].source == "intro\nend"
    assert ex.cells[1].outputs == [] and ex.cells[1].execution_count is None
    assert "return 1" not in ex.cells[1].source
    assert "return 1" in nb.cells[1].source  # 元は変えない
