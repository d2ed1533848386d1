"""ウェブサイトを作り（make site と同じ）、127.0.0.1 で配って、ヘッドレス Chromium で全ページを確かめる。

    make test-site     # CH6_SITE=1 で、このファイルを動かす（Chromium は apt-get install chromium で）

ページごとに：コンソールのエラーがない、外部への要求がない、すべての画像が読み込まれる（naturalWidth > 0）、
内部のリンクがすべて（# の先の id まで）あること。すべてのページを 1280 px と 390 px で：横にはみ出さない、
表が列の幅を超えない、数式が MathJax で描かれ、列からはみ出さず余計なスクロールバーもない、生の Markdown の表
（| --- |）が残っていない、図の alt がパスではなく図の説明、画面の部品（ボタン・ナビゲーション・検索）の文字に
英語が残っていない。印刷用のスタイルでコードが切れない。検索は、講座の語と用語集のすべての語で、その語を使う
ページがすべて（しかも、その語を含むページだけが）結果に出て、件数が出て、抜き出しが本文から取られ、題や見出しに
語があるページが先に並び、結果が節へリンクし、用語集の英語でも日本語の用語のページが見つかること。

電話の幅（issue 40）：印刷された表（ch6.show.table）は行を折り返さない、数式の左端が切れない、列の多い表は細い列に
つぶれない（カードになる）、横に長い図は表示の 0.6 倍より小さくならない。図をクリックするとページを移らずに拡大する。
演習の問題（演習のノートブック）がサイトにあり、解答のコードはどこにもない。本文の jax. / lax. / jnp. の名前は
API リファレンス（docs.jax.dev）へリンクする。検索の結果に同じページが 2 度出ない。

欠陥を見つける確かめ（生の Markdown の表、列より広い表、件数のない検索、テーマの部品の抜き出し、はみ出す数式、
パスの alt、画面の英語、それに上の電話の幅・図のクリック・演習・解答・API 名・検索の重なり）は、どれも問題の一覧を
返す関数（raw_table_problems など）。本物のサイトでは一覧が空で、test_detects_* は、作ったサイトの写しのページに
その欠陥を 1 つ戻すと（もとのふるまいに戻すと）、関数がその欠陥を名指しすることを確かめる。

スクリーンショットは build/site-screenshots/（CH6_SITE_SCREENSHOTS で変えられる）に：最初のページ（landing.png）、
1 つのレッスンの 1280 px と 390 px（lesson-6_3b-1280.png、lesson-6_3b-390.png）、用語集（glossary.png）、
「集団通信」の検索（search-shudan-tsushin.png）、lessons/ にレッスンごとに 1 枚、phone/ に電話の幅（390 px）で
直したところ（6.5 のエラー索引、6.7 の印刷された表、6.8a のスケジュール、6.10 の数式、演習のページ）。
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
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
WIDTHS = (1280, 390)
SHOWCASE = "notebooks/6_3b_shard_map.html"  # スクリーンショットを撮るレッスン
# 電話の幅（390 px）のスクリーンショット（phone/名前.png）：ページと、画面の上に置く要素（n 番目）
PHONE_SHOTS = {
    "6_5-error-index": ("notebooks/6_5_summary.html", "article table.course-stack", -1),
    "6_7-printed-table": ("notebooks/6_7_cost_memory.html", ".course-printed-table", 0),
    "6_8a-schedule": ("notebooks/6_8a_pipeline.html", "img.course-figure", 1),
    "6_10-equation": ("notebooks/6_10_inference.html", "div.math", 0),
    "exercise-6_1": ("exercises/6_1_vmap.html", "article h2", 1),
}
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
    layout: dict[int, dict] = field(default_factory=dict)  # 幅 → LAYOUT_JS の結果
    chrome: dict = field(default_factory=dict)  # CHROME_JS の結果


# 幅ごとに確かめること（1 ページ分。問題のあるものだけを返す）
LAYOUT_JS = r"""(async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  const doc = document.documentElement;
  const art = document.querySelector("article.bd-article") || document.querySelector("article") || document.body;
  const right = art.getBoundingClientRect().right;
  const short = (el) => (el.innerText || el.textContent || "").replace(/\s+/g, " ").trim().slice(0, 70);
  const out = {width: doc.clientWidth, overflow: doc.scrollWidth > doc.clientWidth + 1 ? doc.scrollWidth : 0};
  out.wide_tables = [...art.querySelectorAll("table")]
    .filter((t) => t.getBoundingClientRect().right > right + 1 || t.scrollWidth > t.clientWidth + 1)
    .map((t) => `${Math.round(t.getBoundingClientRect().width)} px: ${t.textContent.replace(/\s+/g, " ").trim().slice(0, 70)}`);
  // 生の Markdown の表：コードの入力の外の文字に |---| の行
  const walker = document.createTreeWalker(art, NodeFilter.SHOW_TEXT);
  out.pipe_tables = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (n.parentElement.closest(".cell_input, .highlight-python, .highlight-bash, .highlight-toml, .highlight-default")) continue;
    if (/\|\s*:?-{3,}:?\s*\|/.test(n.textContent)) out.pipe_tables.push(short(n.parentElement));
  }
  const maths = [...art.querySelectorAll(".math")];
  out.math_count = maths.length;
  out.math_unrendered = maths.filter((m) => !m.querySelector("mjx-container")).map(short);
  out.math_overflow = [];
  for (const box of art.querySelectorAll("div.math")) {
    const eq = box.querySelector("mjx-container");
    if (!eq) continue;
    const inner = eq.querySelector("mjx-math") || eq;
    const wide = inner.getBoundingClientRect().width > box.clientWidth + 1;
    // 余計なスクロールバー：縦にあふれる、または広くない式なのに横のスクロールバー（の場所）がある
    const stray = box.scrollHeight > box.clientHeight + 1
      || (!wide && (box.scrollWidth > box.clientWidth + 1 || box.offsetHeight - box.clientHeight > 1));
    const outside = box.getBoundingClientRect().right > right + 1;
    if (outside || stray || (wide && doc.clientWidth >= 1000)) out.math_overflow.push(
      `${Math.round(inner.getBoundingClientRect().width)} px in ${box.clientWidth} px${stray ? " (scrollbar)" : ""}: ${eq.getAttribute("aria-label") || short(box)}`);
  }
  out.bad_alts = [...art.querySelectorAll("img")].map((i) => i.getAttribute("alt") || "")
    .filter((a) => !a.trim() || /\.(png|svg|jpe?g|gif)$/i.test(a) || a.includes("/"));
  out.figures = art.querySelectorAll("img.course-figure").length;
  out.code_cells = art.querySelectorAll(".cell_input div.highlight").length;
  out.code_scrolling = [...art.querySelectorAll(".cell_input div.highlight pre")].filter((p) => p.scrollWidth > p.clientWidth + 1).length;
  out.copy_buttons = art.querySelectorAll(".cell_input div.highlight button.course-copy").length;
  out.outputs_scrolling = [...art.querySelectorAll(".cell_output pre:not(.course-diagram)")]
    .filter((p) => !p.closest(".course-diagram, .course-printed-table") && p.scrollWidth > p.clientWidth + 1).map(short);
  // 左端が切れた数式：式の左が箱の左より外（スクロールしても見えない）
  out.math_cut = [...art.querySelectorAll("div.math")].filter((box) => {
    const inner = box.querySelector("mjx-math");
    return inner && inner.getBoundingClientRect().left < box.getBoundingClientRect().left - box.scrollLeft - 1;
  }).map((box) => (box.querySelector("mjx-container") || box).getAttribute("aria-label") || short(box));
  // 印刷された表（ch6.show.table）：見出し、その下の「----  ----」、表の幅を超えない行。1 行が 2 行以上に折り返されたもの
  const cjk = /[\u1100-\u115f\u2e80-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6]/;
  const dispWidth = (s) => [...s].reduce((n, ch) => n + (cjk.test(ch) ? 2 : 1), 0);
  const lineBoxes = (pre, a, b) => {
    const range = document.createRange();
    const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    let pos = 0, started = false;
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const len = n.textContent.length;
      if (!started && a <= pos + len) { range.setStart(n, a - pos); started = true; }
      if (started && b <= pos + len) { range.setEnd(n, b - pos); break; }
      pos += len;
    }
    return new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top))).size;
  };
  out.printed_tables = 0;
  out.wrapped_tables = [];
  for (const pre of art.querySelectorAll(".cell_output pre")) {
    const lines = pre.textContent.split("\n");
    const starts = [];
    lines.reduce((pos, line) => { starts.push(pos); return pos + line.length + 1; }, 0);
    for (let i = 1; i < lines.length; i++) {
      const rule = lines[i].trimEnd();
      if (!/^-{2,}(?: {2}-{2,})*$/.test(rule) || !lines[i - 1].trim()) continue;
      let end = i + 1;
      while (end < lines.length && lines[end].trim() && dispWidth(lines[end].trimEnd()) <= dispWidth(rule)) end++;
      out.printed_tables += 1;
      const wrapped = [];
      for (let k = i - 1; k < end; k++) {
        if (lineBoxes(pre, starts[k], starts[k] + lines[k].trimEnd().length) > 1) wrapped.push(k);
      }
      if (wrapped.length) out.wrapped_tables.push(`${wrapped.length} / ${end - i + 1} 行が折り返す: ${lines[i - 1].trim().slice(0, 60)}`);
    }
  }
  // つぶれた表：12 文字以上のセルが、字の大きさの 6 倍より細い（1 行に 5 文字ほど）
  out.squeezed_tables = [...art.querySelectorAll("table")].map((t) => {
    const cells = [...t.querySelectorAll("td, th")].filter((c) => {
      if (c.textContent.trim().length < 12 || !c.getClientRects().length) return false;
      const cs = getComputedStyle(c);
      return c.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) < 6 * parseFloat(cs.fontSize);
    });
    return cells.length ? `${cells.length} セル、高さ ${Math.round(t.getBoundingClientRect().height)} px: ${short(t)}` : "";
  }).filter((x) => x);
  // 図：表示の大きさ（width 属性）の何倍で見えているか。リンク（PNG そのもの）に包まれた図
  const figs = [...art.querySelectorAll("img.course-figure")];
  out.small_figures = figs.filter((i) => Number(i.getAttribute("width")))
    .map((i) => [i.getBoundingClientRect().width / Number(i.getAttribute("width")), i.alt])
    .filter(([scale]) => scale < 0.6).map(([scale, alt]) => `${scale.toFixed(2)} 倍: ${alt.slice(0, 60)}`);
  out.figure_links = figs.filter((i) => i.closest("a[href]")).map((i) => `${i.closest("a[href]").getAttribute("href")}: ${i.alt.slice(0, 40)}`);
  // 本文のコードの中の API 名（jax. / lax. / jnp.）と、リファレンス（docs.jax.dev）へのリンクのないもの
  const apiName = /(?<![\w.\-\/:])(?:jax|lax|jnp)(?:\.[A-Za-z_]\w*)+/g;
  out.api_names = 0;
  out.api_unlinked = [];
  for (const code of art.querySelectorAll("code")) {
    if (code.closest("pre, .cell_output, .highlight, h1, h2, h3, h4, h5, h6, .course-links")) continue;
    const linked = new Set([...code.querySelectorAll('a[href^="https://docs.jax.dev/"]')].map((a) => a.textContent));
    for (const m of code.textContent.matchAll(apiName)) {
      out.api_names += 1;
      if (!code.closest("a[href]") && !linked.has(m[0])) out.api_unlinked.push(m[0]);
    }
  }
  // API 名のリンクが、その名前の項目ではなく親のページや検索に行くもの（項目のない名前は文書のページ：course-api-guide）
  out.api_off_entry = [...art.querySelectorAll("a.course-api")].filter((a) => {
    const href = a.getAttribute("href") || "";
    return href.includes("search.html") || (!a.classList.contains("course-api-guide") && !href.includes(a.title));
  }).map((a) => `${a.title} → ${a.getAttribute("href")}`);
  // コピーのボタンがコードの上に重なる（電話の幅）
  out.copy_covering = [...art.querySelectorAll(".cell_input div.highlight")].filter((box) => {
    const b = box.querySelector(".course-copy"), pre = box.querySelector("pre");
    if (!b || !pre) return false;
    const r = b.getBoundingClientRect(), q = pre.getBoundingClientRect();
    return r.width > 0 && r.left < q.right && r.right > q.left && r.top < q.bottom && r.bottom > q.top;
  }).map((box) => short(box.querySelector("pre")));
  // 表のままで収まるのにカードになった表：カードの印を外した写しを同じ所に置いて測る
  out.needless_cards = [...art.querySelectorAll("table.course-stack")].filter((t) => {
    const copy = t.cloneNode(true);
    copy.classList.remove("course-stack");
    copy.style.visibility = "hidden";
    t.after(copy);
    const fits = !CourseUI.squeezed(copy);
    copy.remove();
    return fits;
  }).map(short);
  // 本文のコードが語の途中（英字・数字の間）で折り返す
  out.code_midword = [];
  for (const code of art.querySelectorAll("code.literal")) {
    if (code.closest("pre") || code.getClientRects().length < 2 || /\s/.test(code.textContent.trim())) continue;
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    let prev = null;
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      for (let i = 0; i < n.textContent.length; i++) {
        const range = document.createRange();
        range.setStart(n, i); range.setEnd(n, i + 1);
        const rect = range.getClientRects()[0];
        if (!rect) continue;
        const ch = n.textContent[i];
        if (prev && rect.top > prev.top + 2 && /[A-Za-z0-9]/.test(prev.ch) && /[A-Za-z0-9]/.test(ch)) {
          out.code_midword.push(`${code.textContent.slice(0, 60)}（${prev.ch}|${ch}）`);
        }
        prev = {top: rect.top, ch};
      }
    }
  }
  return out;
})()"""

# 画面の部品の文字と属性（本文の外の文字、すべての title・aria-label・placeholder、ボタンの文字）
CHROME_JS = r"""(() => {
  const art = document.querySelector("article.bd-article");
  const texts = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!n.textContent.trim() || el.closest("script, style, noscript, code, pre, mjx-container")) continue;
    if (art && art.contains(el) && !el.closest("button, .course-links")) continue;
    // ページの題（ナビゲーション・目次・前後のページ・検索の結果）は本文の文字
    if (el.closest("a.reference, .bd-toc a, .prev-next-title, #search-results li, .navbar-brand, .bd-links a, h1")) continue;
    if (getComputedStyle(el).display === "none" || el.closest("[hidden]")) continue;
    texts.push(n.textContent.trim());
  }
  const attrs = [];
  document.querySelectorAll("[title], [aria-label], [placeholder], button").forEach((el) => {
    if (el.matches("link, meta") || el.closest("head, mjx-container")) return;  // <link rel="next" title="ページの題">
    for (const a of ["title", "aria-label", "placeholder"]) {
      const v = el.getAttribute(a);
      if (v && !el.matches("a.course-term, a.reference, .bd-links a, .toc-entry a")) attrs.push(v);
    }
    if (el.tagName === "BUTTON" && el.textContent.trim()) attrs.push(el.textContent.trim());
  });
  return {texts, attrs};
})()"""

# 画面の部品に出てよい英字の語（名前）。ほかの英字の語は訳し忘れ
UI_NAMES = {"jax", "github", "colab", "kaggle", "jupyterlab", "pdf", "ctrl", "sphinx", "ipynb", "esc", "make", "lab"}


@dataclass
class Site:
    out: Path
    base: str
    page: Page
    seconds: float
    cpu_seconds: float
    visits: dict[str, Visit] = field(default_factory=dict)

    def pages(self) -> list[str]:
        return sorted(p.relative_to(self.out).as_posix() for p in self.out.rglob("*.html")
                      if not any(part.startswith("_") for part in p.relative_to(self.out).parts))

    def content_pages(self) -> list[str]:
        return [p for p in self.pages() if p not in ("search.html", "genindex.html")]

    def rel(self, url: str) -> str:
        path = urllib.parse.urlsplit(url).path
        return urllib.parse.unquote(path.removeprefix(urllib.parse.urlsplit(self.base).path))


def searchable(site: Site) -> list[str]:
    """学習者の検索に出るページ（docs/ と README の管理者・開発者へのページは出さない）。"""
    off = {f"{name}.html" for name in build_site.off_nav()}
    return [rel for rel in site.content_pages() if rel not in off]


def lesson_pages() -> list[str]:
    return [f"notebooks/{p.stem}.html" for p in build_site.lessons()]


def exercise_pages() -> list[str]:
    return [f"exercises/{p.stem}.html" for p in build_site.exercise_pages()]


# ---------------------------------------------------------------- 欠陥を見つける関数
# どれも 1 ページを測った値（LAYOUT_JS か CHROME_JS の結果、検索なら検索のページ）を受け取り、見つけた問題を
# 1 つ 1 行で返す。行は欠陥の名前（下の定数）で始まる。本物のサイトのテストは一覧が空であることを確かめ、
# test_detects_* はサイトの写しに欠陥を 1 つ戻して、その名前の行が出ることを確かめる。
PAGE_OVERFLOW = "横にはみ出すページ"
RAW_TABLE = "生の Markdown の表（| --- |）"
WIDE_TABLE = "本文の列より広い表"
UNRENDERED_MATH = "MathJax で描かれていない数式"
OVERFLOWING_MATH = "列からはみ出す数式"
PATH_ALT = "図の alt がパスか空"
ENGLISH_UI = "画面の部品に英語"
NO_RESULTS = "検索の結果がない"
NO_COUNT = "検索の件数がない（または結果の数と違う）"
CHROME_SNIPPET = "抜き出しにテーマの部品"
CUT_MATH = "左端が切れた数式"
WRAPPED_TABLE = "折り返して列の崩れた印刷の表"
SQUEEZED_TABLE = "細い列につぶれた表"
SMALL_FIGURE = "縮みすぎた図"
FIGURE_LINK = "リンクに包まれた図"
FIGURE_LEAVES = "クリックするとページを離れる図"
FIGURE_NO_ZOOM = "クリックしても拡大しない図"
UNLINKED_API = "リファレンスへのリンクのない API 名"
DUPLICATE_RESULT = "検索の結果に 2 度出るページ"
MISSING_EXERCISE = "サイトにない演習"
SOLUTION_CODE = "サイトにある解答のコード"
API_OFF_ENTRY = "項目ではなく親のページか検索へ行く API 名"
COPY_COVERS_CODE = "コードに重なるコピーのボタン"
NEEDLESS_CARD = "表のままで収まるのにカードになった表"
CODE_MIDWORD = "語の途中で折り返す本文のコード"


def measure(page: Page, url: str, width: int) -> dict:
    """url を幅 width で開いて LAYOUT_JS で測る（600 px より狭ければ電話として）。"""
    page.set_viewport(width, 844 if width < 600 else 900, mobile=width < 600)
    try:
        page.navigate(url)
        return page.evaluate(LAYOUT_JS)
    finally:
        page.set_viewport(1280, 900)


def page_overflow_problems(layout: dict) -> list[str]:
    if not layout["overflow"]:
        return []
    return [f"{PAGE_OVERFLOW}: scrollWidth {layout['overflow']} px（画面は {layout['width']} px）"]


def raw_table_problems(layout: dict) -> list[str]:
    return [f"{RAW_TABLE}: {text}" for text in layout["pipe_tables"]]


def wide_table_problems(layout: dict) -> list[str]:
    return [f"{WIDE_TABLE}: {text}" for text in layout["wide_tables"]]


def math_problems(layout: dict) -> list[str]:
    return ([f"{UNRENDERED_MATH}: {text}" for text in layout["math_unrendered"]]
            + [f"{OVERFLOWING_MATH}: {text}" for text in layout["math_overflow"]]
            + [f"{CUT_MATH}: {text}" for text in layout["math_cut"]])


def printed_table_problems(layout: dict) -> list[str]:
    return [f"{WRAPPED_TABLE}: {text}" for text in layout["wrapped_tables"]]


def squeezed_table_problems(layout: dict) -> list[str]:
    return [f"{SQUEEZED_TABLE}: {text}" for text in layout["squeezed_tables"]]


def figure_size_problems(layout: dict) -> list[str]:
    return ([f"{SMALL_FIGURE}: {text}" for text in layout["small_figures"]]
            + [f"{FIGURE_LINK}: {text}" for text in layout["figure_links"]])


def api_entry_problems(layout: dict) -> list[str]:
    return [f"{API_OFF_ENTRY}: {text}" for text in layout["api_off_entry"]]


def api_link_problems(layout: dict) -> list[str]:
    return [f"{UNLINKED_API}: {name}" for name in layout["api_unlinked"]]


FIGURE_BOX_JS = """(async () => {
  const img = document.querySelectorAll('article img.course-figure')[%d];
  img.scrollIntoView({block: 'center'});
  await img.decode().catch(() => null);
  const r = img.getBoundingClientRect();
  return [r.left + r.width / 2, r.top + r.height / 2, img.alt.slice(0, 50)];
})()"""


NAVIGATION_EVENTS = ("Page.frameRequestedNavigation", "Page.frameStartedLoading", "Page.frameNavigated")


def figure_click_problems(page: Page, url: str) -> list[str]:
    """url のすべての図を、本物のマウスのクリック（DevTools の Input）で押す。ページを離れる図、拡大しない図。"""
    page.navigate(url)
    count = page.evaluate("document.querySelectorAll('article img.course-figure').length")
    problems = []
    for k in range(count):
        x, y, alt = page.evaluate(FIGURE_BOX_JS % k)
        page.events.clear()
        for kind in ("mousePressed", "mouseReleased"):
            page.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)
        page.settle(0.4)
        # 拡大は履歴を 1 つ足す（pushState、同じページ）。住所の変わる移動だけがページを離れたこと
        moved = [u for u in (ev["params"].get("url") or ev["params"].get("frame", {}).get("url", "")
                             for ev in page.events if ev["method"] in NAVIGATION_EVENTS) if u and u.split("#")[0] != url]
        if moved:
            problems.append(f"{FIGURE_LEAVES}: 図 {k}（{alt}）→ {next((u for u in moved if u), '?')}")
            page.navigate(url)
            continue
        zoomed = page.evaluate("!!document.querySelector('.course-zoom img') && location.href")
        if zoomed != url:
            problems.append(f"{FIGURE_NO_ZOOM}: 図 {k}（{alt}）")
        page.evaluate("document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape'}))")
    return problems


def _page_text(path: Path) -> str:
    import html

    return html.unescape(re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8")))


def exercise_problems(out: Path) -> list[str]:
    """演習（ch6/grading/exercises.json のすべて）が、サイトの演習のページにあるか：ページ、問題の見出しと
    チェックの呼び出し、問題の文の「必須」「自由」「ヒント」、レッスンのページからそのページへのリンク。"""
    from ch6.grading import exercises as grading_exercises

    data = json.loads(grading_exercises.DATA.read_text(encoding="utf-8"))["notebooks"]
    problems = []
    for stem, nb in data.items():
        page = out / "exercises" / f"{stem}.html"
        if not page.exists():
            problems += [f"{MISSING_EXERCISE}: {ex['id']}（{stem} の演習のページがない）" for ex in nb["exercises"]]
            continue
        text = _page_text(page)
        flat = re.sub(r"\s+", "", text)
        for ex in nb["exercises"]:
            if grading_exercises.norm_call(ex["call"]) not in flat or f"def{ex['function']}(" not in flat:
                problems.append(f"{MISSING_EXERCISE}: {ex['id']} {ex['function']}（関数かチェックの呼び出しがない）")
        source = ROOT / "exercises" / f"{stem}.ipynb"
        markdown = "".join("".join(c["source"]) + "\n" for c in json.loads(source.read_text(encoding="utf-8"))["cells"]
                           if c["cell_type"] == "markdown")
        for heading in re.findall(r"^#{1,6}\s+(.*)$", markdown, re.M):
            if re.sub(r"[`*\s]", "", heading) not in flat:
                problems.append(f"{MISSING_EXERCISE}: {stem} の見出し「{heading}」がない")
        for word in ("必須", "自由", "ヒント"):
            if text.count(word) < markdown.count(word):
                problems.append(f"{MISSING_EXERCISE}: {stem} の問題の文の「{word}」が {markdown.count(word)} 回のはず、"
                                f"ページには {text.count(word)} 回")
        lesson = (out / "notebooks" / f"{stem}.html").read_text(encoding="utf-8")
        if f'href="../exercises/{stem}.html"' not in lesson:
            problems.append(f"{MISSING_EXERCISE}: レッスン {stem} から演習のページへのリンクがない")
    return problems


def solution_problems(out: Path) -> list[str]:
    return [f"{SOLUTION_CODE}: {leak}" for leak in build_site.solution_leaks(out)]


def alt_problems(layout: dict) -> list[str]:
    return [f"{PATH_ALT}: {alt!r}" for alt in layout["bad_alts"]]


def _english_words(strings: list[str]) -> set[str]:
    words = set()
    for text in strings:
        for w in re.findall(r"[A-Za-z][A-Za-z']{2,}", text):
            if w.lower() not in UI_NAMES:
                words.add(w)
    return words


def english_ui_problems(chrome: dict) -> list[str]:
    """CHROME_JS の結果から、画面の部品（ボタン・ナビゲーション・検索・属性）に残った英語の語。"""
    return [f"{ENGLISH_UI}: {w}" for w in sorted(_english_words(chrome.get("texts", []) + chrome.get("attrs", [])))]


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
    cpu0 = time.process_time()
    seconds = build_site.build(out, staging=work / "src")
    cpu = time.process_time() - cpu0
    print(f"\nサイトを作るのにかかった時間: {seconds:.1f} 秒（CPU {cpu:.1f} 秒）")
    with serve(out) as base:
        page = browser.new_page()
        s = Site(out, base, page, seconds, cpu)
        shutil.rmtree(SCREENSHOTS, ignore_errors=True)
        (SCREENSHOTS / "lessons").mkdir(parents=True)
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
            s.visits[rel].layout[1280] = page.evaluate(LAYOUT_JS)
            s.visits[rel].chrome = page.evaluate(CHROME_JS)
            if rel in lessons:
                page.send("Runtime.evaluate", expression="window.scrollTo(0, 0)")
                page.screenshot(SCREENSHOTS / "lessons" / (Path(rel).stem + ".png"))
            if rel == "index.html":  # 最初のページは、レッスンの一覧まで見える高さで
                page.set_viewport(1280, 2000)
                page.send("Runtime.evaluate", expression="window.scrollTo(0, 0)")
                page.settle(0.3)
                page.screenshot(SCREENSHOTS / "landing.png")
                page.set_viewport(1280, 900)
            if rel == "glossary.html":
                page.screenshot(SCREENSHOTS / "glossary.png")
            if rel == SHOWCASE:
                page.screenshot(SCREENSHOTS / "lesson-6_3b-1280.png")
        # 電話の幅：すべてのページをもう一度
        page.set_viewport(390, 844, mobile=True)
        (SCREENSHOTS / "phone").mkdir()
        try:
            for rel in s.content_pages():
                page.navigate(base + rel)
                s.visits[rel].layout[390] = page.evaluate(LAYOUT_JS)
                if rel == SHOWCASE:
                    page.screenshot(SCREENSHOTS / "lesson-6_3b-390.png")
                for name, (shot_rel, selector, k) in PHONE_SHOTS.items():
                    if shot_rel == rel:
                        page.evaluate(f"""(async () => {{
                            await Promise.all([...document.images].map((i) => i.decode().catch(() => null)));
                            const all = [...document.querySelectorAll({json.dumps(selector)})];
                            all.at({k}).scrollIntoView({{block: 'start'}});
                            window.scrollBy(0, -60);
                        }})()""")
                        page.settle(0.2)
                        page.screenshot(SCREENSHOTS / "phone" / f"{name}.png")
        finally:
            page.set_viewport(1280, 900)
        print(f"スクリーンショット: {SCREENSHOTS}/")
        yield s
        page.close()


def test_build_is_fast_and_covers_every_lesson(site):
    # CPU の時間で比べる（2 コアをほかの仕事と分け合うマシンでは、経過時間はその混み具合で変わる）
    assert site.cpu_seconds < BUILD_LIMIT_S, f"サイトを作るのに CPU {site.cpu_seconds:.0f} 秒（{BUILD_LIMIT_S} 秒以内のはず）"
    docs = {f"docs/{d.stem}.html" for d in build_site.doc_pages()}
    expected = {"index.html", "glossary.html", "teachers.html", "maintainers.html", "search.html", "genindex.html",
                *docs, *lesson_pages(), *exercise_pages()}
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
    # docs/（ワークショップの手引き、英語の開発者の記録）と README は学習者の列に出さない（先生方へ・README から）
    assert order == ["index.html", *lesson_pages(), *exercise_pages(), "glossary.html", "teachers.html"]
    captions = site.page.evaluate(
        "[...document.querySelectorAll('.bd-sidebar-primary p.caption')].map((p) => p.textContent.trim())")
    assert captions == ["本編", "演習", "資料"]
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


def search_results(site: Site, word: str) -> dict:
    """検索のページで word を探す：件数の行、結果（リンク・題・抜き出し）。抜き出しが揃うまで待つ。"""
    site.page.navigate(site.base + "search.html?q=" + urllib.parse.quote(word))
    site.page.wait_for("Search.title && Search.title.textContent === Documentation.gettext('Search Results')")
    site.page.wait_for("[...document.querySelectorAll('#search-results ul.search li')]"
                       ".every((li) => li.querySelector('p.context'))", 20)
    site.page.settle(0.1)
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
        if fragment and fragment not in _ids(site.out / site.rel(item["href"]), {}):
            problems.append(f"結果のリンクの先の id がない: {item['href']}")
    return problems


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


def _problems(site: Site, check, widths=WIDTHS) -> dict[str, list]:
    """すべてのページの、幅ごとの測った値に check（raw_table_problems など）をかけた結果（問題のあるものだけ）。"""
    found = {}
    for rel in site.content_pages():
        for w in widths:
            value = check(site.visits[rel].layout[w])
            if value:
                found[f"{rel} @{w}px"] = value
    return found


def test_every_page_at_390_and_1280_px(site):
    """すべてのページ（レッスンはすべて）を電話の幅と画面の幅で見た。横にはみ出すページがない。"""
    assert set(lesson_pages()) <= set(site.content_pages())
    for rel in site.content_pages():
        assert set(site.visits[rel].layout) == set(WIDTHS), rel
        for w in WIDTHS:
            assert site.visits[rel].layout[w]["width"] <= w, (rel, w)
    wide = _problems(site, page_overflow_problems)
    assert not wide, json.dumps(wide, ensure_ascii=False, indent=1)


def test_no_raw_markdown_tables(site):
    """出力の Markdown の表（6.3b の通信の表など）が |---| の文字のままではなく表になっている。"""
    raw = _problems(site, raw_table_problems, widths=(1280,))
    assert not raw, json.dumps(raw, ensure_ascii=False, indent=1)
    html = (site.out / SHOWCASE).read_text(encoding="utf-8")
    assert html.count("<table") >= 2, "6.3b の出力の表が <table> になっていない"


def test_tables_fit_their_column(site):
    """どの表も本文の列の幅を超えない（1280 px でも 390 px でも。横にスクロールさせない）。"""
    wide = _problems(site, wide_table_problems)
    assert not wide, json.dumps(wide, ensure_ascii=False, indent=1)


def test_math_is_rendered_and_fits(site):
    """数式は MathJax で描かれ（ネットから読み込まない）、1280 px では列に収まり、どの幅でも余計なスクロールバーがない。"""
    pages_with_math = [rel for rel in lesson_pages() if site.visits[rel].layout[1280]["math_count"]]
    assert len(pages_with_math) >= 3, pages_with_math
    problems = _problems(site, math_problems)
    assert not problems, json.dumps(problems, ensure_ascii=False, indent=1)


def test_figures_have_descriptions_not_paths(site):
    """図の alt は出力が持つ図の説明（「図：…」）。ファイルのパスや空ではない。"""
    bad = _problems(site, alt_problems, widths=(1280,))
    assert not bad, json.dumps(bad, ensure_ascii=False, indent=1)
    site.page.navigate(site.base + SHOWCASE)
    alts = site.page.evaluate("[...document.querySelectorAll('img.course-figure')].map((i) => i.alt)")
    assert alts and all(a.startswith("図：") for a in alts), alts
    figures = sum(site.visits[rel].layout[1280]["figures"] for rel in lesson_pages())
    assert figures > len(lesson_pages())


def test_figure_opens_enlarged_and_closes(site):
    site.page.navigate(site.base + SHOWCASE)
    size = site.page.evaluate("""(async () => {
        const img = document.querySelector('img.course-figure');
        await img.decode();
        img.click();
        const big = document.querySelector('.course-zoom img');
        await big.decode();
        return [img.getBoundingClientRect().width, big.getBoundingClientRect().width,
                document.querySelector('.course-zoom p').textContent, img.naturalWidth];
    })()""")
    # 図は表示の 2 倍の解像度で保存してある: 拡大すると、表示の大きさの 1.5 倍以上（ふつうは PNG そのままの大きさ）
    assert size[1] >= 1.5 * size[0] or size[1] >= 1200, f"拡大していない: {size}"
    assert size[3] >= 1.9 * size[0], f"図が高精細の画面のための 2 倍の解像度でない: {size}"
    assert size[2].startswith("図：")
    site.page.evaluate("document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape'}))")
    assert site.page.evaluate("document.querySelector('.course-zoom') === null")


def test_figures_zoom_without_leaving_the_page(site):
    """どの図も、クリックするとそのページの上で拡大する（PNG そのものへは移らない。図はリンクに包まれていない）。"""
    problems = _problems(site, lambda layout: layout["figure_links"], widths=(1280,))
    for rel in lesson_pages():
        found = figure_click_problems(site.page, site.base + rel)
        if found:
            problems[rel] = found
    assert not problems, json.dumps(problems, ensure_ascii=False, indent=1)
    figures = sum(site.visits[rel].layout[1280]["figures"] for rel in lesson_pages())
    assert figures > 2 * len(lesson_pages()), figures


def test_printed_tables_keep_their_columns(site):
    """出力に印刷された表（ch6.show.table）は、電話の幅でも行を折り返さない（列がそろったまま。箱の中で横にスクロール）。"""
    tables = sum(site.visits[rel].layout[390]["printed_tables"] for rel in lesson_pages())
    assert tables >= 20, f"印刷された表が {tables} 個しか見つからない"
    problems = _problems(site, printed_table_problems)
    assert not problems, json.dumps(problems, ensure_ascii=False, indent=1)


def test_tables_with_many_columns_become_cards_on_a_phone(site):
    """列の多い表（6.5 のエラー索引など）は、電話の幅で細い列につぶれない（3 列以上の表は 1 行 1 枚のカードになる）。"""
    problems = _problems(site, squeezed_table_problems, widths=(390,))
    assert not problems, json.dumps(problems, ensure_ascii=False, indent=1)
    summary = site.visits["notebooks/6_5_summary.html"].layout
    assert summary[390]["width"] == 390


def test_wide_figures_stay_readable_on_a_phone(site):
    """電話の幅で、図は表示の大きさの 0.6 倍より小さくならない（6.8a のスケジュールは枠の中で横にスクロール）。"""
    problems = _problems(site, figure_size_problems)
    assert not problems, json.dumps(problems, ensure_ascii=False, indent=1)


def test_api_names_link_to_the_reference(site):
    """本文のコードの中の jax. / lax. / jnp. の名前は、どれも docs.jax.dev のそのページへリンクする。"""
    names = sum(site.visits[rel].layout[1280]["api_names"] for rel in site.content_pages())
    assert names > 200, names
    problems = _problems(site, api_link_problems, widths=(1280,))
    assert not problems, json.dumps(problems, ensure_ascii=False, indent=1)
    links = site.visits["notebooks/6_3b_shard_map.html"].links
    assert "https://docs.jax.dev/en/latest/_autosummary/jax.lax.psum.html" in links
    assert "https://docs.jax.dev/en/latest/_autosummary/jax.shard_map.html" in links
    off = _problems(site, api_entry_problems, widths=(1280,))
    assert not off, json.dumps(off, ensure_ascii=False, indent=1)


def test_exercises_are_on_the_site(site):
    """すべての演習（問題の文・必須と自由・ヒント・書き込む形）が演習のページにあり、レッスンからリンクしている。"""
    problems = exercise_problems(site.out)
    assert not problems, "\n".join(problems)
    from ch6.grading import exercises as grading_exercises

    data = json.loads(grading_exercises.DATA.read_text(encoding="utf-8"))["notebooks"]
    assert sum(len(nb["exercises"]) for nb in data.values()) >= 50
    assert set(exercise_pages()) == {f"exercises/{stem}.html" for stem in data}
    text = site.visits["exercises/6_1_vmap.html"].article_text
    assert "raise NotImplementedError" in text and "# TODO" in text


def test_site_has_no_solution_code(site):
    """解答（solutions/ の ### BEGIN SOLUTION … ### END SOLUTION）のコードは、サイトのどのファイルにもない。"""
    blocks = build_site.solution_blocks()
    assert len(blocks) >= 50 and sum(len(b["lines"]) for b in blocks) > 100
    problems = solution_problems(site.out)
    assert not problems, "\n".join(problems)


