"""提出物がどの演習ノートブックか、学習者の名前は何か。"""
from __future__ import annotations

import re
from pathlib import Path

from .exercises import CHECK_CALL, Assignment, describe_cell, source_of
from .model import Row

_SECTION = re.compile(r"(?<![0-9])(\d+)_(\d+[a-z]?)(?![0-9])")


def section_of(name: str) -> str | None:
    """"6_3a_sharding" や "tanaka_6_1.ipynb" から "6.3a"。"""
    m = _SECTION.search(name)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def find(assignments: dict[str, Assignment], name: str) -> Assignment | None:
    """--notebook の名前から: 完全一致、なければ同じ節（"6_1" や "6.1" でも）。"""
    sec = section_of(name)
    return assignments.get(name) or next(
        (a for a in assignments.values() if sec and sec in (a.name, section_of(a.name))), None)


def _names_around(path: Path) -> list[str]:
    return [path.name] + [p.name for p in path.parents][:3]


def identify(path: Path, nb, assignments: dict[str, Assignment], forced: str | None = None) -> Assignment | None:
    """提出物がどの演習ノートブックか: --notebook、ファイル名・フォルダ名、中身の順に決める。"""
    if forced:
        return find(assignments, forced)
    for text in _names_around(path):
        hits = [a for n, a in assignments.items() if n in text]
        if hits:
            return max(hits, key=lambda a: len(a.name))
    for text in _names_around(path):
        sec = section_of(text)
        hits = [a for a in assignments.values() if sec and (a.name == sec or section_of(a.name) == sec)]
        if len(hits) == 1:
            return hits[0]
    return None if nb is None else _by_content(nb, assignments)


def _by_content(nb, assignments: dict[str, Assignment]) -> Assignment | None:
    """中身から: チェックの番号、次にセルの一致の多さ（3 つ以上）。"""
    code = "\n".join(source_of(c) for c in nb.cells if c.get("cell_type") == "code")
    found = {m.group(1) for m in CHECK_CALL.finditer(code)}
    best = max(assignments.values(), key=lambda a: len(found & set(a.ids)), default=None)
    if best is not None and found & set(best.ids):
        return best
    hashes = {describe_cell(c).hash for c in nb.cells} - {""}
    scored = [(len(hashes & {c.hash for c in a.cells if c.hash}), a.name)
              for a in assignments.values() if a.cells]
    if scored and max(scored)[0] >= 3:
        return assignments[max(scored)[1]]
    return None


# nbgrader のコースの中の提出物のフォルダ: <コース>/submitted/<学生>/<課題>/<ノートブック>.ipynb
NBGRADER_TREES = ("submitted", "autograded")


def nbgrader_student(path: Path) -> str | None:
    """nbgrader の形（submitted/ か autograded/ の下の <学生>/<課題>/、または nbgrader が書く
    timestamp.txt のある課題のフォルダ）なら学生のフォルダ名。そうでなければ None。"""
    parts = Path(path).absolute().parts
    if len(parts) >= 4 and parts[-4] in NBGRADER_TREES:
        return parts[-3]
    if len(parts) >= 3 and (Path(path).parent / "timestamp.txt").is_file():
        return parts[-3]
    return None


# Moodle の「すべての提出をダウンロード」: フォルダ "氏名_参加者番号_assignsubmission_file_" の中の元のファイル名、
# またはフォルダなしで "氏名_参加者番号_assignsubmission_file_元のファイル名"（onlinetext なども同じ形）
_MOODLE = re.compile(r"^(?P<name>.+?)_(?P<id>\d+)_assign(?:submission|feedback)_[a-z]+_(?P<rest>.*)$")


def moodle_learner(path: Path) -> str | None:
    """Moodle のダウンロードの形なら氏名（空白は _）。ファイル名、なければすぐ上のフォルダ名から。"""
    for text in (path.name, path.parent.name):
        m = _MOODLE.match(text)
        if m:
            return re.sub(r"\s+", "_", m.group("name").strip())
    return None


def _tidy(stem: str) -> str:
    # Colab・Drive のコピー: "Copy of 6_1_vmap"、"6_1_vmap のコピー"、"6_1_vmap (1)"。JupyterLab の複製: "6_1_vmap-Copy1"
    stem = re.sub(r"[-_ ]copy\d+\b|\(\d+\)|\bcopy\s+of\b|\bcopy\b|の\s*コピー", " ", stem, flags=re.I)
    return re.sub(r"[\s_\-.()]+", " ", stem).strip().replace(" ", "_")


def learner_name(path: Path, notebook: str | None) -> str:
    """学習者名: nbgrader の形なら学生のフォルダ名（いつも）、Moodle のダウンロードの形なら氏名。
    そうでなければファイル名から、演習ノートブック名・コピーの印・区切りを除いたもの。残らなければフォルダ名
    （フォルダ名からもコピーの印を除く）。"""
    student = nbgrader_student(path) or moodle_learner(path)
    if student:
        return student
    stem = path.stem
    if notebook:
        stem = stem.replace(notebook, " ")
    return _tidy(stem) or _tidy(path.parent.name) or path.parent.name or path.stem


def disambiguate(rows: list[Row]) -> None:
    """同じ名前が重なったら、フォルダ名で区別する（例: nbgrader の submitted/学生/課題/X.ipynb）。"""
    seen: dict[tuple, list[Row]] = {}
    for r in rows:
        seen.setdefault((r.notebook, r.learner), []).append(r)
    for group in seen.values():
        if len(group) < 2:
            continue
        folders = [list(reversed(Path(r.file).resolve().parent.parts)) for r in group]
        for depth in range(max(map(len, folders))):
            names = [f[depth] if depth < len(f) else "" for f in folders]
            if len(set(names)) == len(names) and all(names):
                for r, n in zip(group, names):
                    r.learner = n if r.learner == Path(r.file).parent.name else f"{r.learner} ({n})"
                break
        else:
            for r in group:
                r.learner = f"{r.learner} ({r.file})"
