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


def test_stamp_replaces_a_file_whole_and_never_empties_it(tmp_path, monkeypatch):
    """stamp は写しに書いてから置き換える（ch6.nbrun.write_text）：置き換える瞬間まで元のファイルは元のまま、写しは
    書き終わっている。Path.write_text のように先にファイルを空にすると、同じときに読むものが空のノートブックを読む。"""
    import nbformat

    import ch6.nbrun

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('old setup')"),
                                         nbformat.v4.new_markdown_cell("[x](https://colab.research.google.com/github/old/repo/blob/main/a.ipynb)")])
    path = tmp_path / "a.ipynb"
    nbformat.write(nb, str(path))
    readme = tmp_path / "README.md"
    readme.write_text('"git+https://github.com/old/repo"\n', encoding="utf-8")
    seen = []
    real_replace = ch6.nbrun.os.replace

    def replace(src, dst):
        seen.append((Path(dst).name, Path(dst).read_text(encoding="utf-8"), Path(src).read_text(encoding="utf-8")))
        real_replace(src, dst)

    monkeypatch.setattr(ch6.nbrun.os, "replace", replace)
    old_nb, old_readme = path.read_text(encoding="utf-8"), readme.read_text(encoding="utf-8")
    assert nbtemplate.stamp(path) and nbtemplate.stamp(readme)
    assert [(name, before) for name, before, _ in seen] == [("a.ipynb", old_nb), ("README.md", old_readme)]
    assert [after for _, _, after in seen] == [path.read_text(encoding="utf-8"), readme.read_text(encoding="utf-8")]
    stamped = nbformat.read(str(path), as_version=4)
    assert stamped.cells[0].source == nbtemplate.setup_cell() and "old/repo" not in stamped.cells[1].source
    assert path.read_text(encoding="utf-8").endswith("}\n") and sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "a.ipynb"]
    assert not nbtemplate.stamp(path)  # 2 度目は何も変えない
