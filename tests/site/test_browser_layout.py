"""1280 px と 390 px の配置：はみ出さない、表・数式・図・印刷された表・API 名のリンク・コード・印刷のスタイル。"""

from __future__ import annotations

import json

from tests.site.sitecheck import (
    BROWSER_MARKS,
    SHOWCASE,
    WIDTHS,
    alt_problems,
    api_entry_problems,
    api_link_problems,
    figure_click_problems,
    figure_size_problems,
    lesson_pages,
    math_problems,
    page_overflow_problems,
    page_problems,
    printed_table_problems,
    raw_table_problems,
    squeezed_table_problems,
    wide_table_problems,
)
from tests.site.sitejs import LAYOUT_JS

pytestmark = BROWSER_MARKS


def test_every_page_at_390_and_1280_px(site):
    """すべてのページ（レッスンはすべて）を電話の幅と画面の幅で見た。横にはみ出すページがない。"""
    assert set(lesson_pages()) <= set(site.content_pages())
    for rel in site.content_pages():
        assert set(site.visits[rel].layout) == set(WIDTHS), rel
        for w in WIDTHS:
            assert site.visits[rel].layout[w]["width"] <= w, (rel, w)
    wide = page_problems(site, page_overflow_problems)
    assert not wide, json.dumps(wide, ensure_ascii=False, indent=1)

def test_no_raw_markdown_tables(site):
    """出力の Markdown の表（6.3b の通信の表など）が |---| の文字のままではなく表になっている。"""
    raw = page_problems(site, raw_table_problems, widths=(1280,))
    assert not raw, json.dumps(raw, ensure_ascii=False, indent=1)
    html = (site.out / SHOWCASE).read_text(encoding="utf-8")
    assert html.count("<table") >= 2, "6.3b の出力の表が <table> になっていない"

def test_tables_fit_their_column(site):
    """どの表も本文の列の幅を超えない（1280 px でも 390 px でも。横にスクロールさせない）。"""
    wide = page_problems(site, wide_table_problems)
    assert not wide, json.dumps(wide, ensure_ascii=False, indent=1)

def test_math_is_rendered_and_fits(site):
    """数式は MathJax で描かれ（ネットから読み込まない）、1280 px では列に収まり、どの幅でも余計なスクロールバーがない。"""
    pages_with_math = [rel for rel in lesson_pages() if site.visits[rel].layout[1280]["math_count"]]
    assert len(pages_with_math) >= 3, pages_with_math
    problems = page_problems(site, math_problems)
    assert not problems, json.dumps(problems, ensure_ascii=False, indent=1)

def test_figures_have_descriptions_not_paths(site):
    """図の alt は出力が持つ図の説明（「図：…」）。ファイルのパスや空ではない。"""
    bad = page_problems(site, alt_problems, widths=(1280,))
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
    problems = page_problems(site, lambda layout: layout["figure_links"], widths=(1280,))
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
    problems = page_problems(site, printed_table_problems)
    assert not problems, json.dumps(problems, ensure_ascii=False, indent=1)

def test_tables_with_many_columns_become_cards_on_a_phone(site):
    """列の多い表（6.5 のエラー索引など）は、電話の幅で細い列につぶれない（3 列以上の表は 1 行 1 枚のカードになる）。"""
    problems = page_problems(site, squeezed_table_problems, widths=(390,))
    assert not problems, json.dumps(problems, ensure_ascii=False, indent=1)
    summary = site.visits["notebooks/6_5_summary.html"].layout
    assert summary[390]["width"] == 390

def test_wide_figures_stay_readable_on_a_phone(site):
    """電話の幅で、図は表示の大きさの 0.6 倍より小さくならない（6.8a のスケジュールは枠の中で横にスクロール）。"""
    problems = page_problems(site, figure_size_problems)
    assert not problems, json.dumps(problems, ensure_ascii=False, indent=1)

def test_api_names_link_to_the_reference(site):
    """本文のコードの中の jax. / lax. / jnp. の名前は、どれも docs.jax.dev のそのページへリンクする。"""
    names = sum(site.visits[rel].layout[1280]["api_names"] for rel in site.content_pages())
    assert names > 200, names
    problems = page_problems(site, api_link_problems, widths=(1280,))
    assert not problems, json.dumps(problems, ensure_ascii=False, indent=1)
    links = site.visits["notebooks/6_3b_shard_map.html"].links
    assert "https://docs.jax.dev/en/latest/_autosummary/jax.lax.psum.html" in links
    assert "https://docs.jax.dev/en/latest/_autosummary/jax.shard_map.html" in links
    off = page_problems(site, api_entry_problems, widths=(1280,))
    assert not off, json.dumps(off, ensure_ascii=False, indent=1)

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
    outputs = page_problems(site, lambda layout: layout["outputs_scrolling"])
    assert not outputs, json.dumps(outputs, ensure_ascii=False, indent=1)

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
