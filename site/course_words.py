"""講座のサイトの語：用語集の用語・英語の同義語・用語集のアンカーと、見出しの安定した id（course_site.py が使います）。"""
from __future__ import annotations

import dataclasses
import re

# ---------------------------------------------------------------- 用語集


def glossary_terms() -> list[dict]:
    """用語集の用語（ch6.glossary が ch6/glossary.toml から読む）。"""
    from ch6 import glossary

    return [dataclasses.asdict(t) for t in glossary.terms()]


def glossary_words() -> list[str]:
    """用語集の日本語の用語（「ローカル／グローバル」は 2 語）。"""
    words: list[str] = []
    for term in glossary_terms():
        for w in re.split(r"[／/]", term["ja"]):
            w = w.strip()
            if w and w not in words:
                words.append(w)
    return words


def _english_names(en: str) -> list[str]:
    """"tensor parallelism (TP)" → ["tensor parallelism", "tp"]、"local / global" → ["local", "global"]。"""
    names = []
    for part in re.split(r"\s*/\s*", en):
        inner = re.findall(r"\(([^)]*)\)", part)
        outer = re.sub(r"\([^)]*\)", " ", part).strip()
        for name in [outer, *inner]:
            name = " ".join(name.lower().split())
            if name and name not in names:
                names.append(name)
    return names


def synonyms() -> dict[str, list[str]]:
    """日本語の用語（小文字）→ その英語の名前（検索の同義語）。「ローカル／グローバル」は語ごとに対にする。"""
    out: dict[str, list[str]] = {}
    for term in glossary_terms():
        ja = [w.strip() for w in re.split(r"[／/]", term["ja"]) if w.strip()]
        en = [e for e in re.split(r"\s*/\s*", term["en"]) if e.strip()]
        pairs = zip(ja, en) if len(ja) == len(en) else [(w, term["en"]) for w in ja]
        for w, e in pairs:
            names = [n for n in _english_names(e) if n != w.lower()]
            if names and not w.isascii():
                out.setdefault(w.lower(), [])
                out[w.lower()] += [n for n in names if n not in out[w.lower()]]
    return out


def term_anchor(term: dict) -> str:
    """用語集のページでの用語の id：英語の名前から（"collective" → term-collective）。"""
    name = _english_names(term["en"])[0]
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return "term-" + (slug or re.sub(r"[^a-z0-9]+", "-", term["ja"].lower()).strip("-"))


def term_anchors() -> dict[str, tuple[str, dict]]:
    """日本語の用語（「ローカル」「グローバル」は別々に）→ (id, 用語)。"""
    out = {}
    for term in glossary_terms():
        for w in re.split(r"[／/]", term["ja"]):
            if w.strip():
                out[w.strip()] = (term_anchor(term), term)
    return out


# ---------------------------------------------------------------- 見出しの id

# 番号のない見出しによく出る語（用語集にないもの）の英語
HEADING_WORDS = {
    "まとめ": "summary",
    "先取り": "preview",
    "流れ図": "flowchart",
    "早見表": "cheatsheet",
    "先生方へ": "teachers",
    "はじめ方": "start",
    "ノートブック": "notebooks",
    "演習": "exercises",
    "採点": "grading",
    "配布": "distribution",
    "開発者向け": "developers",
    "使わない言い方": "rejected",
    "公開": "publish",
    "複数プロセス": "multiprocess",
}

_NUMBER = re.compile(r"^\s*(\d+(?:\.\d+)+|\d+\.)(?=\s|$)")
_ASCII_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def _translations() -> dict[str, str]:
    table = dict(HEADING_WORDS)
    for term in glossary_terms():
        en = term["en"].split("(")[0].strip()
        for ja, e in zip(re.split(r"[／/]", term["ja"]), re.split(r"\s*/\s*", en)):
            if not ja.isascii():
                table.setdefault(ja.strip(), e)
    return table


def _slug_words(title: str, table: dict[str, str]) -> list[str]:
    """見出しの英字の語と、表にある日本語の語（の英語）を、現れる順に。"""
    found: list[tuple[int, str]] = [(m.start(), m.group()) for m in _ASCII_WORD.finditer(title)]
    taken = [False] * len(title)
    for ja in sorted(table, key=len, reverse=True):
        for m in re.finditer(re.escape(ja), title):
            if not any(taken[m.start():m.end()]):
                taken[m.start():m.end()] = [True] * len(ja)
                found.append((m.start(), table[ja]))
    words = []
    for _, w in sorted(found):
        w = re.sub(r"[^a-z0-9]+", "-", w.lower()).strip("-")
        if w and w not in words:
            words.append(w)
    return words[:2]


def heading_ids(headings: list[tuple[int, str]]) -> list[str]:
    """(深さ, 見出し) の並びから、安定した id の並び。深さ 1（ページの題）は "" のまま。

    番号のある見出しは番号から（「5.1 psum」→ sec-5-1、「5. 集団通信」→ sec-5）。
    番号のない見出しは親の id に語を足す（親が番号 2 の「落とし穴：…」→ sec-2-pitfall）。
    語がなければ親の中での順番（h3 など）。同じ id が 2 度出たら -2、-3 を付ける。
    """
    table = _translations()
    ids: list[str] = []
    used: set[str] = set()
    parents: list[tuple[int, str]] = []  # (深さ, id)
    counts: dict[tuple[int, str], int] = {}
    for depth, title in headings:
        while parents and parents[-1][0] >= depth:
            parents.pop()
        if depth <= 1:
            ids.append("")
            parents.append((depth, "sec"))
            continue
        parent = parents[-1][1] if parents else "sec"
        key = (depth, parent)
        counts[key] = counts.get(key, 0) + 1
        number = _NUMBER.match(title)
        if number:
            new = "sec-" + "-".join(p for p in number.group(1).split(".") if p)
        else:
            words = _slug_words(title, table)
            new = f"{parent}-{'-'.join(words) if words else f'h{counts[key]}'}"
        base, k = new, 2
        while new in used:
            new, k = f"{base}-{k}", k + 1
        used.add(new)
        ids.append(new)
        parents.append((depth, new))
    return ids
