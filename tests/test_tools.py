"""tools/: 解答の印の置き換え、カウンタ、バッジとセットアップセル。"""
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import make_exercises  # noqa: E402
import nbtemplate  # noqa: E402


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


def test_setup_cell_is_short_installs_from_the_repo_and_calls_setup():
    cell = nbtemplate.setup_cell()
    assert len(cell.splitlines()) <= 12
    assert f"git+{nbtemplate.repo_url()}" in cell
    assert cell.rstrip().splitlines()[-1].startswith("n_devices = ch6.setup()")
    assert "import jax" not in cell  # JAX は ch6.setup() が JAX_NUM_CPU_DEVICES を決めてから読み込む


def test_badge_points_at_the_notebook():
    b = nbtemplate.badge("notebooks/6_1_vmap.ipynb")
    assert b.startswith("[![Open In Colab]") and b.endswith("/blob/main/notebooks/6_1_vmap.ipynb)")


def test_restamp_moves_every_address_to_the_configured_repository():
    text = ("[x](https://colab.research.google.com/github/old/repo/blob/main/notebooks/a.ipynb) "
            '"git+https://github.com/old/repo"')
    new = nbtemplate.restamp(text)
    assert "old/repo" not in new
    assert nbtemplate.colab_url("notebooks/a.ipynb") in new and f"git+{nbtemplate.repo_url()}" in new
    assert nbtemplate.restamp(new) == new
