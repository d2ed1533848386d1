#!/usr/bin/env python3
"""JAX の API 名（``jax.jit``、``lax.psum``、``jnp.einsum``）→ API リファレンス（docs.jax.dev）のページ。

サイトはオフラインで作るので、リファレンスのどのページに何があるかは、JAX のリポジトリの ``docs/jax*.rst`` から
作った表（``site/jax_api.txt``、1 行に 1 つ）を使います。表の作り直し（JAX のリポジトリの写しがあるところで）::

    python site/jax_api.py --docs PATH/TO/jax/docs      # site/jax_api.txt を書き直す

表の行は ``名前`` か ``名前 ページ#アンカー`` です。前者は autosummary のページ（``_autosummary/名前.html``）、
後者はモジュールのページの中の項目（``jax.sharding.NamedSharding`` → ``jax.sharding.html#jax.sharding.NamedSharding``）
やモジュールそのもの（``jax.numpy`` → ``jax.numpy.html``）です。
"""
from __future__ import annotations

import argparse
import functools
import re
import sys
from pathlib import Path

# docs.jax.dev は最新の JAX の文書だけを公開していて、版ごとの住所（/en/jax-v0.12.0/ など）はありません。JAX の保守者の
# 説明（https://github.com/jax-ml/jax/issues/22709 、2024-07）：版ごとの文書は試したが、古い版の文書を作り直せず、検索
# エンジンが古い版を出して混乱したのでやめた。だからリンクは固定した JAX（requirements.txt）ではなく最新の文書へ行き、
# サイトのフッタがそう書きます（footer_note）。版ごとの文書ができたら、ここを requirements.txt の版から作ります
BASE = "https://docs.jax.dev/en/latest/"
TABLE = Path(__file__).with_name("jax_api.txt")
# 講座が使う短い名前（import jax.numpy as jnp、from jax import lax）
ALIASES = {"jnp": "jax.numpy", "lax": "jax.lax"}
# 本文の中の API 名：jax. / lax. / jnp. で始まる、. でつないだ識別子
NAME = re.compile(r"(?<![\w.\-/:])(?:jax|lax|jnp)(?:\.[A-Za-z_]\w*)+")

_DIRECTIVE = re.compile(r"^\.\.\s+(currentmodule|automodule|module|autosummary|autoclass|autofunction|autodata)::\s*(\S*)")


def parse_docs(docs: Path) -> dict[str, str]:
    """docs/jax*.rst → {完全な名前: ページ（BASE からの相対。autosummary のページは ""）}。"""
    table: dict[str, str] = {}
    for rst in sorted(docs.glob("jax*.rst")):
        page = rst.stem + ".html"
        module = rst.stem
        in_summary = False
        for line in rst.read_text(encoding="utf-8").splitlines():
            m = _DIRECTIVE.match(line.strip()) if line.startswith("..") else None
            if m:
                kind, arg = m.groups()
                in_summary = kind == "autosummary"
                if kind in ("currentmodule", "automodule", "module"):
                    module = arg
                    if kind != "currentmodule" and arg.startswith("jax"):
                        table.setdefault(arg, page if arg == rst.stem else f"{page}#module-{arg}")
                elif kind in ("autoclass", "autofunction", "autodata") and arg:
                    full = arg if arg.startswith("jax.") else f"{module}.{arg}"
                    table.setdefault(full, f"{page}#{full}")
                continue
            if not in_summary:
                continue
            stripped = line.strip()
            if not stripped or stripped.startswith(":"):
                continue
            if not line[:1].isspace():  # 字下げのない行で autosummary の並びが終わる
                in_summary = False
                continue
            if re.fullmatch(r"[A-Za-z_][\w.]*", stripped):
                table[f"{module}.{stripped}"] = ""
    return table


def write_table(table: dict[str, str], path: Path = TABLE) -> None:
    lines = [f"{name} {page}" if page else name for name, page in sorted(table.items())]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@functools.cache
def read_table(path: Path = TABLE) -> dict[str, str]:
    table = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, page = line.partition(" ")
            table[name] = page.strip()
    return table


def full_name(name: str) -> str:
    """lax.psum → jax.lax.psum、jnp.dot → jax.numpy.dot（そのほかはそのまま）。"""
    head, _, rest = name.partition(".")
    return f"{ALIASES[head]}.{rest}" if head in ALIASES and rest else ALIASES.get(name, name)


# API リファレンスに項目のない名前 → それを説明する JAX の文書のページ（BASE からの相対）。JAX のリポジトリの docs/
# （2026-08 の main、0.11.1 の開発版）で、そのページのソースが名前を説明し、目次にあることを確かめたもの。
# 親のページ（jax.lax.html）や検索（search.html?q=…）に行かせないために。
GUIDES = {
    "jax.reshard": "parallel.html",  # docs/parallel.md（jax.reshard と AbstractMesh の例）
    "jax.sharding.reshard": "parallel.html",
    "jax.sharding.AbstractMesh": "parallel.html",
    "jax.lax.pcast": "notebooks/shard_map.html",  # docs/notebooks/shard_map.md（pcast の節）
    "jax.checkpoint_policies": "gradient-checkpointing.html",  # docs/gradient-checkpointing.md（policy の節）
    "jax.ad_checkpoint.print_saved_residuals": "gradient-checkpointing.html",
    "jax.device_put_replicated": "migrate_pmap.html",  # docs/migrate_pmap.md（pmap からの移行）
    "jax.config.update": "config_options.html",  # docs/config_options.rst（設定の一覧）
    "jax.numpy.bfloat16": "default_dtypes.html",  # docs/default_dtypes.md（型）
}


def entry(name: str) -> str | None:
    """名前そのものの項目のページ（BASE からの相対）。表にもガイドにもなければ None（親のページには行かせない）。"""
    full = full_name(name)
    if full in GUIDES:
        return GUIDES[full]
    table = read_table()
    if full in table:
        return table[full] or f"_autosummary/{full}.html"
    return None


def url(name: str) -> str | None:
    """API 名のリファレンスの URL。名前の項目（entry）、それがなければ . で切った親の名前の項目（属性やメソッド：
    jax.Array.shape → jax.Array のページ）。どれもなければ None。
    """
    if entry(name) is not None:
        return BASE + entry(name)
    table = read_table()
    parts = full_name(name).split(".")
    while len(parts) >= 2:
        key = ".".join(parts)
        if key in table:
            page = table[key]
            return BASE + (page or f"_autosummary/{key}.html")
        parts.pop()
    return None


def footer_note(pin: str) -> str:
    """サイトのフッタの 1 文：API 名のリンクは最新の JAX の文書へ行き、講座が固定した JAX（pin）とは違うことがある。"""
    # 画面の部品は日本語だけ（tests/site の test_interface_is_japanese）: リンクの文字も「最新の文書」
    return (f'本文の関数名のリンクは、JAX の<a href="{BASE}">最新の文書</a>へ行きます。'
            f"JAX は版ごとの文書を公開していないので、講座の JAX {pin} と違うところがあるかもしれません。")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=Path, required=True, help="JAX のリポジトリの docs/ フォルダ")
    args = parser.parse_args(argv)
    table = parse_docs(args.docs)
    if not table:
        raise SystemExit(f"{args.docs} に jax*.rst がありません")
    write_table(table)
    print(f"{TABLE.name} に {len(table)} 個の名前を書きました")
    return 0


if __name__ == "__main__":
    sys.exit(main())
