"""ブラウザのテスト（test_browser_*.py）が共有するもの：サイトと訪ねたページ（Site、Visit）、欠陥の名前と、
測った値からそれを見つける関数、作ったサイトの写しに欠陥を戻す altered_copy。
"""

from __future__ import annotations

import contextlib
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

from tests.site import ROOT
from tests.site.browser import Page, serve
from tests.site.sitejs import LAYOUT_JS

BROWSER_MARKS = [
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

TABLE_CODE_SPLIT = "電話の幅の表のセルで 2 行に分かれる名前のコード"

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

def page_ids(path: Path, cache: dict) -> set[str]:
    if path not in cache:
        cache[path] = set(re.findall(r'\bid="([^"]+)"', path.read_text(encoding="utf-8", errors="replace")))
    return cache[path]

def page_problems(site: Site, check, widths=WIDTHS) -> dict[str, list]:
    """すべてのページの、幅ごとの測った値に check（raw_table_problems など）をかけた結果（問題のあるものだけ）。"""
    found = {}
    for rel in site.content_pages():
        for w in widths:
            value = check(site.visits[rel].layout[w])
            if value:
                found[f"{rel} @{w}px"] = value
    return found

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

def page_named(problems: list[str], name: str) -> list[str]:
    return [p for p in problems if p.startswith(name)]

# ---------------------------------------------------------------- issue 40 の欠陥を戻すと見つかること

def page_without(snippet: str):
    """ファイルから snippet（直したところ）を取り除く書き換え。"""
    return lambda text: text.replace(snippet, "")
