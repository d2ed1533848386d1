#!/usr/bin/env python3
"""ノートブックの決まった部品: Colab バッジと、最初のセットアップセル。

リポジトリの住所は pyproject.toml の [project.urls] Repository だけに書きます。
住所を変えたら ``python tools/nbtemplate.py --stamp`` で README と全ノートブックのバッジと
セットアップセルを書き換えます（tests/test_consistency.py が食い違いを見つけます）。
ノートブックを作るスクリプトは ``badge(path)`` と ``setup_cell()`` を使ってください。\n``--stamp`` は全ノートブックの最初のコードセルも ``setup_cell()`` に揃えます。
"""
from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("notebooks", "solutions", "exercises")


def repo_url() -> str:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return data["project"]["urls"]["Repository"].rstrip("/")


def colab_url(relpath: str) -> str:
    slug = repo_url().removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{slug}/blob/main/{relpath}"


def badge(relpath: str) -> str:
    """例: badge("notebooks/6_1_vmap.ipynb")"""
    return f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab_url(relpath)})"


def setup_cell() -> str:
    """どのノートブックも最初のコードセルがこの文字列と完全に同じ（テストが確かめる）。
    ノートブックごとの import は次のセルに書きます。"""
    return f'''# 講座の補助パッケージ ch6 を読み込み、JAX とデバイスを準備します
import importlib.util
import subprocess
import sys

if importlib.util.find_spec("ch6") is None:  # Colab・Kaggle など: 講座のリポジトリから入れる
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "git+{repo_url()}"], check=True)
import ch6

n_devices = ch6.setup()  # GPU/TPU でも CPU の模擬デバイスを使うなら ch6.setup(cpu=True)'''


BADGE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)")


_COLAB_PREFIX = re.compile(r"https://colab\.research\.google\.com/github/[^/\s)]+/[^/\s)]+/blob/main/")
_INSTALL = re.compile(r'git\+https://github\.com/[^/\s"]+/[^/\s"]+')


def restamp(text: str) -> str:
    """Colab のリンクと pip のインストール先を、pyproject.toml の住所に合わせる。"""
    text = _COLAB_PREFIX.sub(colab_url(""), text)
    return _INSTALL.sub(f"git+{repo_url()}", text)


def stamp(path: Path) -> bool:
    """README の住所、ノートブックのリンクと最初のコードセル（setup_cell()）を揃える。変えたら True。
    書き込みは写しに書いてから置き換えます（ch6.nbrun）：同じときに読むものが空のファイルを読まない。"""
    from ch6.nbrun import write, write_text

    if path.suffix != ".ipynb":
        old = path.read_text(encoding="utf-8")
        new = restamp(old)
        if new != old:
            write_text(path, new)
        return new != old
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    changed = False
    for cell in nb.cells:
        new = restamp(cell.source)
        if new != cell.source:
            cell.source, changed = new, True
    first = next((c for c in nb.cells if c.cell_type == "code"), None)
    if first is not None and first.source != setup_cell():
        first.source, changed = setup_cell(), True
    if changed:
        write(nb, path)
    return changed


if __name__ == "__main__":
    if sys.argv[1:] != ["--stamp"]:
        print(__doc__)
        sys.exit(2)
    for p in [ROOT / "README.md"] + [p for f in FOLDERS for p in sorted((ROOT / f).glob("*.ipynb"))]:
        if stamp(p):
            print(f"stamped {p.relative_to(ROOT)}")
