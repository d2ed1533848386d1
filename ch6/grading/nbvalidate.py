"""提出前の確かめ: ``nbgrader validate``（講座の nbgrader_config.py を読んだとき）と、nbgrader なしで動く
``python -m ch6.grading.nbgrader validate``。どちらも消された・書き換えられた採点のセルを戻して失敗にし、
ch6-grade と同じ監視つきの採点（:func:`regrade`）で確かめ、失敗があれば終了コード 1 にします。
チェック 1 つの制限時間は講座の CHECK_TIMEOUT 秒です（終わらない関数 1 つで 1 分ほど）。
"""
from __future__ import annotations

import argparse
import copy
from pathlib import Path

from .cells import is_test_cell, test_exercise, test_source
from .gradecells import (
    CELL_TIMEOUT,
    UNREADABLE_KEY,
    course_notebook,
    engine_config,
    error_output,
    guard,
    has_error,
    identify_notebook,
    restore_grade_cells,
)


def regrade(nb, name: str, timeout: int = CELL_TIMEOUT) -> list[str]:
    """ch6-grade と同じ監視つきの採点（:mod:`ch6.grading.guard`）でこの提出物を新しいカーネルで採点し直し、
    採点のセルに反映する。採点する人への知らせ（1 行ずつ）を返す。

    nbgrader の点数は、学習者のカーネルで実行した採点のセルの出力で決まります。学習者のセルはそのカーネルで
    ``grade`` を差し替えられるので、ここでは外から採点し直します: 干渉が見つかればすべての採点のセルを 0 点に
    （理由つき）、講座の採点が正解でない演習は、採点のセルが ✅ でも 0 点にします。"""
    import asyncio
    import tempfile

    from .._core import Status
    from .execute import execute_and_check

    course = course_notebook(name)
    if course is None or (nb.get("metadata") or {}).get(UNREADABLE_KEY):
        return []
    work = copy.deepcopy(nb)
    for c in work.cells:
        if c.get("cell_type") == "code":
            c.outputs, c.execution_count = [], None
    cfg = engine_config(timeout)
    with tempfile.TemporaryDirectory(prefix="ch6-regrade-") as cwd:
        results, notes = asyncio.run(execute_and_check(work, course, cfg, cwd))
    said = [f"{name}: {n}" for n in notes if n.startswith("採点のしくみへの干渉")]
    for c in nb.cells:
        eid = test_exercise(c)
        r = results.get(eid)
        if r is None:
            continue
        if r.status is Status.TAMPERED:
            c.outputs.append(error_output(eid, r.message))
        elif r.status is not Status.PASS and not has_error(c):
            c.outputs.append(error_output(eid, "講座の採点（監視つき）では正解になりません: "
                                         f"{r.message or r.status.value}。この演習は 0 点にしました。"))
            said.append(f"{name}: 採点のセルは ✅ でしたが、講座の採点では {r.status.value} です（{eid}）。")
    return said


FAILED: list[str] = []  # nbgrader validate（講座の設定のとき）で失敗したノートブック


def patch_validate() -> None:
    """nbgrader validate（講座の nbgrader_config.py を読んだとき）を講座のものに: 消された採点のセルを戻して
    失敗にし、採点のセルを外から確かめ（guard）、失敗があれば終了コード 1。"""
    from nbgrader.apps.validateapp import ValidateApp
    from nbgrader.validator import Validator

    if getattr(Validator, "ch6", False):
        return
    validate, preprocess, start = Validator.validate, Validator._preprocess, ValidateApp.start

    def ch6_validate(self, filename):
        self.ch6_file = Path(filename)
        results = validate(self, filename)
        if any(results.get(k) for k in ("type_changed", "changed", "failed")):
            FAILED.append(str(filename))
        return results

    def ch6_preprocess(self, nb):
        name = identify_notebook(getattr(self, "ch6_file", Path("x.ipynb")), nb)
        deleted = prepare(nb, name) if name else []
        nb = preprocess(self, nb)
        if name:
            finish(nb, name, deleted)
            regrade(nb, name)
        return nb

    def ch6_start(self):
        start(self)
        if FAILED:
            self.exit(1)

    Validator.validate, Validator._preprocess, ValidateApp.start = ch6_validate, ch6_preprocess, ch6_start
    Validator.ch6 = True


