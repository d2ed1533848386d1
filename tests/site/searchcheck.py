"""検索のページ（search.html?q=…）を開いて結果を読み、並べ方・抜き出し・件数・節へのリンクの問題を返す関数。"""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request

import course_site

from tests.site.sitecheck import CHROME_SNIPPET, DUPLICATE_RESULT, NO_COUNT, NO_RESULTS, Site, page_ids


def search_results(site: Site, word: str) -> dict:
    """検索のページで word を探す：件数の行、結果（リンク・題・抜き出し）。抜き出しが揃うまで待つ。"""
    site.page.navigate(site.base + "search.html?q=" + urllib.parse.quote(word))
    site.page.wait_for("Search.title && Search.title.textContent === Documentation.gettext('Search Results')")
    site.page.wait_for("[...document.querySelectorAll('#search-results ul.search li')]"
                       ".every((li) => li.querySelector('p.context'))", 20)
    # Sphinx は結果を 1 件ずつ時間をおいて足していく: 件数が 2 度続けて同じになるまで待つ（途中の一覧で数えると、
    # 後から出る 2 度目の同じページを見落とす: fresh clone の CI で 1 度あった）
    count = "document.querySelectorAll('#search-results ul.search li').length"
    seen = -1
    for _ in range(40):
        site.page.settle(0.25)
        now = site.page.evaluate(count)
        if now == seen:
            break
        seen = now
    return site.page.evaluate("""({
        status: (Search.status && Search.status.textContent) || '',
        items: [...document.querySelectorAll('#search-results ul.search li')].map((li) => ({
            href: li.querySelector('a').href,
            title: li.querySelector('a').textContent,
            snippet: (li.querySelector('p.context') || {}).textContent || '',
        })),
    })""")

def search(site: Site, word: str) -> set[str]:
    return {site.rel(item["href"]) for item in search_results(site, word)["items"]}

def duplicate_problems(site: Site, items: list[dict]) -> list[str]:
    """同じページが 2 度以上ある結果（節へのリンクの違いは同じページ）。"""
    pages = [site.rel(item["href"]) for item in items]
    return [f"{DUPLICATE_RESULT}: {page}（{pages.count(page)} 回）" for page in sorted(set(pages)) if pages.count(page) > 1]

# 抜き出しに出てはいけないテーマの部品の文字。本文にも出る語（「モデルのコピー」）があるので、
# 抜き出しが本文の 1 つの段落（や項目・表のます）の一部なら、テーマの部品ではありません
CHROME_WORDS = ["System Settings", "システムの設定", "ライト", "ダーク", "目次", "このページの内容", "コピー", "Ctrl", "印刷・PDF"]

PROSE_OF_PAGE_JS = """(async (href, core) => {
    const article = CourseSearch.article(await (await fetch(href)).text());
    return !!article && [...article.querySelectorAll(CourseSearch.PROSE)]
        .some((el) => el.textContent.replace(/\\s+/g, " ").trim().includes(core));
})"""

def snippet_is_prose(site: Site, item: dict) -> bool:
    """抜き出し（前後の「…」を除く）が、そのページの本文の 1 つの要素の文の一部か。"""
    core = item["snippet"].strip().removeprefix("…").removesuffix("…").strip()
    href = item["href"].split("#")[0]
    return bool(site.page.evaluate(f"{PROSE_OF_PAGE_JS}({json.dumps(href)}, {json.dumps(core)})"))

def names_page(site: Site, rel: str, word: str) -> bool:
    """ページの題か最初の節の見出し（演習のページは題だけ）が word（用語集の英語・日本語、API 名の最後の部分も）を含むか。"""
    w = word.lower()
    syn = course_site.synonyms()
    names = {w, *syn.get(w, []), *[ja for ja, en in syn.items() if w in en]}
    if "." in w and len(w.rsplit(".", 1)[1]) > 2:
        names.add(w.rsplit(".", 1)[1])
    doc = json.dumps(rel.removesuffix(".html"))
    title, first = site.page.evaluate(f"""[Search._index.titles[Search._index.docnames.indexOf({doc})],
        (typeof COURSE_FIRST_HEADINGS !== 'undefined' && COURSE_FIRST_HEADINGS[{doc}]) || '']""")
    return any(n in title.lower() or n in first.lower() for n in names)

