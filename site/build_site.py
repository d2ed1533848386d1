#!/usr/bin/env python3
"""講座のウェブサイトを、ノートブックに保存された出力から作ります（何も実行しません。オフラインで動きます）。

    .venv/bin/python site/build_site.py                 # _site/ に（make site と同じ）
    .venv/bin/python site/build_site.py --out DIR       # ほかのフォルダに

作業フォルダ（build/site-src）に、サイトに載せるものだけを写してから Sphinx を動かします。
- notebooks/*.ipynb（講座の順。MyST の双子 notebooks/X.md は写さないので、2 つ目のページにはなりません）
- exercises/*.ipynb → 演習のページ（問題の文・必須と自由・ヒント・書き込む形。solutions/ は読むだけで写しません。
  できたサイトに解答のコードがあれば、作るのをやめます：solution_leaks）
- site/index.md → 学習者のための最初のページ（レッスンの一覧は各ノートブックの題・前提・分量から作ります）
- ch6/glossary.toml → 用語集（用語ごとに #term-英語 のアンカー）、site/teachers.md → 先生方へ、
  README.md → 管理者・開発者へ、docs/*.md（あれば）→ 資料のページ
- 各レッスンの最初のセルの Colab バッジは、題のすぐ下の「Colab・演習・ダウンロード・印刷」の行に置き換えます
- サイトに載らないファイルへの相対リンク（CONTRIBUTING.md、solutions/…）は GitHub のリンクにします
- 図の代替テキスト（alt）は、保存された出力の図の文字の形（text/plain、X.outputs.txt の 1 行と同じもの）から
- ノートブックをまとめた zip（ch6-notebooks.zip、いつ作っても同じバイト列。最初のページからダウンロード）
部品：site_sources.py（載せるものと相対リンク）、site_pages.py（ページの部品）、site_leaks.py（解答を載せない）。
MathJax は pip のパッケージ（sphinx-mathjax-offline）から必要なファイルだけを写します（ネットから読み込みません）。
Sphinx は作業フォルダの隣（build/site-html）に書き、できたものを _site/ に写すので、リポジトリに何も残りません。
警告はすべてエラーです（-W）。
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from site_leaks import solution_blocks, solution_leaks  # noqa: F401
from site_pages import (
    BADGE,
    BADGE_SVG,
    docs_list,
    exercises_table,
    figure_alts,
    glossary_page,
    lessons_list,
    local_badge,
    stage_notebook,
    toctree,
)
from site_sources import (  # noqa: F401
    PAGES,
    ROOT,
    SITE,
    course_key,
    doc_pages,
    exercise_of,
    exercise_pages,
    lesson_number,
    lesson_title,
    lessons,
    markdown_heading_id,
    markdown_headings,
    off_nav,
    repo_url,
    rewrite_links,
    section_ids,
    site_pages,
)

STAGING = ROOT / "build" / "site-src"
OUT = ROOT / "_site"
ARCHIVE = "/_files/ch6-notebooks.zip"

def mathjax_dir() -> Path:
    """pip のパッケージ sphinx-mathjax-offline が持つ MathJax 3（requirements.txt で版を固定）。"""
    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("MathJax がありません: .venv/bin/pip install -r requirements.txt（sphinx-mathjax-offline）")
    return Path(next(iter(spec.submodule_search_locations))) / "static" / "mathjax"


# サイトに写す MathJax のファイル（TeX の入力と CHTML の出力、その字形、必要に応じて読み込む拡張）
MATHJAX_FILES = ["tex-chtml.js", "output/chtml/fonts/woff-v2", "input/tex/extensions"]


def stage_mathjax(dest: Path) -> None:
    src = mathjax_dir()
    for rel in MATHJAX_FILES:
        target = dest / "mathjax" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if (src / rel).is_dir():
            shutil.copytree(src / rel, target)
        else:
            shutil.copy2(src / rel, target)


def write_archive(path: Path) -> None:
    """レッスンと演習のノートブックをまとめた zip。中身の順と時刻を決めておくので、いつ作っても同じバイト列。"""
    path.parent.mkdir(parents=True, exist_ok=True)
    files = [("README.md", ROOT / "README.md"), ("GLOSSARY.md", ROOT / "GLOSSARY.md")]
    for lesson in lessons():
        files.append((f"notebooks/{lesson.name}", lesson))
        ex = exercise_of(lesson)
        if ex is not None:
            files.append((f"exercises/{ex.name}", ex))
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, src in files:
            info = zipfile.ZipInfo(f"ch6-notebooks/{name}", date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, src.read_bytes())


def stage(dest: Path = STAGING) -> list[str]:
    """作業フォルダを作り直し、サイトのソースを写す。写したページ（作業フォルダの相対パス）を返す。"""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    pages = site_pages()
    ids = section_ids()
    sources = {repo_rel: staged for repo_rel, staged in pages.items() if not repo_rel.startswith("notebooks/")}
    for repo_rel, staged in sources.items():
        if staged == "glossary.md":
            text = glossary_page()
        else:
            text = (ROOT / repo_rel).read_text(encoding="utf-8")
            text = BADGE.sub(lambda m: local_badge(m.group(0).rsplit("](", 1)[1].rstrip(")")), text)
            text = rewrite_links(text, repo_rel, pages, ids=ids)
        if staged == "teachers.md":
            text = text.replace("<!-- exercises-table -->", exercises_table())
            text = text.replace("<!-- docs-pages -->", docs_list())
            text = text.replace("{readme-teachers}", "maintainers.html#" + markdown_heading_id(ROOT / "README.md", "先生方へ"))
        if staged == "maintainers.md":  # README の題を、このページの題に
            text = "# 管理者・開発者へ：リポジトリの README\n\n" + text.split("\n", 1)[1]
        if staged == "index.md":
            text = text.replace("<!-- lessons -->", lessons_list()).replace("{archive}", ARCHIVE)
            text += toctree()
        if staged.removesuffix(".md") in off_nav():  # 目次に入れないページ（Sphinx に孤立したページと伝える）
            text = "---\norphan: true\n---\n\n" + text
        (dest / staged).parent.mkdir(parents=True, exist_ok=True)
        (dest / staged).write_text(text, encoding="utf-8")
    alts: dict[str, str] = {}
    for ex in exercise_pages():
        stage_notebook(ex, dest / "exercises" / ex.name, pages, ids)
        alts.update(figure_alts(ex))
    for lesson in lessons():
        stage_notebook(lesson, dest / "notebooks" / lesson.name, pages, ids)
        alts.update(figure_alts(lesson))
        # ダウンロード用にはもとのノートブック（バッジもそのまま）
        for original in (lesson, exercise_of(lesson)):
            if original is not None:
                (dest / "_files" / original.parent.name).mkdir(parents=True, exist_ok=True)
                shutil.copy2(original, dest / "_files" / original.parent.name / original.name)
    (dest / "_figure_alts.json").write_text(json.dumps(alts, ensure_ascii=False, indent=1, sort_keys=True), encoding="utf-8")
    (dest / "_off_nav.json").write_text(json.dumps(sorted(off_nav())), encoding="utf-8")
    (dest / "_section_ids.json").write_text(json.dumps({k: sorted(v) for k, v in ids.items()}, indent=1), encoding="utf-8")
    (dest / "_lessons.json").write_text(json.dumps(
        {lesson_number(n): f"notebooks/{n.stem}" for n in lessons()}, indent=1), encoding="utf-8")
    (dest / "_exercises.json").write_text(json.dumps(
        {lesson_number(n): f"exercises/{n.stem}" for n in exercise_pages()}, indent=1), encoding="utf-8")
    write_archive(dest / ARCHIVE.lstrip("/"))
    stage_mathjax(dest / "_mathjax")
    shutil.copy2(SITE / BADGE_SVG, dest / BADGE_SVG)
    return sorted(pages.values())


def build(out: Path = OUT, staging: Path = STAGING, quiet: bool = True) -> float:
    """サイトを作り、かかった秒数を返す。警告があれば SystemExit。

    Sphinx は作業フォルダの隣（…-html）に書き、myst-nb の jupyter_execute/ もその隣にできる。できたものを out に写す。
    """
    from sphinx.cmd.build import build_main

    start = time.perf_counter()
    stage(staging)
    if out.exists():
        if any(out.iterdir()) and not (out / ".buildinfo").exists():
            raise SystemExit(f"{out} はサイトのフォルダではないので消しません")
    html = staging.parent / (staging.name + "-html")
    doctrees = staging.parent / (staging.name + "-doctrees")
    for old in (html, doctrees, staging.parent / "jupyter_execute"):
        shutil.rmtree(old, ignore_errors=True)
    args = ["-b", "html", "-W", "--keep-going", "-n", "-c", str(SITE), "-d", str(doctrees), str(staging), str(html)]
    if quiet:
        args.insert(0, "-q")
    code = build_main(args)
    if code:
        raise SystemExit(f"サイトを作れませんでした（警告またはエラー、終了コード {code}）")
    leaks = solution_leaks(html)
    if leaks:
        raise SystemExit("サイトに解答のコードがあります（載せません）:\n" + "\n".join(leaks[:20]))
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(html, out)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="出力のフォルダ（既定 _site）")
    parser.add_argument("--verbose", action="store_true", help="Sphinx の進み具合を表示する")
    args = parser.parse_args(argv)
    seconds = build(args.out.resolve(), quiet=not args.verbose)
    shown = args.out.resolve()
    shown = shown.relative_to(ROOT) if shown.is_relative_to(ROOT) else shown
    print(f"サイトを {shown}/ に作りました（{seconds:.1f} 秒、{len(site_pages())} ページ）: {shown}/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
