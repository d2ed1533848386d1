"""検索：語の切り方、件数・抜き出し・並べ方・節へのリンク、語を使うページがすべて出ること。欠陥を戻すと見つかること。"""

from __future__ import annotations

import json
import re

import course_site
import pytest

from tests.site.searchcheck import (
    duplicate_problems,
    ranking_problems,
    search,
    search_problems,
    search_quality_problems,
    search_results,
)
from tests.site.sitecheck import (
    BROWSER_MARKS,
    CHROME_SNIPPET,
    COURSE_WORDS,
    DUPLICATE_RESULT,
    NO_COUNT,
    SEARCH_WORDS,
    SHOWCASE,
    altered_copy,
    lesson_pages,
    page_named,
    page_without,
    searchable,
)

pytestmark = BROWSER_MARKS


def test_query_is_split_as_the_index_is(site):
    """ブラウザの splitQuery（search_splitter.js）と Python の query_terms は同じ語に切る。"""
    samples = SEARCH_WORDS + [t["definition"] for t in course_site.glossary_terms()] + [
        "集団通信の前後", "jax.lax.psum_scatter(x, 'i')", "All-Gather と reduce-scatter", "まとめ", "  ",
    ]
    site.page.navigate(site.base + "search.html")
    got = site.page.evaluate(f"{json.dumps(samples, ensure_ascii=False)}.map((s) => splitQuery(s))")
    protected = course_site.protected_words()
    expected = [course_site.query_terms(s, protected) for s in samples]
    diff = [(s, g, e) for s, g, e in zip(samples, got, expected) if g != e]
    assert not diff, diff

@pytest.mark.parametrize("word", COURSE_WORDS + ["collective", "まとめ", "KV キャッシュ"])
def test_search_shows_count_snippets_order_and_sections(site, word):
    problems = search_problems(site, word)
    assert not problems, "\n".join(problems)

def test_search_for_collective_lists_6_3b_first(site):
    items = search_results(site, "集団通信")["items"]
    assert site.rel(items[0]["href"]) == SHOWCASE, [i["title"] for i in items[:4]]

def test_english_glossary_terms_are_synonyms(site):
    """用語集の英語で探しても、その日本語の用語を使うページが見つかる（collective → 集団通信）。"""
    for en, ja in (("collective", "集団通信"), ("checkpoint", "チェックポイント"), ("sharding", "シャーディング")):
        uses = {rel for rel in searchable(site) if ja in site.visits[rel].article_text}
        found = search(site, en)
        assert uses <= found, f"「{en}」で見つからない、「{ja}」を使うページ: {sorted(uses - found)}"

@pytest.mark.parametrize("word", SEARCH_WORDS)
def test_search_finds_the_pages_that_use_the_word(site, word):
    w = word.lower()
    # 英字の語は語の頭からだけ数える（shutil.copytree の中の pytree は pytree という語ではない）
    pattern = re.compile((r"(?<![a-z])" if w[:1].isascii() and w[:1].isalpha() else "") + re.escape(w))
    uses = {rel for rel in searchable(site) if pattern.search(site.visits[rel].article_text.lower())}
    contains = {rel for rel in site.content_pages() if w in site.visits[rel].main_text.lower()}
    if word in COURSE_WORDS:  # 用語集の語は用語集のページが使う（GLOSSARY.md の同期は tests/test_glossary.py）
        assert uses & set(lesson_pages()), f"「{word}」を使うレッスンがない"
    items = search_results(site, word)["items"]
    assert not duplicate_problems(site, items), duplicate_problems(site, items)
    found = {site.rel(item["href"]) for item in items}
    assert uses <= found, f"「{word}」の検索に出ないページ: {sorted(uses - found)}"
    assert found <= contains, f"「{word}」を含まないのに出たページ: {sorted(found - contains)}"

def _count_without_number(js: str) -> str:
    """検索の件数の訳を、Sphinx の日本語の訳のとおりの空に戻す（件数の行が出ない）。"""
    key = '"Search finished, found one page matching the search query.": ['
    start = js.index(key) + len(key)
    return js[:start] + '\n            ""\n        ' + js[js.index("]", start):]

def _sphinx_snippets(js: str) -> str:
    """講座の抜き出し（本文の段落から）をやめ、Sphinx の抜き出し（[role=main] の全文から）に戻す。"""
    return js.replace("Search.makeSearchSummary = CourseSearch.summary;", "")

def test_detects_search_without_count(site, tmp_path):
    with altered_copy(site, tmp_path, {"_static/translations.js": _count_without_number}) as copy:
        found = page_named(search_problems(copy, "集団通信"), NO_COUNT)
    assert found, "件数の行を消しても見つからない"

def test_detects_snippet_of_theme_chrome(site, tmp_path):
    with altered_copy(site, tmp_path, {"_static/course-search.js": _sphinx_snippets}) as copy:
        found = page_named(search_problems(copy, "shard_map"), CHROME_SNIPPET)
    assert found, "テーマの部品の抜き出しが見つからない"

ONE_PER_PAGE = "Search._performSearch = (...args) => CourseSearch.onePerPage(CourseSearch.allTerms(performSearch(...args), args[1]));"

def test_detects_duplicate_search_results(site, tmp_path):
    with altered_copy(site, tmp_path, {"_static/course-search.js": page_without(ONE_PER_PAGE)}) as copy:
        found = page_named(search_problems(copy, "シャーディング"), DUPLICATE_RESULT)
    assert found, "同じページが 2 度出ても見つからない"

def test_search_ranks_defining_lesson_first_and_finds_terms(site):
    problems = ranking_problems(site) + search_quality_problems(site)
    assert not problems, "\n".join(problems)
    for word in ("ルーフライン", "accelerator", "grading"):  # 開発者・管理者のページは学習者の検索に出ない
        off = {rel for rel in search(site, word) if rel.startswith("docs/") or rel == "maintainers.html"}
        assert not off, (word, off)

def test_detects_search_defects(site, tmp_path):
    """並べ方・空白なしの用語・2 語の検索・用語集の行き先・TeX を、もとのふるまいに戻すと見つかる。"""
    changes = {"_static/course-search.js": lambda js: js
               .replace("Scorer.score = CourseSearch.score;", "")
               .replace("CourseSearch.onePerPage(CourseSearch.allTerms(performSearch(...args), args[1]))",
                        "CourseSearch.onePerPage(performSearch(...args))")
               .replace('if (term && term.matches("dt[id]"))', "if (false)")
               .replace("el.replaceWith(doc.createTextNode(CourseSearch.texText(el.textContent)));", ""),
               "_static/language_data.js": lambda js: js.replace("const squeezed = word === undefined && ",
                                                                 "const squeezed = false && ")}
    with altered_copy(site, tmp_path, changes) as copy:
        copy.visits = site.visits
        ranking = ranking_problems(copy)
        quality = search_quality_problems(copy)
    assert len(ranking) >= 2, ranking
    for needle in ("KVキャッシュ", "#term-checkpoint", "TeX", "片方しか"):
        assert any(needle in p for p in quality), (needle, quality)
