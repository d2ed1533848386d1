#!/usr/bin/env python3
"""講座のウェブサイトを、ノートブックに保存された出力から作ります（何も実行しません。オフラインで動きます）。

    .venv/bin/python site/build_site.py                 # _site/ に（make site と同じ）
    .venv/bin/python site/build_site.py --out DIR       # ほかのフォルダに

作業フォルダ（build/site-src）に、サイトに載せるものだけを写してから Sphinx を動かします。
- notebooks/*.ipynb（講座の順。MyST の双子 notebooks/X.md は写さないので、2 つ目のページにはなりません）
- README.md → 最初のページ（index）、GLOSSARY.md → 用語集、site/teachers.md → 先生方へ
- 各レッスンの最初のセルの Colab バッジは、ローカルの SVG と「演習」「ダウンロード」のリンクに置き換えます
- サイトに載らないファイルへの相対リンク（CONTRIBUTING.md、exercises/…）は GitHub のリンクにします
警告はすべてエラーです（-W）。
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "site"
STAGING = ROOT / "build" / "site-src"
OUT = ROOT / "_site"
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(SITE))

from nbtemplate import BADGE, colab_url, repo_url  # noqa: E402

BADGE_SVG = "colab-badge.svg"
# リポジトリのファイル → サイトのページ（作業フォルダでの名前）
PAGES = {"README.md": "index.md", "GLOSSARY.md": "glossary.md", "site/teachers.md": "teachers.md"}


def course_key(path: Path) -> tuple:
    """講座の順：6_1 < 6_2 < 6_3a < 6_3b < … < 6_8a < 6_8b < 6_10。"""
    m = re.match(r"(\d+)_(\d+)([a-z]*)_", path.name)
    if not m:
        return (10**6, 0, "", path.name)
    return (int(m.group(1)), int(m.group(2)), m.group(3), path.name)


def lessons() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("*.ipynb"), key=course_key)


def exercise_of(lesson: Path) -> Path | None:
    ex = ROOT / "exercises" / lesson.name
    return ex if ex.exists() else None


def site_pages() -> dict[str, str]:
    """リポジトリの相対パス → 作業フォルダの相対パス（サイトのページになるものすべて）。"""
    pages = dict(PAGES)
    for nb in lessons():
        rel = f"notebooks/{nb.name}"
        pages[rel] = rel
    return pages


_LINK = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s]+)\)")


def rewrite_links(text: str, source_rel: str, pages: dict[str, str], html: bool = False) -> str:
    """相対リンクを、サイトのページならそのページへ、そうでなければ GitHub のファイルへ。

    html=True はセルの出力の Markdown（MyST の参照にならず、そのまま href になる）のため：ページの .html へ。
    """
    src_dir = Path(source_rel).parent
    staged_dir = Path(pages.get(source_rel, source_rel)).parent

    def fix(m: re.Match) -> str:
        label, target = m.group(1), m.group(2)
        if re.match(r"^[a-z]+:", target) or target.startswith(("#", "/", "<")):
            return m.group(0)
        path, _, anchor = target.partition("#")
        repo_rel = os.path.normpath(src_dir / path).replace(os.sep, "/")
        if repo_rel in pages:
            new = os.path.relpath(pages[repo_rel], staged_dir).replace(os.sep, "/")
            if html:
                new = str(Path(new).with_suffix(".html"))
            return f"[{label}]({new}{'#' + anchor if anchor else ''})"
        kind = "tree" if (ROOT / repo_rel).is_dir() else "blob"
        return f"[{label}]({repo_url()}/{kind}/main/{repo_rel}{'#' + anchor if anchor else ''})"

    return _LINK.sub(fix, text)


def local_badge(url: str) -> str:
    return f"[![Colab で開く](/{BADGE_SVG})]({url})"


def links_line(lesson: Path) -> str:
    """レッスンのページの先頭に置くリンク：Colab、演習、ダウンロード。"""
    parts = [local_badge(colab_url(f"notebooks/{lesson.name}"))]
    ex = exercise_of(lesson)
    if ex is not None:
        parts.append(f"[演習を Colab で開く]({colab_url(f'exercises/{ex.name}')})")
    parts.append(f"{{download}}`ノートブック（.ipynb）をダウンロード </_files/notebooks/{lesson.name}>`")
    if ex is not None:
        parts.append(f"{{download}}`演習（.ipynb）をダウンロード </_files/exercises/{ex.name}>`")
    return " ・ ".join(parts)


def stage_notebook(lesson: Path, dest: Path, pages: dict[str, str]) -> None:
    nb = json.loads(lesson.read_text(encoding="utf-8"))
    rel = f"notebooks/{lesson.name}"
    placed = False
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if not placed:
            if BADGE.search(text):
                text = BADGE.sub(lambda m: links_line(lesson), text, count=1)
            else:  # バッジがなければ題の次の行に
                lines = text.split("\n")
                text = "\n".join(lines[:1] + ["", links_line(lesson), ""] + lines[1:])
            placed = True
        text = BADGE.sub("", text)
        cell["source"] = rewrite_links(text, rel, pages)
    for cell in nb["cells"]:  # 出力の Markdown（6.5 のエラー索引など）のリンクも
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "text/markdown" in data:
                md = data["text/markdown"]
                md = "".join(md) if isinstance(md, list) else md
                data["text/markdown"] = rewrite_links(md, rel, pages, html=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(nb, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def exercises_table() -> str:
    """先生方へのページの表：節ごとの演習ノートブック（Colab とダウンロード）。"""
    rows = ["| 節 | レッスン | 演習を Colab で開く | 演習をダウンロード |", "|---|---|---|---|"]
    for lesson in lessons():
        ex = exercise_of(lesson)
        if ex is None:
            continue
        section = lesson.stem.split("_")[0] + "." + lesson.stem.split("_")[1]
        rows.append(
            f"| {section} | [{lesson.stem}](notebooks/{lesson.name}) "
            f"| [Colab]({colab_url(f'exercises/{ex.name}')}) "
            f"| {{download}}`{ex.name} </_files/exercises/{ex.name}>` |"
        )
    return "\n".join(rows)


def markdown_headings(text: str) -> list[tuple[int, str]]:
    """Markdown の見出し（深さ, 文字）。コードブロックの中の # は見出しではない。"""
    headings, fence = [], False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        elif not fence and (m := re.match(r"(#{1,6})\s+(.*?)\s*#*\s*$", line)):
            headings.append((len(m.group(1)), re.sub(r"[`*]", "", m.group(2))))
    return headings