def test_code_cells_have_a_working_copy_button(site):
    missing = {rel: (site.visits[rel].layout[1280]["code_cells"], site.visits[rel].layout[1280]["copy_buttons"])
               for rel in lesson_pages()
               if site.visits[rel].layout[1280]["code_cells"] != site.visits[rel].layout[1280]["copy_buttons"]}
    assert not missing, f"コピーのボタンのないコードのセル（セルの数, ボタンの数）: {missing}"
    site.page.navigate(site.base + SHOWCASE)
    site.page.evaluate("document.querySelector('.cell_input button.course-copy').click()")
    site.page.wait_for("document.querySelector('.cell_input button.course-copy').textContent === 'コピーしました'", 5)


def test_wide_code_and_wrapped_outputs_at_1280(site):
    """1280 px では、ほとんどのコードのセルが横にスクロールせずに読める。出力とエラーは折り返す。"""
    cells = sum(site.visits[rel].layout[1280]["code_cells"] for rel in lesson_pages())
    scrolling = sum(site.visits[rel].layout[1280]["code_scrolling"] for rel in lesson_pages())
    assert cells > 100 and scrolling / cells < 0.25, f"{scrolling} / {cells} のセルが横にスクロールする"
    outputs = _problems(site, lambda layout: layout["outputs_scrolling"])
    assert not outputs, json.dumps(outputs, ensure_ascii=False, indent=1)


