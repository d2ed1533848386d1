"""解答をサイトに載せない：solutions/ の解答の行と、作ったサイトのどこかにそれがあるかを調べる（build_site.py が使います）。"""
from __future__ import annotations

import html
import json
import re
import zipfile
from pathlib import Path

from site_sources import ROOT, _cell_text, _cells, course_key

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
