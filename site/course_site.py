"""講座のウェブサイトのための Sphinx 拡張（site/conf.py が読み込みます）。

- 見出しの安定した id：「5.1 psum」は ``sec-5-1``、番号のない見出しは英字の語と用語集の英語から
  （「## まとめ」は ``sec-summary``、「### 落とし穴：…」は ``sec-2-pitfall``）。作り直しても変わりません。
- 日本語の検索：索引と検索語を同じ規則で切ります。用語集の語（集団通信、シャーディング…）と API 名
  （shard_map、psum_scatter、all-gather…）はひとまとまりの語として索引に入り、検索語も同じように切ります。
- 検索の同義語：用語集の英語（collective、sharding…）でも、その日本語の用語を使うページが見つかります。
- 用語集のページの用語ごとのアンカー（#term-collective）、レッスンの中の用語から用語集へのリンク（ページごとに最初の 1 回）。
- 参照をリンクに：「6.1 の 3 節」→ その節、`exercises/…`・`notebooks/…ipynb` → そのページか GitHub、本文の URL と論文の名前。
- 図の代替テキスト（build_site.py が保存された出力の図の文字の形から作る _figure_alts.json）と、拡大できる印
  （Sphinx が縮めた図を PNG へのリンクで包まないように no-scaled-link も。クリックはページの中で拡大するだけ）。
- 出力に印刷された表（ch6.show.table の「----  ----」の行がある表）は、その行だけを別の箱にして折り返さない
  （電話の幅では箱の中で横にスクロール。表の前後の文は折り返す）。
- API 名をリファレンスへ：本文のコード（`jax.jit`、`lax.psum(x, "i")`、`jnp.einsum`）の中の名前を docs.jax.dev の
  そのページへのリンクに（表は site/jax_api.txt、site/jax_api.py が JAX の docs/ から作る）。
- わざと起こしたエラー（ch6.show.expect_error の出力）の印（CSS が色と見出しを付ける）。
- 画面の文字を日本語に：Sphinx とテーマの訳のない文字列（"Link to this heading" など）を日本語で補います。
- 数式：MathJax 3（pip の sphinx-mathjax-offline が持つもの。build_site.py が作業フォルダに写す）をサイトから配ります。
"""
from __future__ import annotations

import dataclasses
import gettext
import json
import posixpath
import re
import unicodedata
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
        # MyST のページ間のリンク（[6.1 の 3 節](6_1_vmap.ipynb#sec-3)）が安定した id を引けるように
        slugs = self.env.metadata[self.env.docname].setdefault("myst_slugs", {})
        for (depth, section), new, (_, text) in zip(sections, heading_ids(titles), titles):
            if not new or new in section["ids"]:
                continue
            if new in self.document.ids:  # ほかの要素がすでに使っている
                continue
            section["ids"].insert(0, new)
            self.document.ids[new] = section
            slugs.setdefault(new, (depth, new, text))


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
        self.synonyms = {ja: [t for name in names for t in query_terms(name, self.protected)]
                         for ja, names in synonyms().items()}
        self.js_splitter_code = (JS_SPLITTER
                                 .replace("__COURSE_WORDS__", json.dumps(self.protected, ensure_ascii=False))
                                 .replace("__COURSE_SYNONYMS__", json.dumps(synonyms(), ensure_ascii=False)))

    def split(self, input: str) -> list[str]:
        low = input.lower()
        words = super().split(input)
        words += query_terms(low, self.protected)
        found = [w for w in self.protected if w in low]
        words += found
        for w in found:  # 用語集の英語を同義語として（collective で 集団通信 のページが見つかる）
            words += self.synonyms.get(w, [])
        for m in _KANJI_RUN.finditer(low):
            run = m.group()
            words += [run[a:a + n] for n in (2, 3, 4) for a in range(len(run) - n + 1)]
        for m in _ASCII_TOKEN.finditer(low):
            words += identifier_pieces(m.group())
        return words


# ---------------------------------------------------------------- ページの中身を整える