def test_intentional_errors_are_marked(site):
    marked = 0
    for rel in lesson_pages():
        html = (site.out / rel).read_text(encoding="utf-8")
        n = html.count("（わざと起こしたエラーです）")
        m = html.count("course-has-intentional-error")
        assert (n == 0) == (m == 0), f"{rel}: わざと起こしたエラー {n} 個、印 {m} 個"
        marked += m
    assert marked >= len(lesson_pages())
    site.page.navigate(site.base + SHOWCASE)
    label = site.page.evaluate("""(() => {
        const el = document.querySelector('.course-has-intentional-error');
        return el ? getComputedStyle(el, '::before').content : '';
    })()""")
    assert "わざと起こしたエラー" in label


def test_interface_is_japanese(site):
    """画面の部品（ボタン、ナビゲーション、検索、見出しのリンク、フッタ）の文字と属性に英語が残っていない。"""
    english = {}
    for rel, visit in site.visits.items():
        found = english_ui_problems(visit.chrome)
        if found:
            english[rel] = found
    assert not english, json.dumps(english, ensure_ascii=False, indent=1)
    assert all(v.chrome.get("attrs") for v in site.visits.values())


def test_print_keeps_code_whole(site):
    """印刷（PDF に保存）のスタイル：ナビゲーションを隠し、コードと出力を折り返して切らない（A4 の幅）。"""
    clipped = {}
    site.page.set_viewport(794, 1123)
    site.page.send("Emulation.setEmulatedMedia", media="print")
    try:
        for rel in lesson_pages():
            site.page.navigate(site.base + rel)
            found = site.page.evaluate("""(() => {
                const hidden = ['.bd-sidebar-primary', '.bd-header', '.course-copy']
                    .every((q) => [...document.querySelectorAll(q)].every((e) => getComputedStyle(e).display === 'none'));
                const cut = [...document.querySelectorAll('article pre')]
                    .filter((p) => p.scrollWidth > p.clientWidth + 1).map((p) => p.textContent.slice(0, 60));
                const art = document.querySelector('article').getBoundingClientRect().width;
                return {hidden, cut, art};
            })()""")
            found["wrapped"] = printed_table_problems(site.page.evaluate(LAYOUT_JS))
            if not found["hidden"] or found["cut"] or found["art"] < 700 or found["wrapped"]:
                clipped[rel] = found
    finally:
        site.page.send("Emulation.setEmulatedMedia", media="")
        site.page.set_viewport(1280, 900)
    assert not clipped, json.dumps(clipped, ensure_ascii=False, indent=1)


