"""ウェブサイトを作り（make site と同じ）、127.0.0.1 で配って、ヘッドレス Chromium で全ページを確かめる。

    make test-site     # CH6_SITE=1 で、このファイルを動かす（Chromium は apt-get install chromium で）

ページごとに：コンソールのエラーがない、外部への要求がない、すべての画像が読み込まれる（naturalWidth > 0）、
内部のリンクがすべて（# の先の id まで）あること。検索は、講座の語と用語集のすべての語で、その語を使うページが
すべて（しかも、その語を含むページだけが）結果に出ること。レッスンごとに 1 枚のスクリーンショットを
build/site-screenshots/（CH6_SITE_SCREENSHOTS で変えられる）に置きます。
"""
from __future__ import annotations

import json
import os
import re
import shutil
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import build_site
import course_site
import pytest
from nbtemplate import colab_url

from tests.site import ROOT
from tests.site.browser import Chromium, Page, find_chromium, serve

pytestmark = [
    pytest.mark.skipif(
        os.environ.get("CH6_SITE") != "1",
        reason="ブラウザでサイトを確かめるテストは make test-site で動きます（CH6_SITE=1）",
    ),
    # テーマと myst-parser が使う Sphinx の古い API の知らせ（サイトの警告ではない）
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

SCREENSHOTS = Path(os.environ.get("CH6_SITE_SCREENSHOTS", ROOT / "build" / "site-screenshots"))
BUILD_LIMIT_S = 60
# 課題（issue 25）が挙げた語。用語集のすべての語も加える
COURSE_WORDS = ["集団通信", "シャーディング", "shard_map", "psum_scatter", "all-gather"]
SEARCH_WORDS = list(dict.fromkeys(COURSE_WORDS + course_site.glossary_words()))


@dataclass
class Visit:
    errors: list[str]
    external: list[str]
    images: list[list]
    links: list[str]
    article_text: str  # 見えている本文（innerText）
    main_text: str  # 本文の領域のすべての文字（textContent）


@dataclass
class Site:
    out: Path
    base: str
    page: Page
    seconds: float
    visits: dict[str, Visit] = field(default_factory=dict)

    def pages(self) -> list[str]:
        return sorted(p.relative_to(self.out).as_posix() for p in self.out.rglob("*.html")
                      if not any(part.startswith("_") for part in p.relative_to(self.out).parts))

    def content_pages(self) -> list[str]:
        return [p for p in self.pages() if p not in ("search.html", "genindex.html")]

    def rel(self, url: str) -> str:
        path = urllib.parse.urlsplit(url).path
        return urllib.parse.unquote(path.removeprefix(urllib.parse.urlsplit(self.base).path))


def lesson_pages() -> list[str]:
    return [f"notebooks/{p.stem}.html" for p in build_site.lessons()]


@pytest.fixture(scope="module")
def browser():
    binary = find_chromium()
    if binary is None:
        message = "Chromium が見つかりません（Debian: apt-get update && apt-get install -y chromium fonts-noto-cjk）"
        if os.environ.get("CI"):
            pytest.fail(message + "。CI ではこのテストを必ず動かします")
        pytest.skip(message)
    with Chromium(binary) as chromium:
        yield chromium


@pytest.fixture(scope="module")
def site(tmp_path_factory, browser):
    work = tmp_path_factory.mktemp("site")
    out = work / "_site"
    seconds = build_site.build(out, staging=work / "src")
    print(f"\nサイトを作るのにかかった時間: {seconds:.1f} 秒")
    with serve(out) as base:
        page = browser.new_page()
        s = Site(out, base, page, seconds)
        shutil.rmtree(SCREENSHOTS, ignore_errors=True)
        SCREENSHOTS.mkdir(parents=True)
        lessons = set(lesson_pages())
        for rel in s.pages():
            page.navigate(base + rel)
            images = page.evaluate("""(async () => {
                const imgs = [...document.images];
                for (const i of imgs) i.loading = "eager";
                await Promise.all(imgs.map((i) => i.decode().catch(() => null)));
                return imgs.map((i) => [i.currentSrc || i.src, i.naturalWidth]);
            })()""")
            page.settle(0.2)
            s.visits[rel] = Visit(
                errors=page.errors(),
                external=[u for u in page.requested_urls() if not u.startswith(base) and not u.startswith("data:")],
                images=images,
                links=page.evaluate("[...document.querySelectorAll('a[href]')].map((a) => a.href)"),
                article_text=page.evaluate("(document.querySelector('article') || document.body).innerText"),
                main_text=page.evaluate("(document.querySelector('[role=main]') || document.body).textContent"),
            )
            if rel in lessons:
                page.send("Runtime.evaluate", expression="window.scrollTo(0, 0)")
                page.screenshot(SCREENSHOTS / (Path(rel).stem + ".png"))
        print(f"スクリーンショット: {SCREENSHOTS}/")
        yield s
        page.close()


def test_build_is_fast_and_covers_every_lesson(site):
    assert site.seconds < BUILD_LIMIT_S, f"サイトを作るのに {site.seconds:.0f} 秒（{BUILD_LIMIT_S} 秒以内のはず）"
    expected = {"index.html", "glossary.html", "teachers.html", "search.html", "genindex.html", *lesson_pages()}
    assert set(site.pages()) == expected
    assert (site.out / ".nojekyll").exists(), "GitHub Pages が _static/ を配るには .nojekyll が要る"


def test_every_page_loads_without_errors(site):
    problems = {rel: v.errors + [f"外部への要求: {u}" for u in v.external]
                for rel, v in site.visits.items() if v.errors or v.external}
    assert not problems, json.dumps(problems, ensure_ascii=False, indent=1)


def test_every_image_loads(site):
    broken = {rel: [src for src, width in v.images if not width] for rel, v in site.visits.items()}
    broken = {rel: srcs for rel, srcs in broken.items() if srcs}
    assert not broken, json.dumps(broken, ensure_ascii=False, indent=1)
    figures = sum(1 for rel in lesson_pages() for src, _ in site.visits[rel].images if "/_images/" in src)
    assert figures > len(lesson_pages()), "レッスンの図（PNG の出力）が表示されていない"


def _ids(path: Path, cache: dict) -> set[str]:
    if path not in cache:
        cache[path] = set(re.findall(r'\bid="([^"]+)"', path.read_text(encoding="utf-8", errors="replace")))
    return cache[path]


def test_every_internal_link_resolves(site):
    cache: dict = {}
    broken = []
    checked = 0
    for rel, visit in site.visits.items():
        for href in visit.links:
            if not href.startswith(site.base):
                continue
            target = site.rel(href) or "index.html"
            path = site.out / target
            if path.is_dir():
                path = path / "index.html"
            fragment = urllib.parse.unquote(urllib.parse.urlsplit(href).fragment)
            checked += 1
            if not path.is_file():
                broken.append(f"{rel} → {target}（ファイルがない）")
            elif fragment and path.suffix == ".html" and fragment not in _ids(path, cache):
                broken.append(f"{rel} → {target}#{fragment}（その id がない）")
            else:  # サーバも実際に返すこと
                with urllib.request.urlopen(href.split("#")[0], timeout=10) as resp:
                    assert resp.status == 200
    assert not broken, "\n".join(broken)
    assert checked > 100


def test_navigation_follows_the_course_in_japanese(site):
    site.page.navigate(site.base + "index.html")
    hrefs = site.page.evaluate(
        "[...document.querySelectorAll('.bd-sidebar-primary a.reference.internal')].map((a) => a.href)")
    order = [site.rel(h) for h in hrefs]
    assert order == ["index.html", *lesson_pages(), "glossary.html", "teachers.html"]
    captions = site.page.evaluate(
        "[...document.querySelectorAll('.bd-sidebar-primary p.caption')].map((p) => p.textContent.trim())")
    assert captions == ["レッスン", "資料"]
    assert site.page.evaluate("document.documentElement.lang") == "ja"


def test_each_lesson_links_colab_exercise_and_download(site):
    for lesson in build_site.lessons():
        rel = f"notebooks/{lesson.stem}.html"
        links = site.visits[rel].links
        assert colab_url(f"notebooks/{lesson.name}") in links, rel
        downloads = [h for h in links if h.startswith(site.base) and "/_downloads/" in h]
        wanted = [lesson]
        if (ROOT / "exercises" / lesson.name).exists():
            assert colab_url(f"exercises/{lesson.name}") in links, rel
            wanted.append(ROOT / "exercises" / lesson.name)
        for original in wanted:
            found = [h for h in downloads if site.rel(h).endswith(f"/{original.name}")]
            assert found, f"{rel}: {original.parent.name}/{original.name} のダウンロードがない"
            contents = {(site.out / site.rel(h)).read_bytes() for h in found}
            # ビルドのときのもとのノートブック（作業フォルダの写しがもとと同じことは test_site_unit が確かめる）
            staged = site.out.parent / "src" / "_files" / original.parent.name / original.name
            assert staged.read_bytes() in contents, f"{rel}: ダウンロードがもとのノートブックと違う"


def test_japanese_heading_anchor_is_stable(site):
    """「5.1 psum」への共有リンク（#sec-5-1）は、作り直しても同じ見出しを指す。"""
    site.page.navigate(site.base + "notebooks/6_3b_shard_map.html#sec-5-1")
    heading = site.page.evaluate("document.getElementById('sec-5-1')?.querySelector('h1,h2,h3,h4')?.textContent")
    assert heading and heading.startswith("5.1 psum"), heading
    permalink = site.page.evaluate(
        "document.getElementById('sec-5-1').querySelector('a.headerlink').getAttribute('href')")
    assert permalink == "#sec-5-1"
    toc = site.page.evaluate("[...document.querySelectorAll('.bd-toc a')].map((a) => a.getAttribute('href'))")
    assert "#sec-5-1" in toc, "ページの目次も安定した id を使う"
    assert site.page.evaluate("window.scrollY") > 0, "#sec-5-1 の見出しまで移動していない"


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


def search(site: Site, word: str) -> set[str]:
    site.page.navigate(site.base + "search.html?q=" + urllib.parse.quote(word))
    site.page.wait_for("Search.title && Search.title.textContent === Documentation.gettext('Search Results')")
    hrefs = site.page.evaluate("[...document.querySelectorAll('#search-results ul.search li > a')].map((a) => a.href)")
    return {site.rel(h) for h in hrefs}


@pytest.mark.parametrize("word", SEARCH_WORDS)
def test_search_finds_the_pages_that_use_the_word(site, word):
    w = word.lower()
    # 英字の語は語の頭からだけ数える（shutil.copytree の中の pytree は pytree という語ではない）
    pattern = re.compile((r"(?<![a-z])" if w[:1].isascii() and w[:1].isalpha() else "") + re.escape(w))
    uses = {rel for rel in site.content_pages() if pattern.search(site.visits[rel].article_text.lower())}
    contains = {rel for rel in site.content_pages() if w in site.visits[rel].main_text.lower()}
    if word in COURSE_WORDS:  # 用語集の語は用語集のページが使う（GLOSSARY.md の同期は tests/test_glossary.py）
        assert uses & set(lesson_pages()), f"「{word}」を使うレッスンがない"
    found = search(site, word)
    assert uses <= found, f"「{word}」の検索に出ないページ: {sorted(uses - found)}"
    assert found <= contains, f"「{word}」を含まないのに出たページ: {sorted(found - contains)}"


def test_pages_fit_a_phone(site):
    """電話の幅（390 px）でも、どのページも横にはみ出さない（コードと表は枠の中でスクロールする）。"""
    wide = {}
    site.page.set_viewport(390, 844, mobile=True)
    try:
        for rel in site.content_pages():
            site.page.navigate(site.base + rel)
            width, client = site.page.evaluate(
                "[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
            if width > client + 1:
                wide[rel] = f"{width} px > {client} px"
        site.page.navigate(site.base + "notebooks/6_3b_shard_map.html")
        site.page.screenshot(SCREENSHOTS.parent / "site-phone-6_3b_shard_map.png")
    finally:
        site.page.set_viewport(1280, 900)
    assert not wide, wide


def test_one_screenshot_per_lesson(site):
    shots = sorted(p.name for p in SCREENSHOTS.glob("*.png"))
    assert shots == sorted(f"{Path(rel).stem}.png" for rel in lesson_pages())
    for shot in SCREENSHOTS.glob("*.png"):
        data = shot.read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 20_000, shot.name