INTENTIONAL = "（わざと起こしたエラーです）"  # ch6.show.INTENTIONAL（ch6 を読み込まずに済むように写し）
# 論文の名前 → その論文（本文で最初に出たところをリンクにする）
PAPERS = {
    "GPipe": "https://arxiv.org/abs/1811.06965",
    "PipeDream": "https://arxiv.org/abs/1806.03377",
    "Megatron-LM": "https://arxiv.org/abs/1909.08053",
    "リングアテンション": "https://arxiv.org/abs/2310.01889",
    "Ring Attention": "https://arxiv.org/abs/2310.01889",
    "Striped Attention": "https://arxiv.org/abs/2311.09431",
    "ストライプ": "https://arxiv.org/abs/2311.09431",
    "Ulysses": "https://arxiv.org/abs/2309.14509",
}
_URL = re.compile(r"https?://[^\s<>「」（）、。)]*[^\s<>「」（）、。).,:;]")
_SECTION_REF = re.compile(r"(6\.\d+[a-z]?) の (\d+(?:\.\d+)*) 節")
_BOX = re.compile(r"[\u2500-\u257f]")  # 罫線の文字（visualize_array_sharding の図など）
_REPO_PATH = re.compile(r"^(notebooks|exercises|solutions)/[\w.\-]+\.ipynb$")
# テキストの中をリンクにしない場所
_SKIP = (nodes.reference, nodes.literal, nodes.literal_block, nodes.title, nodes.term, nodes.raw,
         nodes.math, nodes.math_block, nodes.image, nodes.target, nodes.rubric)


def _staged(env, name: str):
    path = Path(env.srcdir) / name
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def _href(from_doc: str, to_doc: str, anchor: str = "") -> str:
    rel = posixpath.relpath(to_doc + ".html", posixpath.dirname(from_doc) or ".")
    return rel + ("#" + anchor if anchor else "")


def _is_output(node: nodes.Node) -> bool:
    """セルの出力の中か（出力の文字はそのままにする）。"""
    while node is not None:
        if isinstance(node, nodes.container) and "cell_output" in node.get("classes", []):
            return True
        node = node.parent
    return False


def _skipped(node: nodes.Node) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, _SKIP) or "course-links" in parent.get("classes", []):
            return True
        parent = parent.parent
    return False


def _replace_text(text_node: nodes.Text, pattern: re.Pattern, make) -> bool:
    """text_node の中の pattern に合うところを make(match) の節に置き換える（make が None ならそのまま）。"""
    value = str(text_node)
    pieces: list[nodes.Node] = []
    last = 0
    for m in pattern.finditer(value):
        new = make(m)
        if new is None:
            continue
        if m.start() > last:
            pieces.append(nodes.Text(value[last:m.start()]))
        pieces.append(new)
        last = m.end()
    if not pieces:
        return False
    if last < len(value):
        pieces.append(nodes.Text(value[last:]))
    text_node.parent.replace(text_node, pieces)
    return True


class CourseLinks(SphinxTransform):
    """本文の参照をリンクにする：「6.1 の 3 節」、URL、論文の名前、`notebooks/…ipynb` などのパス、用語集の用語。"""

    default_priority = 700

    def apply(self, **kwargs) -> None:
        docname = self.env.docname
        lessons = _staged(self.env, "_lessons.json")  # "6.1" → "notebooks/6_1_vmap"
        ids = _staged(self.env, "_section_ids.json")
        if not lessons:
            return
        # サイトのページになるノートブック：レッスンと演習（exercises/6_1_vmap）
        pages = set(lessons.values()) | set(_staged(self.env, "_exercises.json").values())
        from nbtemplate import repo_url

        def section(m: re.Match):
            doc = lessons.get(m.group(1))
            anchor = "sec-" + m.group(2).replace(".", "-")
            if doc is None or anchor not in ids.get(m.group(1), []):
                return None
            return nodes.reference(m.group(0), m.group(0), refuri=_href(docname, doc, anchor),
                                   classes=["course-section-ref"])

        def url(m: re.Match):
            return nodes.reference(m.group(0), m.group(0), refuri=m.group(0))

        papers_done: set[str] = set()
        paper_re = re.compile("|".join(re.escape(k) for k in sorted(PAPERS, key=len, reverse=True)))

        def paper(m: re.Match):
            target = PAPERS[m.group(0)]
            if target in papers_done:
                return None
            papers_done.add(target)
            return nodes.reference(m.group(0), m.group(0), refuri=target, classes=["course-paper"])

        glossary_done: set[str] = set()
        anchors = {w: a for w, a in term_anchors().items() if a[1].get("gloss")} if docname.startswith("notebooks/") else {}
        term_re = re.compile("|".join(re.escape(w) for w in sorted(anchors, key=len, reverse=True))) if anchors else None
        protected = protected_words()

        def term(m: re.Match):
            word = m.group(0)
            anchor, t = anchors[word]
            if anchor in glossary_done:
                return None
            # 検索の語の切り方と同じ境目のときだけ（長い用語の一部はリンクにしない）
            text = m.string
            longest = next((w for w in protected if text.lower().startswith(w, m.start())), None)
            if longest is not None and len(longest) > len(word):
                return None
            glossary_done.add(anchor)
            return nodes.reference(word, word, refuri=_href(docname, "glossary", anchor),
                                   reftitle=f"{t['ja']}（{t['en']}）：{t['definition']}", classes=["course-term"])

        for text_node in list(self.document.findall(nodes.Text)):
            if _skipped(text_node) or _is_output(text_node):
                continue
            for pattern, make in ((_URL, url), (_SECTION_REF, section), (paper_re, paper)):
                if _replace_text(text_node, pattern, make):
                    break
            else:
                if term_re is not None:
                    _replace_text(text_node, term_re, term)
        # `exercises/6_1_vmap.ipynb` のようなパス → レッスンのページ、または GitHub のファイル
        for lit in list(self.document.findall(nodes.literal)):
            text = lit.astext()
            if not _REPO_PATH.match(text) or isinstance(lit.parent, nodes.reference) or _is_output(lit):
                continue
            stem = Path(text).stem
            folder = text.split("/", 1)[0]
            if folder in ("notebooks", "exercises") and f"{folder}/{stem}" in pages:
                uri = _href(docname, f"{folder}/{stem}")
            else:
                uri = f"{repo_url()}/blob/main/{text}"
            ref = nodes.reference("", "", refuri=uri, classes=["course-path"])
            lit.parent.replace(lit, ref)
            ref += lit