def test_notebook_archive_downloads(site):
    import io
    import zipfile

    links = [h for h in site.visits["index.html"].links if h.endswith("/ch6-notebooks.zip")]
    assert links, "最初のページに zip のリンクがない"
    data = (site.out / site.rel(links[0])).read_bytes()
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    for lesson in build_site.lessons():
        assert f"ch6-notebooks/notebooks/{lesson.name}" in names
    assert not any("/solutions/" in n for n in names), "解答は配らない"


def test_landing_page_is_for_learners(site):
    text = site.visits["index.html"].article_text
    for needed in ("学べること", "対象", "JupyterLab", "Colab", "Kaggle", "前提", "目安"):
        assert needed in text, needed
    for lesson in build_site.lessons():
        assert build_site.lesson_title(lesson).replace("`", "") in text, lesson.name
    assert "make test" not in text, "開発者の手順は管理者・開発者へのページに"
    teachers = site.visits["teachers.html"]
    for doc in build_site.doc_pages():  # 日本語の手引き（英語の開発者の記録は README から）
        if build_site.markdown_headings(doc.read_text(encoding="utf-8"))[0][1].isascii():
            continue
        assert any(site.rel(h) == f"docs/{doc.stem}.html" for h in teachers.links), f"先生方へのページから docs/{doc.name} へ"


