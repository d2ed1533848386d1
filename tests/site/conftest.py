"""ウェブサイトを作り（make site と同じ）、127.0.0.1 で配って、ヘッドレス Chromium で全ページを確かめる。

    make test-site     # CH6_SITE=1 で、test_browser_*.py を動かす（Chromium は apt-get install chromium で）

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
API リファレンス（docs.jax.dev の最新の文書。版ごとの文書はなく、フッタがそう書く）へリンクする。検索の結果に
同じページが 2 度出ない。表のまま残る表のセルの名前（print_saved_residuals）は、収まるかぎり 2 行に分かれない。

欠陥を見つける確かめ（生の Markdown の表、列より広い表、件数のない検索、テーマの部品の抜き出し、はみ出す数式、
パスの alt、画面の英語、それに上の電話の幅・図のクリック・演習・解答・API 名・検索の重なり）は、どれも問題の一覧を
返す関数（raw_table_problems など）。本物のサイトでは一覧が空で、test_detects_* は、作ったサイトの写しのページに
その欠陥を 1 つ戻すと（もとのふるまいに戻すと）、関数がその欠陥を名指しすることを確かめる。

スクリーンショットは build/site-screenshots/（CH6_SITE_SCREENSHOTS で変えられる）に：最初のページ（landing.png）、
1 つのレッスンの 1280 px と 390 px（lesson-6_3b-1280.png、lesson-6_3b-390.png）、用語集（glossary.png）、
「集団通信」の検索（search-shudan-tsushin.png）、lessons/ にレッスンごとに 1 枚、phone/ に電話の幅（390 px）で
直したところ（6.5 のエラー索引、6.7 の印刷された表、6.8a のスケジュール、6.10 の数式、演習のページ）。

ファイルの分け方：conftest.py（サイトを 1 度だけ作り、全ページを 2 つの幅で測る session の fixture）、sitejs.py（ページで
測る JavaScript）、sitecheck.py（欠陥の名前と、それを見つける関数、サイトの写しに欠陥を戻す altered_copy）、
searchcheck.py（検索のページを読む関数）。テストは話題ごとに：test_browser_pages.py（ページ・リンク・演習・フッタ）、
test_browser_search.py（検索）、test_browser_layout.py（幅・表・数式・図・API 名・印刷）、test_browser_phone.py
（電話の幅のコピーのボタン・カード・図の拡大・用語、1280 px の本文のコード）、test_browser_detects.py（欠陥を戻すと
見つかること）。
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import build_site
import pytest

from tests.site.browser import Chromium, find_chromium, serve
from tests.site.sitecheck import PHONE_SHOTS, SCREENSHOTS, SHOWCASE, Site, Visit, lesson_pages
from tests.site.sitejs import CHROME_JS, LAYOUT_JS


# サイトを作り全ページを測るのは数分かかるので、すべての test_browser_*.py で 1 度だけ（session）
@pytest.fixture(scope="session")
def browser():
    binary = find_chromium()
    if binary is None:
        message = "Chromium が見つかりません（Debian: apt-get update && apt-get install -y chromium fonts-noto-cjk）"
        if os.environ.get("CI"):
            pytest.fail(message + "。CI ではこのテストを必ず動かします")
        pytest.skip(message)
    with Chromium(binary) as chromium:
        yield chromium

@pytest.fixture(scope="session")
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
