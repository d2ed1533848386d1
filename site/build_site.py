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
MathJax は pip のパッケージ（sphinx-mathjax-offline）から必要なファイルだけを写します（ネットから読み込みません）。
Sphinx は作業フォルダの隣（build/site-html）に書き、できたものを _site/ に写すので、リポジトリに何も残りません。
警告はすべてエラーです（-W）。
"""
from __future__ import annotations

import argparse
import hashlib
import html
import importlib.util
import json
import os
import re
import shutil
import sys
import time
import zipfile
from base64 import b64decode
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "site"
STAGING = ROOT / "build" / "site-src"
OUT = ROOT / "_site"
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(SITE))

from nbtemplate import BADGE, colab_url, repo_url  # noqa: E402

BADGE_SVG = "colab-badge.svg"
# リポジトリのファイル → サイトのページ（作業フォルダでの名前）。index と glossary は作る
PAGES = {"site/index.md": "index.md", "GLOSSARY.md": "glossary.md", "site/teachers.md": "teachers.md",
         "README.md": "maintainers.md"}
ARCHIVE = "/_files/ch6-notebooks.zip"
# 保存された出力の図の説明（ch6.show が text/plain に入れる「<図: …>」）
_FIGURE_TEXT = re.compile(r"^<図[:：]\s*(.*?)>?$", re.S)
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
    from course_site import heading_ids

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


def local_badge(url: str) -> str:
    return f"[![Colab で開く](/{BADGE_SVG})]({url})"


def _cells(nb_path: Path) -> list[dict]:
    return json.loads(nb_path.read_text(encoding="utf-8"))["cells"]


def _cell_text(cell: dict) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def links_line(lesson: Path) -> str:
    """レッスンの題のすぐ下に置くリンクの行：Colab、演習（サイトのページと Colab）、ダウンロード（印刷のボタンは course.js が足す）。"""
    parts = [local_badge(colab_url(f"notebooks/{lesson.name}"))]
    ex = exercise_of(lesson)
    if ex is not None:
        parts.append(f"[演習の問題を読む](../exercises/{ex.name})")
        parts.append(f"[演習を Colab で開く]({colab_url(f'exercises/{ex.name}')})")
    parts.append(f"{{download}}`ノートブック（.ipynb） </_files/notebooks/{lesson.name}>`")
    if ex is not None:
        parts.append(f"{{download}}`演習（.ipynb） </_files/exercises/{ex.name}>`")
    items = "\n".join(f"- {p}" for p in parts)
    return f":::{{container}} course-links\n{items}\n:::"


def exercise_links_line(exercise: Path) -> str:
    """演習のページの題の下のリンクの行：Colab で解く、ダウンロード、本編のレッスンへ。"""
    parts = [local_badge(colab_url(f"exercises/{exercise.name}")),
             f"{{download}}`演習（.ipynb） </_files/exercises/{exercise.name}>`",
             f"[本編のレッスンへ](../notebooks/{exercise.name})"]
    items = "\n".join(f"- {p}" for p in parts)
    return f":::{{container}} course-links\n{items}\n:::"


def exercise_note() -> str:
    """演習のページの初めに置く、解き方の案内（答えはサイトに載せない）。"""
    return (":::{note}\nこのページは問題を読むためのものです。解くときは、上の Colab のボタンか、ダウンロードした"
            "ノートブックで、各問題の `# TODO` の部分を書いてセルを実行してください。すぐ下の `ch6.check(...)` が"
            "隠し入力で確かめ、✅・❌（理由とヒント）・⏳ の 1 行を表示します。答えはこのサイトには載っていません。\n:::")


def figure_alts(lesson: Path) -> dict[str, str]:
    """図の PNG（中身の sha256。myst-nb の画像のファイル名と同じ）→ 代替テキスト（図の文字の形）。

    文字の形は ch6.show / ch6.draw が出力の text/plain に入れたもの（tools/twins.py が X.outputs.txt に
    「[PNG 幅×高さ sha256:…] <図: …>」の 1 行として写すものと同じ）です。
    """
    alts = {}
    for cell in _cells(lesson):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" not in data:
                continue
            png = data["image/png"]
            png = "".join(png) if isinstance(png, list) else png
            plain = data.get("text/plain", "")
            plain = ("".join(plain) if isinstance(plain, list) else plain).strip()
            m = _FIGURE_TEXT.match(plain)
            text = f"図：{m.group(1).strip()}" if m else plain
            if not text or text.startswith("<Figure") or text.startswith("<IPython"):
                text = f"{lesson_number(lesson)} の図"
            alts[hashlib.sha256(b64decode(png)).hexdigest()] = text
    return alts


def stage_notebook(lesson: Path, dest: Path, pages: dict[str, str], ids: dict[str, set[str]] | None = None) -> None:
    """レッスン（notebooks/）か演習（exercises/）のノートブックを作業フォルダへ。題の下にリンクの行を置く。"""
    nb = json.loads(lesson.read_text(encoding="utf-8"))
    exercise = lesson.parent.name == "exercises"
    rel = f"{lesson.parent.name}/{lesson.name}"
    if exercise and any("### BEGIN SOLUTION" in _cell_text(c) for c in nb["cells"]):
        raise SystemExit(f"{rel} に解答の印（### BEGIN SOLUTION）があります。サイトには載せません")
    placed = False
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text = BADGE.sub("", _cell_text(cell))
        if not placed:  # 題（最初の行）のすぐ下に、リンクの行
            lines = text.split("\n")
            head = [exercise_links_line(lesson), "", exercise_note()] if exercise else [links_line(lesson)]
            text = "\n".join(lines[:1] + ["", *head, ""] + lines[1:])
            text = re.sub(r"\n{3,}", "\n\n", text).rstrip() + "\n"
            placed = True
        cell["source"] = rewrite_links(text, rel, pages, ids=ids)
    for cell in nb["cells"]:  # 出力の Markdown（6.5 のエラー索引など）のリンクも
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "text/markdown" in data:
                md = data["text/markdown"]
                md = "".join(md) if isinstance(md, list) else md
                data["text/markdown"] = rewrite_links(md, rel, pages, html=True, ids=ids)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(nb, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def lesson_title(lesson: Path) -> str:
    first = next(c for c in _cells(lesson) if c["cell_type"] == "markdown")
    return _cell_text(first).split("\n", 1)[0].lstrip("# ").strip()


def lesson_prerequisites(lesson: Path) -> str:
    """最初のセルの「**前提**：…」の段落（なければ ""）。"""
    first = next(c for c in _cells(lesson) if c["cell_type"] == "markdown")
    m = re.search(r"^\*\*前提\*\*[:：]\s*(.+)$", _cell_text(first), re.M)
    return m.group(1).strip() if m else ""


def _workshop_times():
    """ワークショップの手引きの時間の数え方（docs/workshop_times.py、あれば）。最初のページの目安もそれに合わせる。"""
    path = ROOT / "docs" / "workshop_times.py"
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location("course_workshop_times", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module if hasattr(module, "lesson") and hasattr(module, "exercises") else None


def lesson_minutes(lesson: Path) -> int:
    """学習時間の目安（分、5 分単位）：読む時間と演習の時間。

    数え方は docs/workshop_times.py（ワークショップの手引きの表と同じ）。それがなければ、本文 1 分 400 字、
    コードセル 1 つ 0.5 分、演習 1 問 10 分。
    """
    solution = ROOT / "solutions" / lesson.name
    times = _workshop_times()
    if times is not None:
        minutes = times.lesson(lesson)["read_min"] + (times.exercises(solution)["exercise_min"] if solution.exists() else 0)
    else:
        cells = _cells(lesson)
        prose = sum(len(_cell_text(c)) for c in cells if c["cell_type"] == "markdown")
        code = sum(1 for c in cells if c["cell_type"] == "code")
        n_ex = sum(_cell_text(c).count("### BEGIN SOLUTION") for c in _cells(solution)) if solution.exists() else 0
        minutes = prose / 400 + code * 0.5 + n_ex * 10
    return max(10, int(round(minutes / 5.0)) * 5)


def lessons_list() -> str:
    """最初のページのレッスンの一覧（題・前提・時間の目安・演習）。時間の数え方はワークショップの手引きと同じ。"""
    out = []
    for lesson in lessons():
        ex = exercise_of(lesson)
        meta = [f"目安 {lesson_minutes(lesson)} 分"]
        meta.append(f"[演習あり](exercises/{ex.stem})" if ex is not None else "演習なし")
        item = f"- **[{lesson_title(lesson)}](notebooks/{lesson.stem})**（{'・'.join(meta)}）"
        pre = lesson_prerequisites(lesson)
        if pre:
            item += f"\\\n  前提：{rewrite_links(pre, 'README.md', site_pages())}"
        out.append(item)
    return "\n".join(out)


def exercises_table() -> str:
    """先生方へのページの表：節ごとの演習ノートブック（Colab とダウンロード）。"""
    rows = ["| レッスン | 演習を Colab で開く | 演習をダウンロード |", "|---|---|---|"]
    for lesson in lessons():
        ex = exercise_of(lesson)
        if ex is None:
            continue
        rows.append(
            f"| [{lesson_title(lesson)}](notebooks/{lesson.name}) "
            f"| [Colab]({colab_url(f'exercises/{ex.name}')}) "
            f"| {{download}}`{ex.name} </_files/exercises/{ex.name}>` |"
        )
    return "\n".join(rows)


def glossary_page() -> str:
    """用語集のページ：ch6/glossary.toml の用語を、表ではなく定義の並びで（用語ごとに #term-英語 のアンカー。
    アンカーは site/course_site.py の GlossaryAnchors が付けます）。"""
    from course_site import glossary_terms

    lines = [
        "# 用語集",
        "",
        "講座のノートブックは、1 つの概念に 1 つの用語を使います。各ノートブックで初めて使うところでは英語を 1 度添えます。",
        "検索欄に英語（collective、sharding など）を入れても、その日本語の用語を使うページが見つかります。",
        f"正本はリポジトリの [`ch6/glossary.toml`]({repo_url()}/blob/main/ch6/glossary.toml) です。",
        "",
    ]
    for term in glossary_terms():
        en = term["en"]
        head = term["ja"] if term["ja"] == en.split(" (")[0] else f"{term['ja']}（{en}）"
        body = term["definition"]
        if term.get("api"):
            body += f"\u3000API：`{term['api']}`"
        lines += [head, f": {body}", ""]
    return "\n".join(lines)


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
    exercises = "\n".join(f"exercises/{ex.stem}" for ex in exercise_pages())
    docs = "".join(f"docs/{d.stem}\n" for d in doc_pages())
    return (
        "\n\n```{toctree}\n:caption: 本編\n:hidden:\n\n" + names + "\n```\n\n"
        "```{toctree}\n:caption: 演習\n:hidden:\n\n" + exercises + "\n```\n\n"
        "```{toctree}\n:caption: 資料\n:hidden:\n\nglossary\nteachers\n" + docs + "maintainers\n```\n"
    )


def docs_list() -> str:
    """先生方へのページに置く、docs/ のページ（ワークショップの手引きなど）へのリンク。"""
    items = []
    for doc in doc_pages():
        title = next((t for d, t in markdown_headings(doc.read_text(encoding="utf-8")) if d == 1), doc.stem)
        items.append(f"- [{title}](docs/{doc.name})")
    return ("## 授業の手引き\n\n" + "\n".join(items) + "\n") if items else ""


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


# ---------------------------------------------------------------- 解答をサイトに載せない

_SOLUTION = re.compile(r"### BEGIN SOLUTION[^\n]*\n(.*?)^[ \t]*### END SOLUTION", re.S | re.M)
_DEF = re.compile(r"^\s*def\s+([A-Za-z_]\w*)\s*\(", re.M)


def _source_lines(nb: Path) -> set[str]:
    return {ln.strip() for c in _cells(nb) for ln in _cell_text(c).splitlines()}


def solution_blocks() -> list[dict]:
    """solutions/ の解答（### BEGIN SOLUTION … ### END SOLUTION）。1 つごとに：ノートブック、解答を書く関数の名前、
    解答にしかない行（12 文字以上、コメントでない、どのレッスンにも演習のノートブックにもない行。
    ほかの節のレッスンが見せている行（「n = lax.axis_size(axis_name)」など）は解答だけの行ではない）。"""
    published = set()
    for folder in ("notebooks", "exercises"):
        for other in (ROOT / folder).glob("*.ipynb"):
            published |= _source_lines(other)
    blocks = []
    for sol in sorted((ROOT / "solutions").glob("*.ipynb"), key=course_key):
        shared = published
        for cell in _cells(sol):
            source = _cell_text(cell)
            for m in _SOLUTION.finditer(source):
                defs = _DEF.findall(source[:m.start()])
                lines = [ln.strip() for ln in m.group(1).splitlines() if ln.strip()]
                blocks.append({
                    "notebook": sol.name,
                    "function": defs[-1] if defs else None,
                    "lines": [ln for ln in lines if len(ln) >= 12 and not ln.startswith("#") and ln not in shared],
                })
    return blocks


def _site_texts(folder: Path):
    """サイトのフォルダの、解答が紛れ込みうるファイルの (パス, 文字)：ページの HTML（タグを除いた文字）、
    ノートブック（セルの中身と出力）、そのほかの文字のファイル、zip の中身。MathJax とテーマのファイルは見ない。"""
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if not path.is_file() or rel.startswith(("_static/", "_images/")):
            continue
        if path.suffix == ".html":
            text = html.unescape(re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8", errors="replace")))
            yield rel, text
        elif path.suffix == ".ipynb":
            yield rel, _notebook_text(path.read_bytes())
        elif path.suffix in (".md", ".txt", ".py", ".json", ".js"):
            yield rel, path.read_text(encoding="utf-8", errors="replace")
        elif path.suffix == ".zip":
            with zipfile.ZipFile(path) as zf:
                for name in zf.namelist():
                    data = zf.read(name)
                    text = _notebook_text(data) if name.endswith(".ipynb") else data.decode("utf-8", "replace")
                    yield f"{rel}:{name}", text


def _notebook_text(data: bytes) -> str:
    nb = json.loads(data)
    parts = []
    for cell in nb.get("cells", []):
        parts.append(_cell_text(cell))
        for output in cell.get("outputs", []):
            text = output.get("text") or output.get("data", {}).get("text/plain", "")
            parts.append("".join(text) if isinstance(text, list) else text)
    return "\n".join(parts)


def solution_leaks(folder: Path, blocks: list[dict] | None = None) -> list[str]:
    """作ったサイト（folder）に解答のコードがあれば、その一覧（なければ []）。

    - 解答にしかない行が、どこかのページ・ノートブック・zip にある
    - 演習のページで、解答を書く関数が演習の形（raise NotImplementedError）になっていない
      （6.5 の「return "b"」のように、行が短くてレッスンにもある解答もこれで見つかる）
    """
    blocks = solution_blocks() if blocks is None else blocks
    wanted = {ln: b for b in blocks for ln in b["lines"]}
    found = []
    for rel, text in _site_texts(folder):
        lines = {ln.strip() for ln in text.splitlines()}
        found += [f"{rel}: {b['notebook']} の解答の行「{ln}」" for ln, b in wanted.items() if ln in lines]
        if rel.startswith("exercises/") and rel.endswith(".html"):
            name = Path(rel).stem + ".ipynb"
            for b in blocks:
                if b["notebook"] != name or not b["function"]:
                    continue
                bodies = [m.group(0) for m in
                          re.finditer(rf"^[ \t]*def {re.escape(b['function'])}\(.*?(?=^\S|\Z)", text, re.S | re.M)]
                if not bodies:
                    found.append(f"{rel}: 関数 {b['function']} がない")
                elif not any("NotImplementedError" in body for body in bodies):
                    found.append(f"{rel}: 関数 {b['function']} の中身が演習の形（raise NotImplementedError）でない")
    return found


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
