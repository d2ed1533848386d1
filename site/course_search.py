"""講座のサイトの日本語の検索：索引と検索語を同じ規則で切る（course_site.py が Sphinx に登録します）。"""
from __future__ import annotations

import json
import re
from pathlib import Path

from course_words import glossary_words, synonyms
from sphinx.search.ja import SearchJapanese

# ---------------------------------------------------------------- 検索

_ASCII_TOKEN = re.compile(r"[a-z0-9_]+(?:[.\-][a-z0-9_]+)*")
_KANJI_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\u3005]{3,}")


def _is_run_char(ch: str) -> bool:
    """ひとまとまりに続ける文字：ASCII とひらがな以外の文字と数字（漢字・カタカナ・長音符など）。"""
    return not ch.isascii() and not ("\u3040" <= ch <= "\u309f") and ch.isalnum()


def protected_words() -> list[str]:
    """ひとまとまりに扱う日本語の語（用語集から。英字だけの語は API 名の規則で扱う）、長い順。"""
    return sorted({w.lower() for w in glossary_words() if not w.isascii()}, key=lambda w: (-len(w), w))


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
        if word is None:  # 「KVキャッシュ」のように空白を省いた用語も、その用語（kv キャッシュ）として
            word = next((w for w in protected if " " in w and text.startswith(w.replace(" ", ""), i)), None)
            if word is not None:
                out.extend([run] if run else [])
                run = ""
                out.append(word)
                i += len(word.replace(" ", ""))
                continue
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
        found = [w for w in self.protected if w in low or (" " in w and w.replace(" ", "") in low)]
        words += found
        for w in found:  # 用語集の英語を同義語として（collective で 集団通信 のページが見つかる）
            words += self.synonyms.get(w, [])
        for m in _KANJI_RUN.finditer(low):
            run = m.group()
            words += [run[a:a + n] for n in (2, 3, 4) for a in range(len(run) - n + 1)]
        for m in _ASCII_TOKEN.finditer(low):
            words += identifier_pieces(m.group())
        return words


def _skip_off_nav(app) -> None:
    """docs/ と README のページ（build_site.py が書く _off_nav.json）を検索の索引に入れない（学習者の検索に出さない）。"""
    path = Path(app.srcdir) / "_off_nav.json"
    if not hasattr(app.builder, "index_page") or not path.exists():
        return
    off = set(json.loads(path.read_text(encoding="utf-8")))
    original = app.builder.index_page

    def index_page(pagename, doctree, title):
        if pagename not in off:
            original(pagename, doctree, title)

    app.builder.index_page = index_page


def _first_headings_js(app, exception) -> None:
    """ページごとの最初の節の見出し（COURSE_FIRST_HEADINGS）：検索は、題か最初の見出しが語を名指すページを先に並べる。"""
    if exception is not None or app.builder.format != "html":
        return
    # 演習のページの最初の見出しは最初の問題で、ページの主題ではないので数えない
    data = {doc: meta.get("course_first_heading", "") for doc, meta in sorted(app.env.metadata.items())
            if not doc.startswith("exercises/")}
    (Path(app.outdir) / "_static" / "course-headings.js").write_text(
        "const COURSE_FIRST_HEADINGS = " + json.dumps(data, ensure_ascii=False, indent=0) + ";\n", encoding="utf-8")
