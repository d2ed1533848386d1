"""どのページも読み込めてリンクが切れず、ナビゲーション・ダウンロード・演習（解答なし）・画面の日本語・フッタがそろう。"""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from pathlib import Path

import build_site
import course_site
from nbtemplate import colab_url

from tests.site import ROOT
from tests.site.searchcheck import search
from tests.site.sitecheck import (
    BROWSER_MARKS,
    BUILD_LIMIT_S,
    PHONE_SHOTS,
    SCREENSHOTS,
    SHOWCASE,
    altered_copy,
    english_ui_problems,
    exercise_pages,
    exercise_problems,
    lesson_pages,
    page_ids,
    solution_problems,
)

pytestmark = BROWSER_MARKS


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
            elif fragment and path.suffix == ".html" and fragment not in page_ids(path, cache):
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
    ids = page_ids(site.out / "glossary.html", {})
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

def footer_problems(out: Path) -> list[str]:
    """どのページのフッタにも：講座の版、固定した JAX、ライセンスの行、API のリンクが最新の文書へ行くこと。作者が
    GitHub の短い名前（slug）でない。"""
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
        for needed in (f"講座の版 {version}", f"JAX {pin}", "ライセンス", "最新の文書"):
            if needed not in footer:
                problems.append(f"{rel}: フッタに「{needed}」がない")
        if re.search(rf"©\s*{re.escape(slug)}", footer):
            problems.append(f"{rel}: フッタの作者が {slug}")
    return problems

def test_every_page_has_version_jax_and_licence(site, tmp_path):
    assert not footer_problems(site.out)
    with altered_copy(site, tmp_path, {SHOWCASE: lambda html: html.replace("講座の版", "版")}) as copy:
        assert any(SHOWCASE in p for p in footer_problems(copy.out))
