"""電話の幅（issue 48）：コピーのボタンがコードに重ならない、収まる表はカードにしない、表のセルの名前が 2 行に
分かれない、拡大した図が画面に収まり「戻る」で閉じる、用語の定義がタップで出る。1280 px で本文のコードが語の途中で
折り返さない。欠陥を戻すと見つかること。
"""

from __future__ import annotations

import json

from tests.site.browser import Page
from tests.site.sitecheck import (
    BROWSER_MARKS,
    CODE_MIDWORD,
    COPY_COVERS_CODE,
    NEEDLESS_CARD,
    SHOWCASE,
    TABLE_CODE_SPLIT,
    altered_copy,
    exercise_pages,
    lesson_pages,
    measure,
    page_named,
    page_problems,
    page_without,
)

pytestmark = BROWSER_MARKS


# ---------------------------------------------------------------- issue 48：電話・検索・リンク・印刷・フッタ

def copy_button_problems(layout: dict) -> list[str]:
    return [f"{COPY_COVERS_CODE}: {text}" for text in layout["copy_covering"]]

def card_problems(layout: dict) -> list[str]:
    return [f"{NEEDLESS_CARD}: {text}" for text in layout["needless_cards"]]

def code_break_problems(layout: dict) -> list[str]:
    return [f"{CODE_MIDWORD}: {text}" for text in layout["code_midword"]]

def table_code_problems(layout: dict) -> list[str]:
    return [f"{TABLE_CODE_SPLIT}: {text}" for text in layout["table_code_split"]]

def test_table_identifiers_stay_whole_on_a_phone(site):
    """電話の幅で表のまま残る表のセルの名前（`print_saved_residuals`、`memory_analysis()`）は、1 行にしても表が列に
    収まるかぎり 2 行に分かれない（6.7 の 4.6 節の 2 列の表が print_saved_ / residuals に分かれていた）。"""
    problems = page_problems(site, table_code_problems, widths=(390,))
    assert not problems, json.dumps(problems, ensure_ascii=False, indent=1)

def test_phone_copy_buttons_and_cards(site):
    """電話の幅で、コピーのボタンはコードに重ならない。カードになるのは表のままでは収まらない表だけ。"""
    problems = page_problems(site, lambda layout: copy_button_problems(layout) + card_problems(layout), widths=(390,))
    assert not problems, json.dumps(problems, ensure_ascii=False, indent=1)
    cards = sum(len(site.visits[rel].layout[390]["needless_cards"]) for rel in lesson_pages())
    assert cards == 0

def test_code_spans_do_not_break_mid_word_at_1280(site):
    problems = page_problems(site, code_break_problems, widths=(1280,))
    assert not problems, json.dumps(problems, ensure_ascii=False, indent=1)

COPY_PHONE_RULE = "position: static; order: -1; "

CARD_FIT_CHECK = "if (phone && !CourseUI.squeezed(table)) return;"

CODE_BREAKS_CALL = "CourseUI.addCodeBreaks();"

CODE_SPAN_RULE = "code.literal, code.literal span.pre { white-space: normal; overflow-wrap: break-word; }"

def test_detects_copy_button_over_code(site, tmp_path):
    with altered_copy(site, tmp_path, {"_static/course.css": page_without(COPY_PHONE_RULE)}) as copy:
        layout = measure(copy.page, copy.base + SHOWCASE, 390)
    assert len(page_named(copy_button_problems(layout), COPY_COVERS_CODE)) >= 5, layout["copy_covering"]

def test_detects_small_table_turned_into_cards(site, tmp_path):
    pages = [rel for rel in lesson_pages() + exercise_pages()
             if site.visits[rel].layout[390].get("needless_cards") == []
             and "<table" in (site.out / rel).read_text(encoding="utf-8")]
    with altered_copy(site, tmp_path, {"_static/course.js": page_without(CARD_FIT_CHECK)}) as copy:
        found = [p for rel in pages for p in card_problems(measure(copy.page, copy.base + rel, 390))]
    assert found, "表のままで収まる表をカードにしても見つからない"

def test_detects_code_span_broken_mid_word(site, tmp_path):
    changes = {"_static/course.js": page_without(CODE_BREAKS_CALL),
               "_static/course.css": lambda css: css.replace(CODE_SPAN_RULE, CODE_SPAN_RULE.replace("break-word", "anywhere"))
               .replace("article td code.literal, article td code.literal span.pre, article th code.literal,", "article td x,")}
    with altered_copy(site, tmp_path, changes) as copy:
        layout = measure(copy.page, copy.base + "notebooks/6_5_summary.html", 1280)
    assert page_named(code_break_problems(layout), CODE_MIDWORD), "語の途中の折り返しが見つからない"

KEEP_CODE_WHOLE_CALL = "  CourseUI.keepCodeWhole();\n"

def test_detects_identifier_split_in_a_table_cell(site, tmp_path):
    changes = {"_static/course.js": lambda js: js.replace(KEEP_CODE_WHOLE_CALL, "")
               .replace("document.fonts.ready.then(() => CourseUI.keepCodeWhole())", "null")}
    with altered_copy(site, tmp_path, changes) as copy:
        layout = measure(copy.page, copy.base + "notebooks/6_7_cost_memory.html", 390)
    found = page_named(table_code_problems(layout), TABLE_CODE_SPLIT)
    assert any("print_saved_residuals" in p for p in found), found

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
