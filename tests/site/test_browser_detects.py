"""欠陥を見つける関数は、作ったサイトの写しにその欠陥を 1 つ戻すと（もとのふるまいに戻すと）、その欠陥を名指しする。"""

from __future__ import annotations

import json
import re

import build_site
import course_site

from tests.site import ROOT
from tests.site.browser import Page
from tests.site.sitecheck import (
    BROWSER_MARKS,
    CUT_MATH,
    ENGLISH_UI,
    FIGURE_LEAVES,
    FIGURE_LINK,
    MISSING_EXERCISE,
    OVERFLOWING_MATH,
    PATH_ALT,
    RAW_TABLE,
    SHOWCASE,
    SMALL_FIGURE,
    SOLUTION_CODE,
    SQUEEZED_TABLE,
    UNLINKED_API,
    UNRENDERED_MATH,
    WIDE_TABLE,
    WIDTHS,
    WRAPPED_TABLE,
    alt_problems,
    altered_copy,
    api_entry_problems,
    api_link_problems,
    english_ui_problems,
    exercise_pages,
    exercise_problems,
    figure_click_problems,
    figure_size_problems,
    lesson_pages,
    math_problems,
    measure,
    page_named,
    page_without,
    printed_table_problems,
    raw_table_problems,
    solution_problems,
    squeezed_table_problems,
    wide_table_problems,
)
from tests.site.sitejs import CHROME_JS, LAYOUT_JS

pytestmark = BROWSER_MARKS


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

def test_detects_raw_markdown_table(site, tmp_path):
    with altered_copy(site, tmp_path, {SHOWCASE: _as_pipe_text}) as copy:
        found = page_named(raw_table_problems(measure(copy.page, copy.base + SHOWCASE, 1280)), RAW_TABLE)
    assert found and "| jax.lax |" in found[0], found

def test_detects_table_wider_than_its_column(site, tmp_path):
    with altered_copy(site, tmp_path, {SHOWCASE: _widen_table}) as copy:
        for width in WIDTHS:
            found = page_named(wide_table_problems(measure(copy.page, copy.base + SHOWCASE, width)), WIDE_TABLE)
            assert found and "HLO の集団通信" in found[0], (width, found)

def test_detects_overflowing_equation(site, tmp_path):
    lesson = next(rel for rel in lesson_pages() if MATH_DIV in (site.out / rel).read_text(encoding="utf-8"))
    with altered_copy(site, tmp_path, {lesson: _long_equation}) as copy:
        layout = measure(copy.page, copy.base + lesson, 1280)
    assert page_named(math_problems(layout), OVERFLOWING_MATH), (lesson, layout["math_overflow"])
    assert not page_named(math_problems(layout), UNRENDERED_MATH), "足した式も MathJax で描かれる"

def test_detects_alt_that_is_a_path(site, tmp_path):
    with altered_copy(site, tmp_path, {SHOWCASE: _alt_is_path}) as copy:
        found = page_named(alt_problems(measure(copy.page, copy.base + SHOWCASE, 1280)), PATH_ALT)
    assert found and all("_images/" in p for p in found), found

def test_detects_english_interface_string(site, tmp_path):
    with altered_copy(site, tmp_path, {SHOWCASE: _english_attributes}) as copy:
        copy.page.navigate(copy.base + SHOWCASE)
        found = page_named(english_ui_problems(copy.page.evaluate(CHROME_JS)), ENGLISH_UI)
    words = {p.removeprefix(f"{ENGLISH_UI}: ") for p in found}
    assert {"Toggle", "sidebar", "Link", "heading"} <= words, found

# 直したところ（site/_static の course.css・course.js・course-search.js）。取り除くと、もとのふるまいに戻る
PRINTED_TABLE_RULE = ".cell_output .course-printed-table pre { white-space: pre; overflow-wrap: normal; overflow-x: auto; }"

MATH_RULE = "div.math { flex-direction: row; justify-content: safe center; }"

FIGURE_MIN_RULE = ".cell_output img.course-figure { min-width: calc(var(--course-fig-w, 0px) * 0.7); }"

STACK_CALL = "CourseUI.stackTables();"

PHONE_CELL_WIDTH = "font-size: 0.85rem; min-width: 7.5em; }"  # 電話の幅のセル（もとは min-width: 0）

CLICK_GUARD = "e.preventDefault();  // 図を包むリンク（PNG そのもの）へは行かない"

