"""nbgrader 版の採点のセルの形: セルの id、nbgrader のメタデータ、採点のセル（test_source）とその見分け方。

nbgrader 版を作る ``ch6.grading.nbgrader`` と、提出物を実行する ``ch6.grading.execute``（nbgrader の採点の
セルは実行しない）の両方が使います。execute は nbgrader を読み込まず、nbgrader が execute を読み込みます
（nbgrader 版の再採点は同じ採点の仕組みで行うため）。
"""
from __future__ import annotations

import re

SCHEMA_VERSION = 3
RESULT_NAME = "ch6_result"  # 採点のセルの変数名（ノートブックのほかの名前と重ならないことを確かめる）
VALID_ID = re.compile(r"^[a-zA-Z0-9_\-]*$")
MODULE = "ch6.grading.nbgrader"  # 採点のセルが読み込むこのモジュール（python -m で動かしても同じ名前）


def grade_id(exercise_id: str, prefix: str = "") -> str:
    """nbgrader の grade_id（英数字と _ - だけ）: "6.3b-2" -> "6_3b-2"。"""
    gid = prefix + re.sub(r"[^a-zA-Z0-9_\-]", "_", exercise_id)
    assert VALID_ID.match(gid) and gid, gid
    return gid


def nbgrader_meta(gid: str, *, solution: bool = False, grade: bool = False, locked: bool = False,
                  points: float | None = None) -> dict:
    meta = {"grade": grade, "grade_id": gid, "locked": locked, "schema_version": SCHEMA_VERSION,
            "solution": solution, "task": False}
    if grade:
        meta["points"] = points
    return meta


def test_source(exercise_id: str, function: str) -> str:
    return (f"# 採点のセル（nbgrader）: 上の関数を、インストールされている講座のチェックで確かめます（編集できません）\n"
            f"{RESULT_NAME} = __import__({MODULE!r}, fromlist=['grade']).grade({exercise_id!r}, {function!r})\n"
            f"assert {RESULT_NAME}.ok, {RESULT_NAME}.line").replace("'", '"')


TEST_CALL = re.compile(rf'^{RESULT_NAME} = __import__\("{re.escape(MODULE)}", fromlist=\["grade"\]\)'
                       r'\.grade\("([^"]+)", "([A-Za-z_]\w*)"\)$', re.M)


def is_test_cell(cell) -> bool:
    """この nbgrader 版の採点のセルそのもの（test_source の 3 行と、コメントだけの隠しテスト）か。
    ch6-grade はこのセルを実行しません（同じチェックを採点の側で行うので、実行しても何も増えません）。"""
    meta = nbmeta(cell)
    if cell.get("cell_type") != "code" or not meta.get("grade"):
        return False
    src = "".join(cell.get("source", "")) if isinstance(cell.get("source", ""), (str, list)) else ""
    m = TEST_CALL.search(src)
    if not m or not src.startswith(head := test_source(m.group(1), m.group(2))):
        return False
    return all(ln.startswith("#") for ln in src[len(head):].strip("\n").splitlines())


def nbmeta(cell) -> dict:
    """セルの nbgrader のメタデータ。学習者が壊した（辞書でない）ときは空: 1 人のメタデータでクラス全体を止めない。"""
    meta = cell.get("metadata")
    meta = meta.get("nbgrader") if isinstance(meta, dict) else None
    return meta if isinstance(meta, dict) else {}


def test_exercise(cell) -> str | None:
    """nbgrader の採点のセル（grade_id が test_ で始まる）なら演習の番号。"""
    meta = nbmeta(cell)
    if cell.get("cell_type") != "code" or not meta.get("grade") or not str(meta.get("grade_id", "")).startswith("test_"):
        return None
    m = TEST_CALL.search("".join(cell.get("source", "")))
    return m.group(1) if m else str(meta["grade_id"])[5:].replace("_", ".", 1)


def sane_metadata(cell) -> None:
    """学習者が壊したセルのメタデータ（辞書でない、tags が文字列の並びでない）を、実行の前に外す。
    nbclient はセルの tags を読むので、壊れたままだとその提出物の採点が止まる（クラス全体は止めない）。"""
    from nbformat import NotebookNode

    if not isinstance(cell.get("metadata"), dict):
        cell["metadata"] = NotebookNode()
    tags = cell.metadata.get("tags")
    if tags is not None and not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
        del cell.metadata["tags"]
