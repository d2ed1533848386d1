"""tools/nbtemplate.py: バッジとセットアップセル、リポジトリの住所の書き換え。"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import nbtemplate  # noqa: E402


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
