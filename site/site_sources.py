"""サイトに載せるもの：レッスン・演習・資料のノートブックとページ、その題・前提・見出し、相対リンクの書き換え
（site/build_site.py とその部品が使います）。"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "site"
sys.path.insert(0, str(ROOT / "tools"))

from nbtemplate import repo_url  # noqa: E402

# リポジトリのファイル → サイトのページ（作業フォルダでの名前）。index と glossary は作る
PAGES = {"site/index.md": "index.md", "GLOSSARY.md": "glossary.md", "site/teachers.md": "teachers.md",
         "README.md": "maintainers.md"}
# 「6.1 の 3 節」「6.3b の 5.1 節」
SECTION_REF = re.compile(r"(6\.\d+[a-z]?) の (\d+(?:\.\d+)*) 節")


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


def exercise_pages() -> list[Path]:
    """演習のページになる exercises/*.ipynb（講座の順。レッスンのあるものだけ）。"""
    return [ex for ex in map(exercise_of, lessons()) if ex is not None]


def doc_pages() -> list[Path]:
    """docs/*.md（ワークショップの手引きなど。あれば資料のページになる）。"""
    return sorted((ROOT / "docs").glob("*.md"))


def off_nav() -> set[str]:
    """学習者の左の列にも検索にも出さないページ（作業フォルダの名前、拡張子なし）：docs/（ワークショップの手引き、
    アクセラレータの記録）と README（管理者・開発者へ）。先生方へのページと README からリンクで行けます。"""
    return {"maintainers"} | {f"docs/{d.stem}" for d in doc_pages()}


def site_pages() -> dict[str, str]:
    """リポジトリの相対パス → 作業フォルダの相対パス（サイトのページになるものすべて）。"""
    pages = dict(PAGES)
    for doc in doc_pages():
        pages[f"docs/{doc.name}"] = f"docs/{doc.name}"
    for nb in lessons():
        rel = f"notebooks/{nb.name}"
        pages[rel] = rel
    for ex in exercise_pages():
        rel = f"exercises/{ex.name}"
        pages[rel] = rel
    return pages


def lesson_number(lesson: Path) -> str:
    """6_3b_shard_map.ipynb → 6.3b。"""
    major, minor = lesson.stem.split("_")[:2]
    return f"{major}.{minor}"


def section_ids() -> dict[str, set[str]]:
    """レッスンの番号（6.3b）→ そのページの見出しの安定した id（sec-5-1 など）。"""
    from course_words import heading_ids

    out = {}
    for lesson in lessons():
        headings = markdown_headings("\n\n".join(_cell_text(c) for c in _cells(lesson) if c["cell_type"] == "markdown"))
        out[lesson_number(lesson)] = {i for i in heading_ids(headings) if i}
    return out


def section_anchor(label: str, ids: dict[str, set[str]] | None = None) -> str:
    """「6.1 の 3 節」→ "sec-3"（そのレッスンにその id があるときだけ。なければ ""）。"""
    m = SECTION_REF.search(label)
    if not m:
        return ""
    ids = section_ids() if ids is None else ids
    anchor = "sec-" + m.group(2).replace(".", "-")
    return anchor if anchor in ids.get(m.group(1), set()) else ""


_LINK = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s]+)\)")


def rewrite_links(text: str, source_rel: str, pages: dict[str, str], html: bool = False,
                  ids: dict[str, set[str]] | None = None) -> str:
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
            if not anchor and repo_rel.startswith("notebooks/"):  # 「6.1 の 3 節」は節へ
                anchor = section_anchor(label, ids)
            return f"[{label}]({new}{'#' + anchor if anchor else ''})"
        kind = "tree" if (ROOT / repo_rel).is_dir() else "blob"
        return f"[{label}]({repo_url()}/{kind}/main/{repo_rel}{'#' + anchor if anchor else ''})"

    return _LINK.sub(fix, text)


def _cells(nb_path: Path) -> list[dict]:
    return json.loads(nb_path.read_text(encoding="utf-8"))["cells"]


def _cell_text(cell: dict) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src
def lesson_title(lesson: Path) -> str:
    first = next(c for c in _cells(lesson) if c["cell_type"] == "markdown")
    return _cell_text(first).split("\n", 1)[0].lstrip("# ").strip()


def lesson_prerequisites(lesson: Path) -> str:
    """最初のセルの「**前提**：…」の段落（なければ ""）。"""
    first = next(c for c in _cells(lesson) if c["cell_type"] == "markdown")
    m = re.search(r"^\*\*前提\*\*[:：]\s*(.+)$", _cell_text(first), re.M)
    return m.group(1).strip() if m else ""


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
    from course_words import heading_ids

    headings = markdown_headings(path.read_text(encoding="utf-8"))
    for (_, title), anchor in zip(headings, heading_ids(headings)):
        if title.startswith(starts_with) and anchor:
            return anchor
    raise SystemExit(f"{path.name} に「{starts_with}」で始まる見出しがありません")
