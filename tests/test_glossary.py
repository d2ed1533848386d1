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