class GlossaryAnchors(SphinxTransform):
    """用語集のページ：用語ごとに安定した id（#term-collective）。"""

    default_priority = 700

    def apply(self, **kwargs) -> None:
        if self.env.docname != "glossary":
            return
        anchors = term_anchors()
        for term in self.document.findall(nodes.term):
            text = term.astext()
            # 用語の行は「日本語（English）」。日本語の用語そのものに（ ）が入ることもある（テンソル並列（TP））
            first = max((w for w in anchors if text.startswith(w)), key=len, default=None)
            if first is not None and anchors[first][0] not in self.document.ids:
                term["ids"].insert(0, anchors[first][0])
                self.document.ids[anchors[first][0]] = term


# 印刷された表の見出しの下の行（ch6.show.table：列ごとの「-」を 2 つの空白でつなぐ）
_TABLE_RULE = re.compile(r"^-{2,}(?: {2}-{2,})*$")


def display_width(text: str) -> int:
    """等幅の表示の幅（全角の文字は 2。ch6.show が表の列をそろえるのと同じ数え方）。"""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def printed_table_parts(text: str) -> list[tuple[str, bool]]:
    """出力の文字を (部分, 表か) に分ける。表は「見出し・----  ----・行」の並びで、行は表の幅を超えない
    空でない行が続くところまで（表の後ろの文は表の幅より長いので表に入らない。入っても表より広くはない）。
    表がなければ [(text, False)]。"""
    lines = text.split("\n")
    parts: list[tuple[list[str], bool]] = []
    plain: list[str] = []
    i = 0
    while i < len(lines):
        rule = lines[i].rstrip()
        head = plain[-1] if plain else ""
        if _TABLE_RULE.match(rule) and head.strip() and display_width(head.rstrip()) <= display_width(rule):
            width = display_width(rule)
            end = i + 1
            while end < len(lines) and lines[end].strip() and display_width(lines[end].rstrip()) <= width:
                end += 1
            plain.pop()
            if plain:
                parts.append((plain, False))
            parts.append(([head, *lines[i:end]], True))
            plain = []
            i = end
            continue
        plain.append(lines[i])
        i += 1
    if plain:
        parts.append((plain, False))
    out = [("\n".join(p).strip("\n"), table) for p, table in parts]
    return [(t, table) for t, table in out if t] or [(text, False)]


def _split_printed_tables(block: nodes.literal_block) -> None:
    """出力の箱を、表の部分と文の部分の箱に分ける（表の箱に course-printed-table、続きの箱に印）。"""
    parts = printed_table_parts(block.astext())
    if not any(table for _, table in parts):
        return
    new = []
    for k, (text, table) in enumerate(parts):
        piece = block.copy()
        piece.rawsource = text
        piece += nodes.Text(text)
        piece["classes"] = list(block["classes"]) + (["course-printed-table"] if table else [])
        if k > 0:
            piece["classes"].append("course-output-cont")
        if k < len(parts) - 1:
            piece["classes"].append("course-output-more")
        new.append(piece)
    block.parent.replace(block, new)