def search_problems(site: Site, word: str) -> list[str]:
    """word で検索したページの問題：結果や件数がない、抜き出しがテーマの部品や語のない文、題に語のあるページが後、
    レッスンの結果が節へリンクしない（またはない id へ）。"""
    found = search_results(site, word)
    items = found["items"]
    if not items:
        return [f"{NO_RESULTS}: {word}"]
    problems = duplicate_problems(site, items)
    m = re.search(r"(\d+)\s*ページ", found["status"])
    if not (m and int(m.group(1)) == len(items)):
        problems.append(f"{NO_COUNT}: {found['status']!r}（結果は {len(items)} 件）")
    names = [word.lower(), *[ja for ja, en in course_site.synonyms().items() if word.lower() in en]]
    for item in items:
        chrome = [c for c in CHROME_WORDS if c in item["snippet"]]
        if chrome and not snippet_is_prose(site, item):
            problems.append(f"{CHROME_SNIPPET} {chrome}: {item}")
        if not any(n in item["snippet"].lower() for n in names):
            problems.append(f"抜き出しに「{word}」がない: {item}")
    # 題か最初の節の見出しに語があるページが先に
    in_title = [names_page(site, site.rel(i["href"]), word) for i in items]
    if in_title != sorted(in_title, reverse=True):
        problems.append(f"題に語のあるページが先に並んでいない: {list(zip(in_title, [i['title'] for i in items]))}")
    # レッスンの結果は節へリンクする
    problems += [f"節へリンクしない結果: {i['href']}" for i in items if "/notebooks/" in i["href"] and "#" not in i["href"]]
    for item in items:
        fragment = urllib.parse.unquote(urllib.parse.urlsplit(item["href"]).fragment)
        if fragment and fragment not in page_ids(site.out / site.rel(item["href"]), {}):
            problems.append(f"結果のリンクの先の id がない: {item['href']}")
    return problems

# 課題（issue 48）が挙げた語：その語を定めるレッスンが 1 番目
DEFINING = {"シャーディング": "notebooks/6_3a_sharding.html", "メッシュ": "notebooks/6_3a_sharding.html",
            "jax.shard_map": "notebooks/6_3b_shard_map.html", "チェックポイント": "notebooks/6_9b_checkpoint_resume.html",
            "KVキャッシュ": "notebooks/6_10_inference.html"}

def ranking_problems(site: Site) -> list[str]:
    out = []
    for word, page in DEFINING.items():
        items = search_results(site, word)["items"]
        first = site.rel(items[0]["href"]) if items else None
        if first != page:
            out.append(f"「{word}」の 1 番目が {first}（{page} のはず）")
    return out

def search_quality_problems(site: Site) -> list[str]:
    """KVキャッシュ（空白なし）、用語集の結果の行き先、抜き出しの TeX、2 語の検索がどちらも含むページだけか。"""
    out = []
    squeezed, spaced = search(site, "KVキャッシュ"), search(site, "KV キャッシュ")
    if squeezed != spaced or "notebooks/6_9c_lost_process.html" in squeezed:
        out.append(f"「KVキャッシュ」の結果が「KV キャッシュ」と違う: {sorted(squeezed ^ spaced)}")
    # リッジポイント：6.7 と 6.10 の演習で、語を含む最初の段落に数式（\(C\) ÷ HBM の帯域）がある
    for word, anchor in (("チェックポイント", "term-checkpoint"), ("ルーフライン", "term-roofline"),
                         ("リッジポイント", "term-ridge-point")):
        items = search_results(site, word)["items"]
        glossary = [i["href"] for i in items if site.rel(i["href"]) == "glossary.html"]
        if not glossary or not glossary[0].endswith("#" + anchor):
            out.append(f"用語集の結果が用語（#{anchor}）へ行かない: {glossary}")
        out += [f"抜き出しに TeX: {i['snippet']}" for i in items if re.search(r"\\[A-Za-z(\[]|\$", i["snippet"])]
    for rel in search(site, "kv チェックポイント"):
        text = site.visits[rel].main_text.lower()
        if "kv" not in text or "チェックポイント" not in text:
            out.append(f"「kv チェックポイント」の片方しか含まないページ: {rel}")
    return out