def prepare(nb, name: str) -> list[str]:
    """validate の前に: 書き換えられた採点のセルを配布版の中身に戻し、消された採点のセルを戻す。
    失敗にする演習の番号（書き換え・削除）を返す。採点のセルが 1 つもない提出物（exercises/ から）は失敗にしない。"""
    course = course_notebook(name)
    changed = []
    for c in nb.cells:
        eid = test_exercise(c)
        if eid and course and eid in course.titles and not is_test_cell(c):
            c.source = test_source(eid, course.titles[eid])
            changed.append(eid)
    restored, had_none = restore_grade_cells(nb, name)
    return changed + ([] if had_none else restored)


def finish(nb, name: str, deleted: list[str]) -> list[str]:
    """validate の後に: 外から確かめ（guard）、書き換え・削除した採点のセルを失敗にする。"""
    said = guard(nb, name)
    for c in nb.cells:
        eid = test_exercise(c)
        if eid in deleted:
            c.outputs.append(error_output(eid, "この演習の採点のセルが消されたか書き換えられています。採点では配布版の採点のセルに"
                                         "戻して採点します（上の結果はそのときのものです）。配布版のセルを戻してください。"))
    return said


def validate(path: Path, timeout: int = CELL_TIMEOUT, out=print) -> bool:
    """nbgrader を入れずに、提出前の 1 冊を確かめる（nbgrader validate の講座版）。通れば True。

    採点のセルがない（exercises/ から作った）ノートブックには採点のセルを足し、消された・書き換えられた採点のセルは
    戻したうえで失敗にし、講座の制限時間（1 セル timeout 秒）で上から実行して、採点のセルを外から確かめます
    （autograde と同じ）。失敗した演習は講座の 1 行（ヒントまで全部）を表示します。"""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    from .._core import Status
    from .submission import read_submission

    nb, why = read_submission(path)
    if nb is None:
        out(f"❌ {path}: {why}")
        return False
    name = identify_notebook(path, nb)
    if name is None:
        out(f"❌ {path}: 講座の演習ノートブックではありません（演習の番号のあるチェックが見つかりません）。")
        return False
    had = any(test_exercise(c) for c in nb.cells)
    deleted = prepare(nb, name)
    if not had:
        out(f"ℹ️ {path}: 採点のセルがないノートブックです（exercises/ などから作ったもの）。"
            "採点と同じく、配布版の採点のセルを足して確かめます。")
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(Path(path).resolve().parent)}})
    try:
        client.execute()
    except (CellTimeoutError, DeadKernelError, RuntimeError) as exc:
        out(f"❌ {path}: 最後まで実行できませんでした（{type(exc).__name__}）。")
        return False
    for line in finish(nb, name, deleted) + regrade(nb, name, timeout):
        out(f"⚠️ {line}")
    failed = []
    for c in nb.cells:
        eid = test_exercise(c)
        if eid is None:
            continue
        errors = [o for o in c.outputs if o.get("output_type") == "error"]
        if errors or any(o.get("name") == "stderr" for o in c.outputs if o.get("output_type") == "stream"):
            failed.append(eid)
            lines = [o.get("evalue", "") or o.get("ename", "") for o in errors] or ["（エラー出力に何か書かれました）"]
            for line in dict.fromkeys(lines):
                out(line if line.startswith(("❌", "⏳", "⚠️")) else f"{Status.FAIL.label} [{eid}] {line}")
    total = sum(1 for c in nb.cells if test_exercise(c))
    if failed:
        out(f"検証に失敗しました: {path}（{total} 問中 {len(failed)} 問が通りません: {', '.join(failed)}）。")
        return False
    out(f"✅ {path}: すべての採点のセルが通りました（{total} 問）。")
    return True


def validate_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m ch6.grading.nbgrader validate",
                                 description="提出前に nbgrader 版のノートブックを確かめる（失敗があれば終了コード 1）。")
    ap.add_argument("notebooks", nargs="+", type=Path)
    ap.add_argument("--timeout", type=int, default=CELL_TIMEOUT, help="1 セルの制限時間（秒、既定 %(default)s）")
    args = ap.parse_args(argv)
    ok = [validate(p, args.timeout) for p in args.notebooks]
    return 0 if all(ok) else 1