class CourseOutputs(SphinxTransform):
    """セルの出力：図に代替テキストと拡大の印、印刷された表を折り返さない箱に、わざと起こしたエラーの出力に印。"""

    default_priority = 700

    def apply(self, **kwargs) -> None:
        alts = _staged(self.env, "_figure_alts.json")
        for image in self.document.findall(nodes.image):
            stem = Path(image["uri"]).stem
            if stem in alts:
                image["alt"] = alts[stem]
                # no-scaled-link：Sphinx は幅のある図を PNG へのリンクで包む。クリックで拡大するので包ませない
                image["classes"] += ["course-figure", "no-scaled-link"]
        for block in list(self.document.findall(nodes.literal_block)):
            if _is_output(block) and not _BOX.search(block.astext()):
                _split_printed_tables(block)
        for block in self.document.findall(nodes.literal_block):
            if _is_output(block) and _BOX.search(block.astext()):  # 区切り線の図は折り返さない
                block["classes"].append("course-diagram")
            if INTENTIONAL in block.astext() and _is_output(block):
                block["classes"].append("course-intentional-error")
                if isinstance(block.parent, nodes.container):
                    block.parent["classes"].append("course-has-intentional-error")


class ApiLinks(SphinxTransform):
    """本文のコード（`jax.jit`、`lax.psum(x, "i")`）の中の API 名を、JAX の API リファレンスのそのページへ。

    リンクはコードの中の名前の部分だけ（`jax.jit(jax.vmap(f))` なら 2 つ）。セルの入力と出力、見出し、
    すでにリンクの中のコードはそのまま。表（site/jax_api.txt）にない名前は、リファレンスの検索へ。
    """

    default_priority = 710

    def apply(self, **kwargs) -> None:
        import jax_api

        def link(m: re.Match):
            name = m.group(0)
            uri = jax_api.url(name) or f"{jax_api.BASE}search.html?q={jax_api.full_name(name)}"
            return nodes.reference(name, name, refuri=uri, reftitle=jax_api.full_name(name), classes=["course-api"])

        for lit in list(self.document.findall(nodes.literal)):
            if _skipped(lit) or _is_output(lit):
                continue
            for text in list(lit.findall(nodes.Text)):
                if not isinstance(text.parent, nodes.reference):
                    _replace_text(text, jax_api.NAME, link)


# ---------------------------------------------------------------- 画面の文字（日本語）

# Sphinx・pydata-sphinx-theme・sphinx-book-theme の日本語の訳にない（または空の）文字列
UI_JA = {
    "Link to this heading": "この見出しへのリンク",
    "Link to this definition": "この定義へのリンク",
    "Link to this code": "このコードへのリンク",
    "Link to this image": "この図へのリンク",
    "Link to this table": "この表へのリンク",
    "System Settings": "システムの設定",
    "Light": "ライト",
    "Dark": "ダーク",
    "Color mode": "配色",
    "Search": "検索",
    "Search the docs ...": "サイトを検索…",
    "Search...": "検索…",
    "Search Results": "検索結果",
    "Skip to main content": "本文へ移動",
    "Back to top": "ページの先頭へ",
    "Contents": "目次",
    "Download this page": "このページをダウンロード",
    "Fullscreen mode": "全画面表示",
    "Source repository": "ソースのリポジトリ",
    "repository": "リポジトリ",
    "open issue": "課題を報告",
    "Toggle navigation": "ナビゲーションの表示",
    "Toggle secondary sidebar": "目次の表示",
    "Toggle primary sidebar": "ナビゲーションの表示",
    "Site navigation": "サイトのナビゲーション",
    "Section Navigation": "このページの節",
    "Section navigation": "このページの節",
    "On this page": "このページの内容",
    "Print to PDF": "PDF に印刷",
    "previous page": "前のページ",
    "next page": "次のページ",
    "previous": "前へ",
    "next": "次へ",
    "By %(author)s": "作成：%(author)s",
    "By the %(author)s": "作成：%(author)s",
    "Last updated on %(last_updated)s.": "最終更新：%(last_updated)s",
    "Breadcrumb": "現在の位置",
    "Home": "ホーム",
    "Index": "索引",
    "Copyright": "著作権",
    "© Copyright %(copyright)s.": "© %(copyright)s",
    "Copyright %(copyright)s": "© %(copyright)s",
    "Created using %(sphinx_link)s %(sphinx_version)s.": "%(sphinx_link)s %(sphinx_version)s で作りました。",
    "Built with the %(theme_name)s %(theme_version)s.": "%(theme_name)s %(theme_version)s を使っています。",
    "Theme by the %(executable_book_project)s": "テーマ：%(executable_book_project)s",
}
# ブラウザ（translations.js）で使う文字列：検索の件数など
UI_JA_JS = {
    "Search finished, found one page matching the search query.": "検索が終わりました。1 ページが見つかりました。",
    "Search finished, found ${resultCount} pages matching the search query.":
        "検索が終わりました。${resultCount} ページが見つかりました。",
    "Search didn't return any results. Please try again with different keywords.":
        "見つかりませんでした。別の言葉で検索してください。",
    "Searching": "検索しています",
    "Preparing search...": "検索を準備しています…",
    "Search Results": "検索結果",
    "Hide Search Matches": "検索語の強調を消す",
}