def markdown_heading_id(path: Path, starts_with: str) -> str:
    """path の中で starts_with で始まる最初の見出しの、サイトでの id（course_site.heading_ids の規則）。"""
    from course_site import heading_ids

    headings = markdown_headings(path.read_text(encoding="utf-8"))
    for (_, title), anchor in zip(headings, heading_ids(headings)):
        if title.startswith(starts_with) and anchor:
            return anchor
    raise SystemExit(f"{path.name} に「{starts_with}」で始まる見出しがありません")


def toctree() -> str:
    names = "\n".join(f"notebooks/{nb.stem}" for nb in lessons())
    return (
        "\n\n```{toctree}\n:caption: レッスン\n:hidden:\n\n" + names + "\n```\n\n"
        "```{toctree}\n:caption: 資料\n:hidden:\n\nglossary\nteachers\n```\n"
    )


def stage(dest: Path = STAGING) -> list[str]:
    """作業フォルダを作り直し、サイトのソースを写す。写したページ（作業フォルダの相対パス）を返す。"""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    pages = site_pages()
    for repo_rel, staged in PAGES.items():
        text = (ROOT / repo_rel).read_text(encoding="utf-8")
        text = BADGE.sub(lambda m: local_badge(m.group(0).rsplit("](", 1)[1].rstrip(")")), text)
        text = rewrite_links(text, repo_rel, pages)
        if staged == "teachers.md":
            text = text.replace("<!-- exercises-table -->", exercises_table())
            text = text.replace("{readme-teachers}", "index.html#" + markdown_heading_id(ROOT / "README.md", "先生方へ"))
        if staged == "index.md":
            text += toctree()
        (dest / staged).write_text(text, encoding="utf-8")
    for lesson in lessons():
        stage_notebook(lesson, dest / "notebooks" / lesson.name, pages)
        # ダウンロード用にはもとのノートブック（バッジもそのまま）
        for original in (lesson, exercise_of(lesson)):
            if original is not None:
                (dest / "_files" / original.parent.name).mkdir(parents=True, exist_ok=True)
                shutil.copy2(original, dest / "_files" / original.parent.name / original.name)
    shutil.copy2(SITE / BADGE_SVG, dest / BADGE_SVG)
    return sorted(pages.values())


def build(out: Path = OUT, staging: Path = STAGING, quiet: bool = True) -> float:
    """サイトを作り、かかった秒数を返す。警告があれば SystemExit。"""
    from sphinx.cmd.build import build_main

    start = time.perf_counter()
    stage(staging)
    if out.exists():
        if any(out.iterdir()) and not (out / ".buildinfo").exists():
            raise SystemExit(f"{out} はサイトのフォルダではないので消しません")
        shutil.rmtree(out)
    doctrees = staging.parent / (staging.name + "-doctrees")
    shutil.rmtree(doctrees, ignore_errors=True)
    args = ["-b", "html", "-W", "--keep-going", "-n", "-c", str(SITE), "-d", str(doctrees), str(staging), str(out)]
    if quiet:
        args.insert(0, "-q")
    code = build_main(args)
    if code:
        raise SystemExit(f"サイトを作れませんでした（警告またはエラー、終了コード {code}）")
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
