"""nbgrader 版の提出物を外から見る: 採点のセルを戻す、nbgrader のメタデータを配布版の形に戻す、採点のしくみに触れる
コードを探す、読めない・壊れた提出物の代わり。autograde（:mod:`ch6.grading.autograde`）と validate
（:mod:`ch6.grading.nbvalidate`）の両方が使います。nbgrader も nbconvert も読み込みません。
"""
from __future__ import annotations

import copy
import re
from pathlib import Path

from .._core import CHECK_SECONDS
from .cells import TEST_CALL, grade_id, nbgrader_meta, nbmeta, sane_metadata, test_exercise, test_source
from .exercises import check_calls

CELL_TIMEOUT = 300  # 講座の 1 セルの制限時間（秒）: nbgrader validate（autograde では学習者のセル全体）
CHECK_TIMEOUT = CHECK_SECONDS  # 採点のセル 1 つ（チェック 1 つ）の制限時間（秒）: ch6-grade・ch6.check と同じ
FLAGS_KEY = "ch6_flags"  # サニタイズで見つけたこと（autograde の実行の段へ、ノートブックの metadata で渡す）

# 学習者のセルにあれば、その後の採点のセルを 0 点にするコード（採点のしくみ・表示・エラーの報告に触れる）
GRADE_TAMPER = [
    ("showtraceback", r"\bshowtraceback\b"),
    ("__import__", r"__import__"),
    ("sys.modules", r"\bsys\.modules\b"),
    ("sys._getframe", r"\b_getframe\b"),
    ("sys.stdout", r"\bsys\.(stdout|stderr)\s*="),
]
UNREADABLE_KEY = "ch6_unreadable"  # 読めない提出物の代わりに採点するノートブックの印（notebook の metadata）


def course_notebook(name: str):
    """講座の演習ノートブック（exercises.json）の Assignment。nbgrader のノートブック名はファイル名そのもの。"""
    from .exercises import packaged

    return packaged().get(name)


def restore_grade_cells(nb, name: str, points: dict[str, float] | None = None) -> tuple[list[str], bool]:
    """なくなった採点のセルを、その演習の解答のセルの後に戻す。(戻した演習の番号, もともと 1 つもなかったか)。

    exercises/ や solutions/ から作った提出物（nbgrader のメタデータがない）も、採点のセルを消した提出物も、
    配布版と同じ採点のセルで採点できるようにします。points は戻す演習（grade_id）の点数、None なら講座の全演習を 1 点で。
    セットアップのセルの印がなければ最初のコードセルに付けます（nbgrader が配布版の中身に戻します）。"""
    import nbformat

    course = course_notebook(name)
    if course is None:
        return [], False
    present = {test_exercise(c) for c in nb.cells} - {None}
    had_none = not present
    wanted = [e for e in course.ids if points is None or grade_id(e, "test_") in points]
    if not any(nbmeta(c).get("grade_id") == "setup" for c in nb.cells) and (points is None or "setup" in points):
        first = next((c for c in nb.cells if c.cell_type == "code"), None)
        if first is not None and not nbmeta(first):
            first.metadata["nbgrader"] = nbgrader_meta("setup", locked=True)
    restored = []
    for eid in wanted:
        if eid in present:
            continue
        fn = course.titles[eid]
        anchor = None
        for k, c in enumerate(nb.cells):
            if c.cell_type != "code":
                continue
            if nbmeta(c).get("grade_id") == grade_id(eid) or any(e == eid for e, _, _ in check_calls(c.source)):
                anchor = k
                break
            if anchor is None and re.search(rf"^\s*def\s+{fn}\b", c.source, re.M):
                anchor = k
        cell = nbformat.v4.new_code_cell(test_source(eid, fn))
        ids = {c.get("id") for c in nb.cells}
        if grade_id(eid, "test-") not in ids:
            cell.id = grade_id(eid, "test-")
        cell.metadata["nbgrader"] = nbgrader_meta(grade_id(eid, "test_"), grade=True, locked=True,
                                                  points=float((points or {}).get(grade_id(eid, "test_"), 1.0)))
        nb.cells.insert(len(nb.cells) if anchor is None else anchor + 1, cell)
        restored.append(eid)
    return restored, had_none


def tampering(source: str) -> str | None:
    """学習者のセルのコードが採点のしくみに触れていれば、その名前（ch6-grade の手がかり + 採点のセルの仕組み）。"""
    from .tamper import REPLACES_CH6, TAMPER

    m = REPLACES_CH6.search(source)
    if m:
        return m.group(0).strip()
    return next((name for name, pattern in TAMPER + GRADE_TAMPER if re.search(pattern, source, re.M)), None)


