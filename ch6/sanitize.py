"""出力のうち、実行のたびや機械ごとに変わる部分（アドレス、時間、セルのファイル名など）を整える規則。

規則は同じフォルダの ``nbval_sanitize.cfg`` の 1 か所だけに書き、nbval（テスト）、保存する出力、
ノートブックのエラー表示（:func:`ch6.show.expect_error`）がすべてこれを使います。
パッケージのデータとして入るので、リポジトリのない環境（Colab・wheel）でも同じ規則が働きます。
"""
from __future__ import annotations

import configparser
import functools
import re
from importlib import resources

CFG_NAME = "nbval_sanitize.cfg"


def cfg_text() -> str:
    return resources.files(__package__).joinpath(CFG_NAME).read_text(encoding="utf-8")


@functools.cache
def rules() -> tuple[tuple[re.Pattern, str], ...]:
    """(正規表現, 置き換え) の組。"""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(cfg_text())
    return tuple((re.compile(parser[s]["regex"]), parser[s]["replace"]) for s in parser.sections())


def clean(text: str) -> str:
    """規則をすべて当てた文字列（何度当てても同じ結果）。"""
    for pattern, repl in rules():
        text = pattern.sub(repl, text)
    return text
