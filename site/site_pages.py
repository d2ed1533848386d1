"""サイトのページの部品：レッスンと演習の題の下のリンクの行、図の代替テキスト、作業フォルダへ写すノートブック、
最初のページのレッスンの一覧、先生方へのページの表、用語集のページ、左の列の目次（site/build_site.py が使います）。"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from base64 import b64decode
from pathlib import Path

from nbtemplate import BADGE, colab_url, repo_url
from site_sources import (
    ROOT,
    _cell_text,
    _cells,
    doc_pages,
    exercise_of,
    exercise_pages,
    lesson_number,
    lesson_prerequisites,
    lesson_title,
    lessons,
    markdown_headings,
    rewrite_links,
    site_pages,
)

BADGE_SVG = "colab-badge.svg"
# 保存された出力の図の説明（ch6.show が text/plain に入れる「<図: …>」）
_FIGURE_TEXT = re.compile(r"^<図[:：]\s*(.*?)>?$", re.S)


def local_badge(url: str) -> str:
    return f"[![Colab で開く](/{BADGE_SVG})]({url})"

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
    from course_words import glossary_terms

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


def toctree() -> str:
    """左の列：本編・演習・資料（用語集と先生方へ）。docs/ と README（管理者・開発者へ）は学習者の列にも検索にも
    出さない（site_sources.OFF_NAV。先生方へのページと README からリンクする）。"""
    names = "\n".join(f"notebooks/{nb.stem}" for nb in lessons())
    exercises = "\n".join(f"exercises/{ex.stem}" for ex in exercise_pages())
    return (
        "\n\n```{toctree}\n:caption: 本編\n:hidden:\n\n" + names + "\n```\n\n"
        "```{toctree}\n:caption: 演習\n:hidden:\n\n" + exercises + "\n```\n\n"
        "```{toctree}\n:caption: 資料\n:hidden:\n\nglossary\nteachers\n```\n"
    )


def docs_list() -> str:
    """先生方へのページに置く、docs/ のページ（ワークショップの手引きなど）へのリンク。"""
    items = []
    for doc in doc_pages():
        title = next((t for d, t in markdown_headings(doc.read_text(encoding="utf-8")) if d == 1), doc.stem)
        if title.isascii():  # 英語の開発者の記録（docs/accelerator.md）は README から
            continue
        items.append(f"- [{title}](docs/{doc.name})")
    return ("## 授業の手引き\n\n" + "\n".join(items) + "\n") if items else ""