def error_output(exercise_id: str, text: str):
    import nbformat

    line = f"⚠️ 採点できません [{exercise_id}] {text}"
    return nbformat.v4.new_output("error", ename="Ch6GradeError", evalue=line, traceback=[line])


def has_error(cell) -> bool:
    return any(o.get("output_type") == "error" for o in cell.get("outputs", []))


def _passed_line(cell, exercise_id: str) -> bool:
    text = "".join("".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("output_type") == "stream")
    from .._core import Status

    return any(ln.startswith(f"{Status.PASS.label} [{exercise_id}] ") for ln in text.splitlines())


def guard(nb, name: str) -> list[str]:
    """実行した後の採点のセルを、ノートブックの外から確かめる（nbgrader の点数はエラーの出力の有無で決まる）。
    採点する人への知らせ（1 行ずつ）を返す。

    - 読めなかった提出物の代わりのノートブック: すべての採点のセルに理由のエラー（0 点）。
    - 学習者のセル（配った中身と違うコードセル）が採点のしくみに触れていれば、その後の採点のセルに
      エラー（0 点。先生が確かめて、問題なければ formgrader で点数を直せます）。
    - エラーがないのに ✅ の 1 行を表示していない採点のセル（表示やエラーの報告が止められた）: エラー（0 点）。"""
    from .exercises import describe_cell

    said = []
    unreadable = (nb.get("metadata") or {}).get(UNREADABLE_KEY)
    course = course_notebook(name)
    given = {c.hash for c in course.cells or []} if course else set()
    first = None
    for k, c in enumerate(nb.cells):
        meta = nbmeta(c)
        if c.cell_type != "code" or meta.get("locked") or meta.get("grade") or describe_cell(c).hash in given:
            continue
        what = tampering(c.source)
        if what:
            first = (k, what)
            said.append(f"{name}: セル {k + 1} のコードが採点のしくみに触れています（{what}）。"
                        "その後の採点のセルを 0 点にしました。")
            break
    for k, c in enumerate(nb.cells):
        eid = test_exercise(c)
        if eid is None:
            continue
        if unreadable:
            c.outputs = [error_output(eid, unreadable)]
        elif first is not None and k > first[0]:
            c.outputs.append(error_output(eid, (
                f"セル {first[0] + 1} のコードが採点のしくみに触れています（{first[1]}）。この演習は 0 点にしました。"
                "そのコードを消して、もう一度提出してください。")))
        elif not has_error(c) and not _passed_line(c, eid):
            c.outputs.append(error_output(eid, "採点のセルが結果の 1 行を表示しませんでした"
                                         "（表示やエラーの報告のしくみが書き換えられたかもしれません）。0 点にしました。"))
    if unreadable:
        said.append(f"{name}: {unreadable}")
    return said

def unreadable_notebook(name: str, why: str, where: str):
    """読めない提出物の代わりに nbgrader が採点するノートブック（採点のセルは RestoreGradeCells が足す）。"""
    import nbformat

    text = (f"提出されたファイル {where} は採点できません: {why}"
            "ノートブックを保存し直して、もう一度提出してください（すべての演習を 0 点にしました）。")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(f"⚠️ {text}")]
    nb.metadata[UNREADABLE_KEY] = text
    return nb


def repaired(nb):
    """nbformat の検証に通らないセルのメタデータ（tags が文字列の並びでない、metadata が辞書でない）を外した写し。
    もともと通るなら None。"""
    import nbformat

    try:
        nbformat.validate(nb)
        return None
    except nbformat.ValidationError:
        pass
    fixed = copy.deepcopy(nb)
    for cell in fixed.cells:
        sane_metadata(cell)
    for key in ("kernelspec", "language_info"):  # ノートブックの metadata の、形の決まった項目
        if key in fixed.metadata and not isinstance(fixed.metadata[key], dict):
            del fixed.metadata[key]
    return fixed


def identify_notebook(path: Path, nb) -> str | None:
    """どの演習ノートブックか（ファイル名、なければ中身から）。"""
    from .exercises import packaged
    from .identify import identify

    found = identify(Path(path), nb, packaged())
    return found.name if found else None




# nbgrader のメタデータのうち、セルの役目を決める項目（checksum などは nbgrader が付け直す）
ROLE_KEYS = ("grade", "grade_id", "locked", "solution", "task", "points", "schema_version")


def _role(meta) -> dict:
    return {k: meta.get(k) for k in ROLE_KEYS if k in meta} if isinstance(meta, dict) else {"?": repr(meta)[:40]}