def test_references_are_links(site):
    """「6.1 の 3 節」は節へ、論文の名前と URL はリンク、用語は用語集の用語へ。"""
    summary = site.visits["notebooks/6_5_summary.html"].links
    assert any(site.rel(h) == "notebooks/6_1_vmap.html" and h.endswith("#sec-3") for h in summary), \
        "6.5 のエラー索引の「6.1 の 3 節」が節へリンクしていない"
    migration = site.visits["notebooks/6_3c_migration.html"].links
    assert any(h.endswith("6_2_pmap.html#sec-5") for h in migration)
    glossary_links = [h for h in site.visits[SHOWCASE].links if "/glossary.html#term-" in h]
    assert any(h.endswith("#term-collective") for h in glossary_links), glossary_links
    ids = _ids(site.out / "glossary.html", {})
    for term in course_site.glossary_terms():
        assert course_site.term_anchor(term) in ids, term["ja"]
    assert any(h.startswith("https://arxiv.org/abs/1909.08053") for rel in lesson_pages() for h in site.visits[rel].links)


def test_screenshots(site):
    shots = sorted(p.name for p in (SCREENSHOTS / "lessons").glob("*.png"))
    assert shots == sorted(f"{Path(rel).stem}.png" for rel in lesson_pages())
    search(site, "集団通信")
    site.page.wait_for("[...document.querySelectorAll('#search-results li')].every((li) => li.querySelector('p.context'))")
    site.page.screenshot(SCREENSHOTS / "search-shudan-tsushin.png")
    named = ["landing.png", "lesson-6_3b-1280.png", "lesson-6_3b-390.png", "glossary.png", "search-shudan-tsushin.png",
             *(f"phone/{name}.png" for name in PHONE_SHOTS)]
    for name in named:
        assert (SCREENSHOTS / name).exists(), name
    for shot in [*SCREENSHOTS.glob("*.png"), *(SCREENSHOTS / "lessons").glob("*.png"), *(SCREENSHOTS / "phone").glob("*.png")]:
        data = shot.read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 20_000, shot.name


