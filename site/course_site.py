"""講座のウェブサイトのための Sphinx 拡張（site/conf.py が読み込みます）。

部品：course_words.py（用語集の語・見出しの id）、course_search.py（日本語の検索）、course_outputs.py（セルの出力と
API 名のリンク）、course_ui.py（画面の文字）、course_nodes.py（変換が共有する道具）。このファイルは参照のリンクと登録。

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

import re
from pathlib import Path

from course_nodes import _href, _is_output, _replace_text, _skipped, _staged
from course_outputs import ApiLinks, CourseOutputs, display_width, printed_table_parts  # noqa: F401
from course_search import (  # noqa: F401
    CourseJapanese,
    _first_headings_js,
    _skip_off_nav,
    identifier_pieces,
    protected_words,
    query_terms,
)
from course_ui import UI_JA, UI_JA_ATTRIBUTES, UI_JA_JS, _install_ui_strings, _japanese_attributes, _translations_js  # noqa: F401
from course_words import HEADING_WORDS, glossary_terms, glossary_words, heading_ids, synonyms, term_anchor, term_anchors  # noqa: F401
from docutils import nodes
from sphinx.transforms import SphinxTransform


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
        # 検索の並べ方（course-search.js）：ページの最初の節の見出し
        self.env.metadata[self.env.docname]["course_first_heading"] = next((t for d, t in titles if d == 2), "")
        for (depth, section), new, (_, text) in zip(sections, heading_ids(titles), titles):
            if not new or new in section["ids"]:
                continue
            if new in self.document.ids:  # ほかの要素がすでに使っている
                continue
            section["ids"].insert(0, new)
            self.document.ids[new] = section
            slugs.setdefault(new, (depth, new, text))


# ---------------------------------------------------------------- ページの中身を整える

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
_REPO_PATH = re.compile(r"^(notebooks|exercises|solutions)/[\w.\-]+\.ipynb$")


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
    app.connect("builder-inited", _skip_off_nav)
    app.connect("build-finished", _first_headings_js)
    app.connect("build-finished", _translations_js)
    app.connect("build-finished", _japanese_attributes)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