def normalize_metadata(nb, name: str, points: dict[str, float] | None = None,
                       setup_source: str | None = None) -> list[str]:
    """すべてのセルの nbgrader のメタデータを、セルの中身から配布版と同じ形に作り直す。変えたセルの説明を返す。

    学習者が書き換えた・写した・消したメタデータ（セットアップのセルの locked の写し、grade_id の重複、
    schema_version のないもの、採点のセルでないセルの grade: true など）で、nbgrader の autograde がその人や
    クラス全体を止めないように、nbgrader の前処理より先に使います。役目はメタデータでなく中身で決めます:
    採点のセルは採点のセルの 3 行（または配布版の採点のセルの grade_id）、セットアップは配布版と同じ中身の
    （なければ最初の）コードセル、解答のセルはその演習の ``ch6.check`` の呼び出し（なければ関数の def）のあるセル。
    points: grade_id -> 点数（nbgrader の成績簿から。None なら 1 点）。nbgrader のメタデータが 1 つもない
    提出物（exercises/ から作ったもの）は、作り直しても書き換えとは言いません（[] を返す）。"""
    course = course_notebook(name)
    if course is None:
        return []
    for cell in nb.cells:
        sane_metadata(cell)
    had_any = any("nbgrader" in c.metadata for c in nb.cells)
    code = [k for k, c in enumerate(nb.cells) if c.cell_type == "code"]
    want: dict[int, dict] = {}
    tests = {grade_id(e, "test_"): e for e in course.ids}
    for k in code:  # 採点のセル: 中身（3 行）か、配布版の grade_id で。同じ演習の 2 つめからは学習者のセル
        cell = nb.cells[k]
        m = TEST_CALL.search(cell.source)
        gid = grade_id(m.group(1), "test_") if m else nbmeta(cell).get("grade_id")
        if isinstance(gid, str) and gid in tests and gid not in {w["grade_id"] for w in want.values()}:
            pts = float((points or {}).get(gid, 1.0))
            want[k] = nbgrader_meta(gid, grade=True, locked=True, points=pts)
    free = [k for k in code if k not in want]
    setup = next((k for k in free if setup_source is not None and nb.cells[k].source.strip() == setup_source.strip()),
                 next((k for k in free if nbmeta(nb.cells[k]).get("grade_id") == "setup"), free[0] if free else None))
    if setup is not None:
        want[setup] = nbgrader_meta("setup", locked=True)
    for eid in course.ids:  # 解答のセル
        fn = course.titles[eid]
        cands = [k for k in code if k not in want and any(e == eid for e, _, _ in check_calls(nb.cells[k].source))]
        cands += [k for k in code if k not in want and re.search(rf"^\s*def\s+{re.escape(fn)}\b", nb.cells[k].source, re.M)]
        if cands:
            want[cands[0]] = nbgrader_meta(grade_id(eid), solution=True)
    said = []
    for k, cell in enumerate(nb.cells):
        old = cell.metadata.get("nbgrader")
        new = want.get(k)
        if old is not None and new is not None and _role(old) == _role(new):
            continue  # 配布版のまま（checksum なども残す）
        if old is None and new is None:
            continue
        if new is None:
            del cell.metadata["nbgrader"]
        else:
            cell.metadata["nbgrader"] = copy.deepcopy(new)
        if had_any:
            said.append(f"セル {k + 1}（{_what(old)} → {_what(new)}）")
    return said


def _what(meta) -> str:
    if meta is None:
        return "なし"
    if not isinstance(meta, dict):
        return "壊れたもの"
    role = [w for w, on in (("採点", meta.get("grade")), ("解答", meta.get("solution")), ("編集不可", meta.get("locked")))
            if on]
    return " ".join([str(meta.get("grade_id", "?"))[:40], "・".join(role)]).strip()


def metadata_note(said: list[str]) -> str:
    """作り直したメタデータの説明 -> 採点する人への 1 文。"""
    shown = "、".join(said[:3]) + (f" ほか {len(said) - 3} セル" if len(said) > 3 else "")
    return f"nbgrader のメタデータが配布版と違っていました（{shown}）。配布版の形に戻して採点しました"


def engine_config(timeout: float = CELL_TIMEOUT, **kw):
    """nbgrader 版の採点に使う ch6-grade の設定: 学習者のセル全体で timeout 秒、チェック 1 つ CHECK_TIMEOUT 秒、
    デバイスの数は環境変数 JAX_NUM_CPU_DEVICES（なければ講座の既定）。"""
    import os

    from .model import Config

    devices = os.environ.get("JAX_NUM_CPU_DEVICES", "")
    return Config(timeout=max(Config.timeout, timeout), check_timeout=CHECK_TIMEOUT, jobs=1,
                  **({"devices": int(devices)} if devices.isdigit() else {}), **kw)