class _Fallback(gettext.NullTranslations):
    def gettext(self, message: str) -> str:
        return UI_JA.get(message, message)

    def ngettext(self, singular: str, plural: str, n: int) -> str:
        return UI_JA.get(singular if n == 1 else plural, singular if n == 1 else plural)


def _install_ui_strings(app) -> None:
    """Sphinx とテーマの訳の後ろに、訳のない文字列の日本語を足す（訳があるものはそのまま）。"""
    from sphinx import locale

    for key, translator in list(locale.translators.items()):
        if key[1] in ("sphinx", "booktheme", "pydata_sphinx_theme") and isinstance(translator, gettext.NullTranslations):
            if not getattr(translator, "_course_fallback", False):
                translator.add_fallback(_Fallback())
                translator._course_fallback = True


def _translations_js(app, exception) -> None:
    """サイトの translations.js の空の訳（検索の件数など）を日本語で埋める。"""
    if exception is not None or app.builder.format != "html":
        return
    path = Path(app.outdir) / "_static" / "translations.js"
    if not path.exists():
        return
    text = path.read_text(encoding="utf-8")
    m = re.search(r"Documentation\.addTranslations\((\{.*\})\);", text, re.S)
    data = json.loads(m.group(1))
    one = "Search finished, found one page matching the search query."
    many = "Search finished, found ${resultCount} pages matching the search query."
    # 日本語は単数と複数を分けない（plural_expr が 0）：どの件数でも 1 つ目の形を使う
    data["messages"][one] = [UI_JA_JS[many]]
    for key, value in UI_JA_JS.items():
        if key in (one, many):
            continue
        old = data["messages"].get(key)
        if not old or old == [""] or old == key:
            data["messages"][key] = value
    path.write_text("Documentation.addTranslations(" + json.dumps(data, ensure_ascii=False, indent=4) + ");\n",
                    encoding="utf-8")


# テーマのテンプレートに英語のまま書かれている属性（訳の関数を通らない）
UI_JA_ATTRIBUTES = {
    'title="Toggle primary sidebar"': 'title="ナビゲーションの表示"',
    'title="Toggle secondary sidebar"': 'title="目次の表示"',
    'aria-label="Toggle primary sidebar"': 'aria-label="ナビゲーションの表示"',
    'aria-label="Toggle secondary sidebar"': 'aria-label="目次の表示"',
    'aria-label="Main"': 'aria-label="サイトのナビゲーション"',
    'aria-label="Page"': 'aria-label="このページ"',
}


def _japanese_attributes(app, exception) -> None:
    """テンプレートに英語のまま書かれた title・aria-label を日本語に（書き出した HTML を直す）。"""
    if exception is not None or app.builder.format != "html":
        return
    for path in Path(app.outdir).rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        new = text
        for old, ja in UI_JA_ATTRIBUTES.items():
            new = new.replace(old, ja)
        if new != text:
            path.write_text(new, encoding="utf-8")


def _mathjax_static(app, config) -> None:
    """build_site.py が作業フォルダの _mathjax/ に写した MathJax を、サイトの _static/ に入れる。"""
    folder = Path(app.srcdir) / "_mathjax"
    if folder.exists() and str(folder) not in config.html_static_path:
        config.html_static_path.append(str(folder))


def setup(app):
    app.add_search_language(CourseJapanese)
    app.add_transform(StableHeadingIds)
    app.add_transform(CourseLinks)
    app.add_transform(GlossaryAnchors)
    app.add_transform(CourseOutputs)
    app.add_transform(ApiLinks)
    app.connect("config-inited", _mathjax_static)
    app.connect("builder-inited", _install_ui_strings)
    app.connect("build-finished", _translations_js)
    app.connect("build-finished", _japanese_attributes)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
