"""用語集（ch6/glossary.toml）: GLOSSARY.md と一致し、ノートブックの文章は使わない言い方を含まない。"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ch6 import glossary

ROOT = Path(__file__).resolve().parent.parent
PROSE_NOTEBOOKS = sorted(p for f in ("notebooks", "solutions") for p in (ROOT / f).glob("*.ipynb"))
IDS = [p.relative_to(ROOT).as_posix() for p in PROSE_NOTEBOOKS]


def test_glossary_md_is_generated_from_the_toml():
    assert (ROOT / "GLOSSARY.md").read_text(encoding="utf-8") == glossary.markdown(), \
        "GLOSSARY.md is stale: python -m ch6.glossary --write GLOSSARY.md"


def test_one_term_per_concept():
    ja = [t.ja for t in glossary.terms()]
    en = [t.en.lower() for t in glossary.terms()]
    assert len(ja) == len(set(ja)) and len(en) == len(set(en))
    for t in glossary.terms():
        assert t.definition.endswith("。") and len(t.definition) < 120, t.ja


def test_rejected_list_covers_what_the_editor_found():
    text = " ".join(r.pattern for r in glossary.rejected())
    for word in ("集団演算", "置き方", "断片", "詰め物", "旧式", "各台", "つまずき", "ランチャー", "住所", "顔合わせ",
                 "手目", "工場関数", "見張り", "正直に", "切れ端"):
        assert word in text, word
    for r in glossary.rejected():
        re.compile(r.pattern)
        for t in glossary.terms():
            assert not re.search(r.pattern, t.ja), f"the glossary term {t.ja} is itself rejected by {r.pattern}"


def test_scan_finds_prose_and_comments_but_not_strings():
    nb = {"cells": [{"cell_type": "markdown", "source": "集団演算です"},
                    {"cell_type": "code", "source": 'x = "旧式"  # 各台で\nprint(1)'}]}
    found = glossary.scan(nb)
    assert len(found) == 2 and "集団通信" in found[0] and "デバイス" in found[1]


@pytest.mark.parametrize("path", PROSE_NOTEBOOKS, ids=IDS)
def test_notebook_prose_uses_the_glossary(path):
    found = glossary.scan(json.loads(path.read_text(encoding="utf-8")))
    assert not found, "\n".join(found[:20])


# issue 22: 種類ごとに、直す前の文が見つかり、同じ語の正しい使い方は見つからないこと
CAUGHT = [
    "もしエラーが起きなければ、そこで大きく失敗します",            # 直訳
    "値をまとめて表す束（トレーサ）です",
    "両方とも実行されるぶんの費用がかかる",
    "命令を出す費用が目立ちます",
    "1 つのデバイス分のように見せかけます",
    "### `psum`：全デバイスの合計を、全員が受け取る",              # デバイスを人として書く
    "### `ppermute`：決めた相手に送る",
    "各デバイスが自分の行を 2 倍するだけです",
    "| シャーディングを決めるのは | あなた |",                       # 話し言葉
    "ちなみに、ここで",
    "素直に考えると「A を集める」です",
    "ほんのいっときとはいえ",
    "本物の GPU / TPU でないと",                                     # 用語の揺れ
    "集団演算を入れる",
    "各デバイスのブロックは (2,) です",
    "自分のブロック → 全員のブロック",
    "保存される活性化のバイト数",
    "活性のメモリ",
    "MLP の forward（推論）を",
    "backward では勾配を",
    "前向きの活性値を保存します",
    "同じ鍵を全デバイスに渡し",
    "バッチを data 軸で分け、パラメータは複製",
    "配列を複数のデバイスに分けて置く",
    "パラメータを P() に置き、",
]
ALLOWED = [
    "ヒストグラムのビンの分け方は bins で決めます",                   # issue 19
    "マイクロバッチへの分け方は自由です",
    "ステップの費用とメモリ",                                         # cost（費用）はそのまま
    "通信を自分で書きます",
    "自分の環境でどう数えられるかは",
    "活性化関数は tanh です",
    "2 層の MLP の順伝播（forward）を",
    "1F1B（one forward, one backward）は",
    "K/V のブロックを ppermute で回します",
    "活性値を保存します",
    "乱数キーを分けます",
    "データを data 軸で分割し、パラメータは複製します",
    "行数はデバイスの数で割り切れる必要があります",
    "block_until_ready() で待ちます",
]


def _hits(sentence):
    return glossary.scan({"cells": [{"cell_type": "markdown", "source": sentence}]})


@pytest.mark.parametrize("sentence", CAUGHT)
def test_each_kind_of_rejected_wording_is_caught(sentence):
    assert _hits(sentence), sentence


@pytest.mark.parametrize("sentence", ALLOWED)
def test_ordinary_uses_of_the_same_words_are_allowed(sentence):
    assert not _hits(sentence), _hits(sentence)


def test_readme_prose_uses_the_glossary():
    found = glossary.scan({"cells": [{"cell_type": "markdown", "source": (ROOT / "README.md").read_text(encoding="utf-8")}]})
    assert not found, "\n".join(found[:20])