# ---------------------------------------------------------------- 欠陥を戻すと見つかること（issue 32）
# 作ったサイトの写し（ファイルは元へのシンボリックリンク）で、1 つのファイルだけを書き換えて欠陥を戻し、
# 別のポートで配って同じ関数で確かめる。元のサイト（ほかのテストが見るもの）は変えない。


@contextlib.contextmanager
def altered_copy(site: Site, folder: Path, changes: dict):
    """changes（サイトの中のパス → 文字列を書き換える関数。None ならそのファイルを消す）を当てた写しを配り、
    その Site を返す。"""
    out = folder / "_site"
    shutil.copytree(site.out, out, copy_function=os.symlink)
    for rel, change in changes.items():
        if change is None:
            (out / rel).unlink()
            continue
        text = (site.out / rel).read_text(encoding="utf-8")
        new = change(text)
        assert new != text, f"{rel}: 欠陥を戻せなかった（書き換える場所がない）"
        (out / rel).unlink()
        (out / rel).write_text(new, encoding="utf-8")
    with serve(out) as base:
        yield Site(out, base, site.page, 0.0, 0.0)


OUTPUT_TABLE = re.compile(r'<div class="pst-scrollable-table-container"><table class="table">.*?</table>\s*</div>', re.S)


def _as_pipe_text(html: str) -> str:
    """最初の出力の表を、表にする前の Markdown の文字（| a | b | と | --- |）の段落に戻す。"""
    m = OUTPUT_TABLE.search(html)
    assert m, "出力の表がない"
    rows = [[re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", m.group(0), re.S)]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * len(rows[0])]
    lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return html[:m.start()] + "<p>" + "\n".join(lines) + "</p>" + html[m.end():]


def _widen_table(html: str) -> str:
    """最初の出力の表に、折り返さない長い行を足す。"""
    m = OUTPUT_TABLE.search(html)
    assert m, "出力の表がない"
    row = '<tr><td colspan="3" style="white-space: nowrap">' + " ".join(["jax.lax.psum_scatter(x, 'i')"] * 30) + "</td></tr>"
    table = m.group(0).replace("</tbody>", row + "</tbody>", 1)
    return html[:m.start()] + table + html[m.end():]


MATH_DIV = '<div class="math notranslate nohighlight">'


def _long_equation(html: str) -> str:
    """最初の数式の前に、列より長い式（80 項の和）を足す。"""
    terms = " + ".join(f"w_{{{i}}} x_{{{i}}}" for i in range(80))
    return html.replace(MATH_DIV, f"{MATH_DIV}\n\\[L = {terms}\\]\n</div>\n{MATH_DIV}", 1)


def _alt_is_path(html: str) -> str:
    """図の alt を、図の説明ではなく画像のパスに（myst-nb がそのまま出すもの）。"""
    return re.sub(r'<img alt="[^"]*" class="(course-figure[^"]*)"([^>]*?) src="([^"]+)"',
                  r'<img alt="\3" class="\1"\2 src="\3"', html)


def _english_attributes(html: str) -> str:
    """日本語にした属性を、テーマと Sphinx の英語に戻す。"""
    for english, japanese in [*course_site.UI_JA_ATTRIBUTES.items(),
                              ('title="Link to this heading"', 'title="この見出しへのリンク"')]:
        html = html.replace(japanese, english)
    return html


def _count_without_number(js: str) -> str:
    """検索の件数の訳を、Sphinx の日本語の訳のとおりの空に戻す（件数の行が出ない）。"""
    key = '"Search finished, found one page matching the search query.": ['
    start = js.index(key) + len(key)
    return js[:start] + '\n            ""\n        ' + js[js.index("]", start):]


def _sphinx_snippets(js: str) -> str:
    """講座の抜き出し（本文の段落から）をやめ、Sphinx の抜き出し（[role=main] の全文から）に戻す。"""
    return js.replace("Search.makeSearchSummary = CourseSearch.summary;", "")


def _named(problems: list[str], name: str) -> list[str]:
    return [p for p in problems if p.startswith(name)]


def test_detects_raw_markdown_table(site, tmp_path):
    with altered_copy(site, tmp_path, {SHOWCASE: _as_pipe_text}) as copy:
        found = _named(raw_table_problems(measure(copy.page, copy.base + SHOWCASE, 1280)), RAW_TABLE)
    assert found and "| jax.lax |" in found[0], found


def test_detects_table_wider_than_its_column(site, tmp_path):
    with altered_copy(site, tmp_path, {SHOWCASE: _widen_table}) as copy:
        for width in WIDTHS:
            found = _named(wide_table_problems(measure(copy.page, copy.base + SHOWCASE, width)), WIDE_TABLE)
            assert found and "HLO の集団通信" in found[0], (width, found)


def test_detects_overflowing_equation(site, tmp_path):
    lesson = next(rel for rel in lesson_pages() if MATH_DIV in (site.out / rel).read_text(encoding="utf-8"))
    with altered_copy(site, tmp_path, {lesson: _long_equation}) as copy:
        layout = measure(copy.page, copy.base + lesson, 1280)
    assert _named(math_problems(layout), OVERFLOWING_MATH), (lesson, layout["math_overflow"])
    assert not _named(math_problems(layout), UNRENDERED_MATH), "足した式も MathJax で描かれる"


def test_detects_alt_that_is_a_path(site, tmp_path):
    with altered_copy(site, tmp_path, {SHOWCASE: _alt_is_path}) as copy:
        found = _named(alt_problems(measure(copy.page, copy.base + SHOWCASE, 1280)), PATH_ALT)
    assert found and all("_images/" in p for p in found), found


def test_detects_english_interface_string(site, tmp_path):
    with altered_copy(site, tmp_path, {SHOWCASE: _english_attributes}) as copy:
        copy.page.navigate(copy.base + SHOWCASE)
        found = _named(english_ui_problems(copy.page.evaluate(CHROME_JS)), ENGLISH_UI)
    words = {p.removeprefix(f"{ENGLISH_UI}: ") for p in found}
    assert {"Toggle", "sidebar", "Link", "heading"} <= words, found


def test_detects_search_without_count(site, tmp_path):
    with altered_copy(site, tmp_path, {"_static/translations.js": _count_without_number}) as copy:
        found = _named(search_problems(copy, "集団通信"), NO_COUNT)
    assert found, "件数の行を消しても見つからない"


def test_detects_snippet_of_theme_chrome(site, tmp_path):
    with altered_copy(site, tmp_path, {"_static/course-search.js": _sphinx_snippets}) as copy:
        found = _named(search_problems(copy, "shard_map"), CHROME_SNIPPET)
    assert found, "テーマの部品の抜き出しが見つからない"


# ---------------------------------------------------------------- issue 40 の欠陥を戻すと見つかること

def _without(snippet: str):
    """ファイルから snippet（直したところ）を取り除く書き換え。"""
    return lambda text: text.replace(snippet, "")


# 直したところ（site/_static の course.css・course.js・course-search.js）。取り除くと、もとのふるまいに戻る
PRINTED_TABLE_RULE = ".cell_output .course-printed-table pre { white-space: pre; overflow-wrap: normal; overflow-x: auto; }"
MATH_RULE = "div.math { flex-direction: row; justify-content: safe center; }"
FIGURE_MIN_RULE = ".cell_output img.course-figure { min-width: calc(var(--course-fig-w, 0px) * 0.7); }"
STACK_CALL = "CourseUI.stackTables();"
PHONE_CELL_WIDTH = "font-size: 0.85rem; min-width: 7.5em; }"  # 電話の幅のセル（もとは min-width: 0）
CLICK_GUARD = "e.preventDefault();  // 図を包むリンク（PNG そのもの）へは行かない"
ONE_PER_PAGE = "Search._performSearch = (...args) => CourseSearch.onePerPage(CourseSearch.allTerms(performSearch(...args), args[1]));"


def _figures_in_links(html: str) -> str:
    """図を、Sphinx が縮めた図にするように PNG へのリンクで包む（no-scaled-link のない、もとのサイト）。"""
    return re.sub(r'(<img alt="[^"]*" class="course-figure[^"]*"[^>]*? src="([^"]+)"[^>]*>)',
                  r'<a class="reference internal image-reference" href="\2">\1</a>', html)


def _api_names_unlinked(html: str) -> str:
    return re.sub(r'<a class="course-api[^"]*"[^>]*>(.*?)</a>', r"\1", html)


def test_detects_figure_that_leaves_the_page(site, tmp_path):
    changes = {"notebooks/6_8a_pipeline.html": _figures_in_links, "_static/course.js": _without(CLICK_GUARD)}
    with altered_copy(site, tmp_path, changes) as copy:
        layout = measure(copy.page, copy.base + "notebooks/6_8a_pipeline.html", 1280)
        clicks = figure_click_problems(copy.page, copy.base + "notebooks/6_8a_pipeline.html")
    assert _named(figure_size_problems(layout), FIGURE_LINK), layout["figure_links"]
    assert _named(clicks, FIGURE_LEAVES) and all("/_images/" in p for p in _named(clicks, FIGURE_LEAVES)), clicks


def test_detects_printed_table_that_wraps(site, tmp_path):
    with altered_copy(site, tmp_path, {"_static/course.css": _without(PRINTED_TABLE_RULE)}) as copy:
        layout = measure(copy.page, copy.base + "notebooks/6_7_cost_memory.html", 390)
    found = _named(printed_table_problems(layout), WRAPPED_TABLE)
    assert len(found) >= 5, found


def test_detects_equation_cut_on_the_left(site, tmp_path):
    with altered_copy(site, tmp_path, {"_static/course.css": _without(MATH_RULE)}) as copy:
        layout = measure(copy.page, copy.base + "notebooks/6_8b_sequence_expert.html", 390)
    assert _named(math_problems(layout), CUT_MATH), layout["math_cut"]


def test_detects_table_squeezed_into_thin_columns(site, tmp_path):
    changes = {"_static/course.js": _without(STACK_CALL),
               "_static/course.css": lambda css: css.replace(PHONE_CELL_WIDTH, "font-size: 0.85rem; min-width: 0; }")}
    with altered_copy(site, tmp_path, changes) as copy:
        layout = measure(copy.page, copy.base + "notebooks/6_5_summary.html", 390)
    found = _named(squeezed_table_problems(layout), SQUEEZED_TABLE)
    assert any("E01" in p for p in found), found


def test_detects_figure_shrunk_on_a_phone(site, tmp_path):
    with altered_copy(site, tmp_path, {"_static/course.css": _without(FIGURE_MIN_RULE)}) as copy:
        layout = measure(copy.page, copy.base + "notebooks/6_8a_pipeline.html", 390)
    found = _named(figure_size_problems(layout), SMALL_FIGURE)
    assert any(p.startswith(f"{SMALL_FIGURE}: 0.2") for p in found), found


def test_detects_api_name_without_link(site, tmp_path):
    with altered_copy(site, tmp_path, {SHOWCASE: _api_names_unlinked}) as copy:
        layout = measure(copy.page, copy.base + SHOWCASE, 1280)
    found = api_link_problems(layout)
    assert f"{UNLINKED_API}: jax.shard_map" in found and len(found) == layout["api_names"], found


def test_detects_duplicate_search_results(site, tmp_path):
    with altered_copy(site, tmp_path, {"_static/course-search.js": _without(ONE_PER_PAGE)}) as copy:
        found = _named(search_problems(copy, "シャーディング"), DUPLICATE_RESULT)
    assert found, "同じページが 2 度出ても見つからない"


def test_detects_missing_exercises(site, tmp_path):
    with altered_copy(site, tmp_path, {rel: None for rel in exercise_pages()}) as copy:
        found = _named(exercise_problems(copy.out), MISSING_EXERCISE)
    from ch6.grading import exercises as grading_exercises

    data = json.loads(grading_exercises.DATA.read_text(encoding="utf-8"))["notebooks"]
    assert len(found) == sum(len(nb["exercises"]) for nb in data.values()), found


def _solution_in_place_of_the_stub(notebook: str):
    """演習のページの、その演習の最初の「raise NotImplementedError」を、solutions/ の解答のコードに置き換える。"""
    import html

    block = next(b for b in build_site.solution_blocks() if b["notebook"] == notebook)
    sol = json.loads((ROOT / "solutions" / notebook).read_text(encoding="utf-8"))
    source = next(m.group(1) for c in sol["cells"] for m in [re.search(
        r"### BEGIN SOLUTION[^\n]*\n(.*?)[ \t]*### END SOLUTION", "".join(c["source"]), re.S)] if m)

    def change(text: str) -> str:
        stub = re.compile(r'<span class="k">raise</span>\s*<span class="ne">NotImplementedError</span>')
        assert stub.search(text), notebook
        return stub.sub(lambda m: html.escape(source.strip()), text, count=1)

    return block, change


def test_detects_solution_code_on_the_site(site, tmp_path):
    vmap_block, vmap_change = _solution_in_place_of_the_stub("6_1_vmap.ipynb")
    summary_block, summary_change = _solution_in_place_of_the_stub("6_5_summary.ipynb")
    assert vmap_block["lines"] and not summary_block["lines"], "6.5 の解答は短く、レッスンにもある行（return \"b\"）"
    changes = {"exercises/6_1_vmap.html": vmap_change, "exercises/6_5_summary.html": summary_change}
    with altered_copy(site, tmp_path, changes) as copy:
        found = _named(solution_problems(copy.out), SOLUTION_CODE)
    assert any("exercises/6_1_vmap.html" in p and vmap_block["lines"][0] in p for p in found), found
    assert any("exercises/6_5_summary.html" in p and summary_block["function"] in p for p in found), found


# ---------------------------------------------------------------- issue 48：電話・検索・リンク・印刷・フッタ

def copy_button_problems(layout: dict) -> list[str]:
    return [f"{COPY_COVERS_CODE}: {text}" for text in layout["copy_covering"]]


def card_problems(layout: dict) -> list[str]:
    return [f"{NEEDLESS_CARD}: {text}" for text in layout["needless_cards"]]


def code_break_problems(layout: dict) -> list[str]:
    return [f"{CODE_MIDWORD}: {text}" for text in layout["code_midword"]]


def test_phone_copy_buttons_and_cards(site):
    """電話の幅で、コピーのボタンはコードに重ならない。カードになるのは表のままでは収まらない表だけ。"""
    problems = _problems(site, lambda layout: copy_button_problems(layout) + card_problems(layout), widths=(390,))
    assert not problems, json.dumps(problems, ensure_ascii=False, indent=1)
    cards = sum(len(site.visits[rel].layout[390]["needless_cards"]) for rel in lesson_pages())
    assert cards == 0


def test_code_spans_do_not_break_mid_word_at_1280(site):
    problems = _problems(site, code_break_problems, widths=(1280,))
    assert not problems, json.dumps(problems, ensure_ascii=False, indent=1)


PRINT_RULE = "white-space: pre !important; overflow-wrap: normal !important;"
COPY_PHONE_RULE = "position: static; order: -1; "
CARD_FIT_CHECK = "if (phone && !CourseUI.squeezed(table)) return;"
CODE_BREAKS_CALL = "CourseUI.addCodeBreaks();"
CODE_SPAN_RULE = "code.literal, code.literal span.pre { white-space: normal; overflow-wrap: break-word; }"


def print_layout(page: Page, url: str) -> dict:
    page.set_viewport(794, 1123)
    page.send("Emulation.setEmulatedMedia", media="print")
    try:
        page.navigate(url)
        return page.evaluate(LAYOUT_JS)
    finally:
        page.send("Emulation.setEmulatedMedia", media="")
        page.set_viewport(1280, 900)


def test_detects_copy_button_over_code(site, tmp_path):
    with altered_copy(site, tmp_path, {"_static/course.css": _without(COPY_PHONE_RULE)}) as copy:
        layout = measure(copy.page, copy.base + SHOWCASE, 390)
    assert len(_named(copy_button_problems(layout), COPY_COVERS_CODE)) >= 5, layout["copy_covering"]


def test_detects_small_table_turned_into_cards(site, tmp_path):
    pages = [rel for rel in lesson_pages() + exercise_pages()
             if site.visits[rel].layout[390].get("needless_cards") == []
             and "<table" in (site.out / rel).read_text(encoding="utf-8")]
    with altered_copy(site, tmp_path, {"_static/course.js": _without(CARD_FIT_CHECK)}) as copy:
        found = [p for rel in pages for p in card_problems(measure(copy.page, copy.base + rel, 390))]
    assert found, "表のままで収まる表をカードにしても見つからない"


def test_detects_code_span_broken_mid_word(site, tmp_path):
    changes = {"_static/course.js": _without(CODE_BREAKS_CALL),
               "_static/course.css": lambda css: css.replace(CODE_SPAN_RULE, CODE_SPAN_RULE.replace("break-word", "anywhere"))
               .replace("article td code.literal, article td code.literal span.pre, article th code.literal,", "article td x,")}
    with altered_copy(site, tmp_path, changes) as copy:
        layout = measure(copy.page, copy.base + "notebooks/6_5_summary.html", 1280)
    assert _named(code_break_problems(layout), CODE_MIDWORD), "語の途中の折り返しが見つからない"


def test_detects_printed_table_wrapped_on_a4(site, tmp_path):
    rel = "notebooks/6_7_cost_memory.html"
    assert not printed_table_problems(print_layout(site.page, site.base + rel))
    def unfit(css):
        return css.replace(".cell_output .course-printed-table pre {\n    " + PRINT_RULE, ".course-none pre {\n    " + PRINT_RULE)
    with altered_copy(site, tmp_path, {"_static/course.css": unfit}) as copy:
        found = printed_table_problems(print_layout(copy.page, copy.base + rel))
    assert found, "A4 で折り返す印刷の表が見つからない"


def _api_guides_to_search(html: str) -> str:
    return re.sub(r'(<a class="course-api course-api-guide[^"]*" href=")[^"]*(" title="([^"]+)")',
                  r"\1https://docs.jax.dev/en/latest/search.html?q=\3\2", html)


def test_detects_api_name_sent_to_search(site, tmp_path):
    rel = "notebooks/6_3a_sharding.html"
    with altered_copy(site, tmp_path, {rel: _api_guides_to_search}) as copy:
        layout = measure(copy.page, copy.base + rel, 1280)
    found = api_entry_problems(layout)
    assert any("jax.reshard" in p and "search.html" in p for p in found), found


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


ZOOM_JS = """(async () => {
    const img = document.querySelectorAll('article img.course-figure')[%d];
    img.scrollIntoView({block: 'center'});
    await img.decode();
    img.click();
    const big = document.querySelector('.course-zoom img');
    await big.decode();
    return [big.getBoundingClientRect().width, document.documentElement.clientWidth];
})()"""


def zoom_problems(page: Page, url: str, k: int = 0) -> list[str]:
    """電話の幅で図 k を拡大：画面の幅に収まるか。ブラウザの「戻る」で拡大が閉じ、ページに残るか。"""
    page.set_viewport(390, 844, mobile=True)
    try:
        page.navigate(url)
        width, screen = page.evaluate(ZOOM_JS % k)
        out = [f"画面より広い拡大: {width:.0f} px（画面 {screen} px）"] if width > screen + 1 else []
        page.send("Runtime.evaluate", expression="history.back()")
        page.settle(0.8)
        here = page.evaluate("[location.href.split('#')[0], !!document.querySelector('.course-zoom')]")
        if here != [url, False]:
            out.append(f"「戻る」で拡大が閉じない、またはページを離れた: {here}")
        return out
    finally:
        page.set_viewport(1280, 900)


def term_note_problems(page: Page, url: str) -> list[str]:
    """電話の幅で用語のリンクをタップ：定義がその場に出て、ページは移らない。"""
    page.set_viewport(390, 844, mobile=True)
    try:
        page.navigate(url)
        found = page.evaluate("""(() => {
            const a = document.querySelector('article a.course-term');
            a.scrollIntoView({block: 'center'});
            const definition = a.dataset.definition || a.title;
            a.click();
            const note = a.nextElementSibling;
            return [definition, note && note.matches('.course-term-note') ? note.textContent : '', location.href];
        })()""")
        page.settle(0.5)
        out = [] if found[1] and found[0].split("：", 1)[-1][:20] in found[1] else [f"用語の定義が出ない: {found}"]
        if page.evaluate("location.href").split("#")[0] != url:
            out.append("用語をタップすると用語集へ移る（定義はツールチップだけ）")
        return out
    finally:
        page.set_viewport(1280, 900)


def test_phone_zoom_fits_back_closes_and_terms_show_definitions(site):
    rel = "notebooks/6_8a_pipeline.html"
    problems = zoom_problems(site.page, site.base + rel, 1) + term_note_problems(site.page, site.base + SHOWCASE)
    assert not problems, problems


def test_detects_zoom_and_term_defects(site, tmp_path):
    rel = "notebooks/6_8a_pipeline.html"
    changes = {"_static/course.js": lambda js: js.replace('big.className = "course-zoom-fit";', "")
               .replace('history.pushState({ courseZoom: true }, "");', "")
               .replace("CourseUI.addTermNotes();", "")}
    with altered_copy(site, tmp_path, changes) as copy:
        zoom = zoom_problems(copy.page, copy.base + rel, 1)
        terms = term_note_problems(copy.page, copy.base + SHOWCASE)
    assert any("画面より広い" in p for p in zoom) and any("戻る" in p for p in zoom), zoom
    assert terms, terms


def footer_problems(out: Path) -> list[str]:
    """どのページのフッタにも：講座の版、固定した JAX、ライセンスの行。作者が GitHub の短い名前（slug）でない。"""
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    pin = next(ln.split("==")[1].strip() for ln in (ROOT / "requirements.txt").read_text().splitlines() if ln.startswith("jax=="))
    slug = build_site.repo_url().rstrip("/").split("/")[-2]
    problems = []
    for path in sorted(out.rglob("*.html")):
        rel = path.relative_to(out).as_posix()
        if rel.startswith("_"):
            continue
        html = path.read_text(encoding="utf-8")
        footer = html[html.find("bd-footer-content"):] if "bd-footer-content" in html else ""
        for needed in (f"講座の版 {version}", f"JAX {pin}", "ライセンス"):
            if needed not in footer:
                problems.append(f"{rel}: フッタに「{needed}」がない")
        if re.search(rf"©\s*{re.escape(slug)}", footer):
            problems.append(f"{rel}: フッタの作者が {slug}")
    return problems


def test_every_page_has_version_jax_and_licence(site, tmp_path):
    assert not footer_problems(site.out)
    with altered_copy(site, tmp_path, {SHOWCASE: lambda html: html.replace("講座の版", "版")}) as copy:
        assert any(SHOWCASE in p for p in footer_problems(copy.out))
