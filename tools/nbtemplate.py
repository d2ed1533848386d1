#!/usr/bin/env python3
"""ノートブックの決まった部品: Colab バッジと、最初のセットアップセル。

リポジトリの住所は pyproject.toml の [project.urls] Repository だけに書きます。
住所を変えたら ``python tools/nbtemplate.py --stamp`` で README と全ノートブックのバッジと
セットアップセルを書き換えます（tests/test_consistency.py が食い違いを見つけます）。
ノートブックを作るスクリプトは ``badge(path)`` と ``setup_cell()`` を使ってください。
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


def setup_head() -> str:
    """どのノートブックも最初のコードセルをこの文字列で始める（続きは自由）。"""
    return f'''import os
import sys

# CPU だけのマシンでも 8 デバイスあるように見せる（GPU/TPU 上では実デバイスが使われる）
os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")
try:
    import ch6  # 講座の補助パッケージ（ローカルでは make lab が導入済み）
except ImportError:  # Colab など: 講座のリポジトリから導入する
    import subprocess

    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "git+{repo_url()}"], check=True)
    import ch6
'''


def setup_cell(extra: str = "") -> str:
    """標準のセットアップセル。extra は import の後に足す行。"""
    return setup_head() + f'''
import jax
import jax.numpy as jnp
import numpy as np

np.set_printoptions(precision=4, suppress=True)
jax.config.update("jax_pprint_use_color", False)  # jaxpr を色なしで表示（保存した出力を読みやすく）
{extra.strip()}
n_devices = ch6.show_devices()'''.replace("\n\nn_devices", "\nn_devices")


BADGE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)")


_COLAB_PREFIX = re.compile(r"https://colab\.research\.google\.com/github/[^/\s)]+/[^/\s)]+/blob/main/")
_INSTALL = re.compile(r'git\+https://github\.com/[^/\s"]+/[^/\s"]+')


def restamp(text: str) -> str:
    """Colab のリンクと pip のインストール先を、pyproject.toml の住所に合わせる。"""
    text = _COLAB_PREFIX.sub(colab_url(""), text)
    return _INSTALL.sub(f"git+{repo_url()}", text)


def stamp(path: Path) -> bool:
    """ノートブック（セルごと）や README の住所を書き換える。変えたら True。"""
    if path.suffix != ".ipynb":
        old = path.read_text(encoding="utf-8")
        new = restamp(old)
        if new != old:
            path.write_text(new, encoding="utf-8")
        return new != old
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    changed = False
    for cell in nb.cells:
        new = restamp(cell.source)
        if new != cell.source:
            cell.source, changed = new, True
    if changed:
        path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
    return changed


if __name__ == "__main__":
    if sys.argv[1:] != ["--stamp"]:
        print(__doc__)
        sys.exit(2)
    for p in [ROOT / "README.md"] + [p for f in FOLDERS for p in sorted((ROOT / f).glob("*.ipynb"))]:
        if stamp(p):
            print(f"stamped {p.relative_to(ROOT)}")