def _figures_in_links(html: str) -> str:
    """図を、Sphinx が縮めた図にするように PNG へのリンクで包む（no-scaled-link のない、もとのサイト）。"""
    return re.sub(r'(<img alt="[^"]*" class="course-figure[^"]*"[^>]*? src="([^"]+)"[^>]*>)',
                  r'<a class="reference internal image-reference" href="\2">\1</a>', html)

def _api_names_unlinked(html: str) -> str:
    return re.sub(r'<a class="course-api[^"]*"[^>]*>(.*?)</a>', r"\1", html)

def test_detects_figure_that_leaves_the_page(site, tmp_path):
    changes = {"notebooks/6_8a_pipeline.html": _figures_in_links, "_static/course.js": page_without(CLICK_GUARD)}
    with altered_copy(site, tmp_path, changes) as copy:
        layout = measure(copy.page, copy.base + "notebooks/6_8a_pipeline.html", 1280)
        clicks = figure_click_problems(copy.page, copy.base + "notebooks/6_8a_pipeline.html")
    assert page_named(figure_size_problems(layout), FIGURE_LINK), layout["figure_links"]
    assert page_named(clicks, FIGURE_LEAVES) and all("/_images/" in p for p in page_named(clicks, FIGURE_LEAVES)), clicks

def test_detects_printed_table_that_wraps(site, tmp_path):
    with altered_copy(site, tmp_path, {"_static/course.css": page_without(PRINTED_TABLE_RULE)}) as copy:
        layout = measure(copy.page, copy.base + "notebooks/6_7_cost_memory.html", 390)
    found = page_named(printed_table_problems(layout), WRAPPED_TABLE)
    assert len(found) >= 5, found

def test_detects_equation_cut_on_the_left(site, tmp_path):
    with altered_copy(site, tmp_path, {"_static/course.css": page_without(MATH_RULE)}) as copy:
        layout = measure(copy.page, copy.base + "notebooks/6_8b_sequence_expert.html", 390)
    assert page_named(math_problems(layout), CUT_MATH), layout["math_cut"]

def test_detects_table_squeezed_into_thin_columns(site, tmp_path):
    changes = {"_static/course.js": page_without(STACK_CALL),
               "_static/course.css": lambda css: css.replace(PHONE_CELL_WIDTH, "font-size: 0.85rem; min-width: 0; }")}
    with altered_copy(site, tmp_path, changes) as copy:
        layout = measure(copy.page, copy.base + "notebooks/6_5_summary.html", 390)
    found = page_named(squeezed_table_problems(layout), SQUEEZED_TABLE)
    assert any("E01" in p for p in found), found

def test_detects_figure_shrunk_on_a_phone(site, tmp_path):
    with altered_copy(site, tmp_path, {"_static/course.css": page_without(FIGURE_MIN_RULE)}) as copy:
        layout = measure(copy.page, copy.base + "notebooks/6_8a_pipeline.html", 390)
    found = page_named(figure_size_problems(layout), SMALL_FIGURE)
    assert any(p.startswith(f"{SMALL_FIGURE}: 0.2") for p in found), found

def test_detects_api_name_without_link(site, tmp_path):
    with altered_copy(site, tmp_path, {SHOWCASE: _api_names_unlinked}) as copy:
        layout = measure(copy.page, copy.base + SHOWCASE, 1280)
    found = api_link_problems(layout)
    assert f"{UNLINKED_API}: jax.shard_map" in found and len(found) == layout["api_names"], found

def test_detects_missing_exercises(site, tmp_path):
    with altered_copy(site, tmp_path, {rel: None for rel in exercise_pages()}) as copy:
        found = page_named(exercise_problems(copy.out), MISSING_EXERCISE)
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
        found = page_named(solution_problems(copy.out), SOLUTION_CODE)
    assert any("exercises/6_1_vmap.html" in p and vmap_block["lines"][0] in p for p in found), found
    assert any("exercises/6_5_summary.html" in p and summary_block["function"] in p for p in found), found

PRINT_RULE = "white-space: pre !important; overflow-wrap: normal !important;"

def print_layout(page: Page, url: str) -> dict:
    page.set_viewport(794, 1123)
    page.send("Emulation.setEmulatedMedia", media="print")
    try:
        page.navigate(url)
        return page.evaluate(LAYOUT_JS)
    finally:
        page.send("Emulation.setEmulatedMedia", media="")
        page.set_viewport(1280, 900)

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
