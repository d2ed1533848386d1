"""講座のウェブサイトのための Sphinx 拡張（site/conf.py が読み込みます）。

- 見出しの安定した id：「5.1 psum」は ``sec-5-1``、番号のない見出しは英字の語と用語集の英語から
  （「## まとめ」は ``sec-summary``、「### 落とし穴：…」は ``sec-2-pitfall``）。作り直しても変わりません。
- 日本語の検索：索引と検索語を同じ規則で切ります。用語集の語（集団通信、シャーディング…）と API 名
  （shard_map、psum_scatter、all-gather…）はひとまとまりの語として索引に入り、検索語も同じように切ります。
- 数式：MathML（docutils の変換器）で書き出し、外部の MathJax を読み込みません（オフラインで表示できます）。
"""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from docutils import nodes
from sphinx.search.ja import SearchJapanese
from sphinx.transforms import SphinxTransform

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


class StableHeadingIds(SphinxTransform):
    """各節の id の先頭に安定した id を置く（もとの id1 なども残すので、ほかの参照は壊れない）。"""

    # Sphinx の DoctreeReadEvent（880：目次を集める doctree-read）より前に
    default_priority = 600

    def apply(self, **kwargs) -> None:
        sections: list[tuple[int, nodes.section]] = []

        def walk(node: nodes.Node, depth: int) -> None:
            for child in node.children:
                if isinstance(child, nodes.section):
                    sections.append((depth + 1, child))
                    walk(child, depth + 1)
                elif isinstance(child, nodes.Element):
                    walk(child, depth)

        walk(self.document, 0)
        titles = []
        for depth, section in sections:
            title = next((c for c in section.children if isinstance(c, nodes.title)), None)
            titles.append((depth, title.astext() if title is not None else ""))
        for (_, section), new in zip(sections, heading_ids(titles)):
            if not new or new in section["ids"]:
                continue
            if new in self.document.ids:  # ほかの要素がすでに使っている
                continue
            section["ids"].insert(0, new)
            self.document.ids[new] = section


# ---------------------------------------------------------------- 検索

_ASCII_TOKEN = re.compile(r"[a-z0-9_]+(?:[.\-][a-z0-9_]+)*")
_KANJI_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\u3005]{3,}")


def _is_run_char(ch: str) -> bool:
    """ひとまとまりに続ける文字：ASCII とひらがな以外の文字と数字（漢字・カタカナ・長音符など）。"""
    return not ch.isascii() and not ("\u3040" <= ch <= "\u309f") and ch.isalnum()


def protected_words() -> list[str]:
    """ひとまとまりに扱う日本語の語（用語集から。英字だけの語は API 名の規則で扱う）、長い順。"""
    return sorted({w.lower() for w in glossary_words() if not w.isascii()}, key=len, reverse=True)


def query_terms(text: str, protected: list[str]) -> list[str]:
    """検索語の切り方（search_splitter.js の splitQuery と同じ規則）。

    用語集の語はそのまま 1 語、英字・数字・_ を . や - でつないだもの（jax.lax.psum_scatter、all-gather）は 1 語、
    ほかは漢字・カタカナの続き（ひらがなと記号で切る）。何も残らなければ空白で切る。
    """
    text = text.lower()
    out: list[str] = []
    run = ""
    i = 0
    while i < len(text):
        word = next((w for w in protected if text.startswith(w, i)), None)
        if word is None:
            m = _ASCII_TOKEN.match(text, i)
            if m:
                word = m.group()
        if word is not None:
            if run:
                out.append(run)
                run = ""
            out.append(word)
            i += len(word)
            continue
        if _is_run_char(text[i]):
            run += text[i]
        elif run:
            out.append(run)
            run = ""
        i += 1
    if run:
        out.append(run)
    return out or text.split()


def identifier_pieces(token: str) -> list[str]:
    """API 名の部分：. と - で切った各部分と、その中の _ でつないだ続き（jax.make_jaxpr → make_jaxpr, jaxpr …）。

    Sphinx の検索は、索引にちょうど同じ語があると部分一致を探さないので（shard_map があると
    6_3b_shard_map を見ない）、ページが使う API 名は部分もそれぞれ語として入れておきます。
    """
    pieces = []
    for segment in re.split(r"[.\-]", token):
        parts = [p for p in segment.split("_") if p][:8]
        pieces += ["_".join(parts[a:b]) for a in range(len(parts)) for b in range(a + 1, len(parts) + 1)]
    return [p for p in pieces if p != token]


JS_SPLITTER = (Path(__file__).parent / "search_splitter.js").read_text(encoding="utf-8")


class CourseJapanese(SearchJapanese):
    """日本語の検索：Sphinx の TinySegmenter の語に、講座の語をひとまとまりで足す。

    TinySegmenter は「集団通信」を 集団 / 通信、「psum_scatter」を psum / _scatter に切るので、そのままでは
    検索語（ブラウザでは 集団通信、psum_scatter のまま）と合いません。索引には query_terms() の語と、
    用語集の語（文中に現れたもの）、漢字の続きの 2〜4 文字、API 名の . と - で切った部分も入れます。
    """

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.protected = protected_words()
        self.js_splitter_code = JS_SPLITTER.replace("__COURSE_WORDS__", json.dumps(self.protected, ensure_ascii=False))

    def split(self, input: str) -> list[str]:
        low = input.lower()
        words = super().split(input)
        words += query_terms(low, self.protected)
        words += [w for w in self.protected if w in low]
        for m in _KANJI_RUN.finditer(low):
            run = m.group()
            words += [run[a:a + n] for n in (2, 3, 4) for a in range(len(run) - n + 1)]
        for m in _ASCII_TOKEN.finditer(low):
            words += identifier_pieces(m.group())
        return words


# ---------------------------------------------------------------- 数式（MathML）


def _mathml(latex: str, block: bool) -> str:
    from docutils.utils.math import latex2mathml

    return latex2mathml.tex2mathml(latex, as_block=block)


def _visit_math(self, node: nodes.Element) -> None:
    self.body.append(_mathml(node.astext(), block=False))
    raise nodes.SkipNode


def _visit_displaymath(self, node: nodes.Element) -> None:
    self.body.append(f'<div class="math-block">{_mathml(node.astext(), block=True)}</div>')
    raise nodes.SkipNode


def setup(app):
    app.add_search_language(CourseJapanese)
    app.add_transform(StableHeadingIds)
    app.add_html_math_renderer("mathml", (_visit_math, None), (_visit_displaymath, None))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
