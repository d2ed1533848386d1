"""``nbgrader autograde`` の講座版: 講座の nbgrader_config.py（:func:`configure`）が組み込む前処理と書き出し。

1 人の提出物でクラスを止めず、どの学生も点数か理由つきの印（flag）で成績簿と grades.csv に残します:

- サニタイズ（nbgrader の前処理より先）: 読めないファイルは理由を書いた代わりのノートブックに、壊れたセルの
  メタデータは外し（:class:`Ch6Exporter`）、nbgrader のメタデータはセルの中身から配布版の形に作り直します
  （:class:`NormalizeMetadata`。セットアップのセルの locked の写し、grade_id の重複、schema_version のないもの
  などで nbgrader が止まらないように）。消された採点のセルは戻します（:class:`RestoreGradeCells`）。
- 実行（:class:`Execute`、nbgrader の Execute の代わり）: ch6-grade と同じ監視つきの採点
  （:func:`ch6.grading.execute.execute_and_check`、隔離も同じ）で 1 回だけ実行し、学習者のセルの出力と、
  採点のセルの結果（✅ の 1 行、またはそれ以外の講座の 1 行をエラーとして）を書きます。チェック 1 つの制限時間は
  CHECK_TIMEOUT 秒（終わらない関数 1 つで 1 分ほど）、カーネルが落ちたら新しいカーネルで続け、落ちる前に
  採点した演習の点は残します。
- 印（:class:`SaveFlags`、nbgrader の SaveAutoGrades の後）: 時間切れ・停止・採点できない・干渉・メタデータの
  書き換えなどは、その演習の成績に needs_manual_grade（formgrader の「手で採点が要る」）を付け、理由を解答の
  セルのコメント（auto_comment、「⚠️ ch6: …」）に書きます。``nbgrader export`` の grades.csv には列
  ``ch6_flags`` で同じ理由が出ます（:func:`export_plugin`）。
"""
from __future__ import annotations

import copy
import os
from pathlib import Path

from .._core import Status
from .cells import grade_id, test_exercise
from .gradecells import (
    CELL_TIMEOUT,
    FLAGS_KEY,
    UNREADABLE_KEY,
    course_notebook,
    engine_config,
    error_output,
    guard,
    metadata_note,
    normalize_metadata,
    repaired,
    restore_grade_cells,
    unreadable_notebook,
)
from .model import ExerciseResult

MODULE = "ch6.grading.autograde"
FLAG_MARK = "⚠️ ch6: "  # 成績簿のコメント（auto_comment）で、講座の印の理由であることを示す頭
FLAGGED = (Status.TIMEOUT, Status.CRASH, Status.NOT_GRADED, Status.INTERNAL, Status.TAMPERED)


def _add_flag(nb, text: str, exercise: str | None = None) -> None:
    """ノートブックの metadata に印を足す（サニタイズから実行の段へ。exercise が None ならノートブック全体）。"""
    nb.metadata.setdefault(FLAGS_KEY, []).append({"exercise": exercise, "why": text})


def grade_cell_outputs(cell, eid: str, status: Status, line: str) -> None:
    """採点のセルの出力: 正解なら ✅ の 1 行、ほかは講座の 1 行をエラーとして（nbgrader はエラーのあるセルを 0 点に）。"""
    import nbformat

    if status is Status.PASS:
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=line + "\n")]
    else:
        cell.outputs = [nbformat.v4.new_output("error", ename="AssertionError", evalue=line, traceback=[line])]


def fill(nb, results: dict, notes: list[str]) -> list[dict]:
    """ch6 の採点の結果を採点のセルに書き、印（{"exercise", "why"}）の並びを返す。"""
    flags = []
    for cell in nb.cells:
        eid = test_exercise(cell)
        r = results.get(eid)
        if r is None:
            continue
        line = f"{r.status.label} [{eid}] {r.message}".rstrip()
        grade_cell_outputs(cell, eid, r.status, line)
        cell.execution_count = None
        if r.status in FLAGGED:
            flags.append({"exercise": eid, "why": line})
    tampered = any(r.status is Status.TAMPERED for r in results.values())
    flags += [{"exercise": None, "why": n} for n in notes if not (tampered and n.startswith("採点のしくみへの干渉"))
              and ("カーネル" in n or "制限時間" in n)]
    return flags


def _preprocessor_classes() -> dict:
    """nbgrader の autograde に足す前処理（nbgrader の環境でだけ使います）。"""
    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.preprocessors import NbGraderPreprocessor as Preprocessor

    def _where(info: dict) -> str:
        return f"{info['student']}/{info['assignment']}/{info['notebook']}.ipynb"

    def _read_record(info: dict, read):
        """配布版の記録（gradebook のそのノートブック）から read(record) で読んだもの。記録は gradebook を開いている
        あいだだけ読めるので、read はその中で呼びます。配布版にないノートブック（MissingEntry）は None。"""
        with Gradebook(info["db_url"]) as gb:
            try:
                record = gb.find_notebook(info["notebook"], info["assignment"])
            except MissingEntry:
                return None
            return read(record)

    class NormalizeMetadata(Preprocessor):
        """nbgrader のメタデータを、セルの中身から配布版の形に作り直す（nbgrader の前処理より先に）。"""

        def preprocess(self, nb, resources):
            info = resources["nbgrader"]
            found = _read_record(info, lambda record: (
                {g.name: g.max_score for g in record.grade_cells},
                next((s.source for s in record.source_cells if s.name == "setup"), None)))
            if found is None:
                return nb, resources
            points, setup = found
            said = normalize_metadata(nb, info["notebook"], points, setup)
            if said:
                note = metadata_note(said)
                self.log.warning("ch6: %s: %s。", _where(info), note)
                _add_flag(nb, note)
            return nb, resources

    class RestoreGradeCells(Preprocessor):
        """消された採点のセルと、採点のセルのない提出物（exercises/ から作ったもの）の採点のセルを戻す。
        nbgrader の OverwriteCells の前に置きます（戻したセルの中身と点数は、OverwriteCells がデータベースの
        配布版のものにそろえます）。"""

        def preprocess(self, nb, resources):
            info = resources["nbgrader"]
            points = _read_record(info, lambda record: {
                **{g.name: g.max_score for g in record.grade_cells},
                **{s.name: 0.0 for s in record.source_cells if s.name == "setup"}})
            if points is None:
                return nb, resources
            restored, had_none = restore_grade_cells(nb, info["notebook"], points)
            if restored and not nb.metadata.get(UNREADABLE_KEY):
                why = ("nbgrader の採点のセルがない提出物です（exercises/ や solutions/ から作ったもの）" if had_none
                       else f"採点のセルが消されています（{', '.join(restored)}）")
                self.log.warning("ch6: %s: %s。配布版の採点のセル %d 個を戻して採点します。", _where(info), why,
                                 len(restored))
                if not had_none:
                    _add_flag(nb, f"{why}。配布版の採点のセルを戻して採点しました")
            return nb, resources

    class Execute(Preprocessor):
        """nbgrader の Execute の代わり: ch6-grade と同じ監視つきの採点で 1 回だけ実行し、結果を採点のセルに書く。
        講座の演習ノートブックでないもの（先生が足した課題）は、nbgrader の実行（隔離つき）に任せます。"""

        def preprocess(self, nb, resources):
            import asyncio

            from . import isolate
            from .execute import execute_and_check

            info = resources["nbgrader"]
            course = course_notebook(info["notebook"])
            if course is None:
                return isolate.Execute(parent=self).preprocess(nb, resources)
            how = isolate.mode()
            if how is None:
                raise isolate.Refused(isolate.REFUSE)
            resources["ch6_flags"] = list(nb.metadata.pop(FLAGS_KEY, []))
            if nb.metadata.get(UNREADABLE_KEY):
                return nb, resources
            cwd = (resources.get("metadata") or {}).get("path") or os.getcwd()
            protect = [*isolate.protected_from_env(), *isolate.course_paths(str(info.get("db_url", "")))]
            cfg = engine_config(CELL_TIMEOUT, isolation=how, keep_outputs=True,
                                protect=tuple(dict.fromkeys(map(str, protect))))
            self.log.info("ch6: %s", isolate.describe(how))
            work = copy.deepcopy(nb)
            for c in work.cells:
                if c.get("cell_type") == "code":
                    c.outputs, c.execution_count = [], None
            try:
                results, notes = asyncio.run(execute_and_check(work, course, cfg, cwd, outputs_into=nb))
            except Exception as exc:  # 採点のしくみ自身の問題: その人を理由つきで 0 点にし、クラスは続ける
                why = f"採点できませんでした（採点のしくみの問題、{type(exc).__name__}）。学習者のせいではありません"
                results = {e: ExerciseResult(e, course.titles[e], Status.NOT_GRADED, why) for e in course.ids}
                notes = []
            flags = fill(nb, results, notes)
            for n in notes:  # 干渉の備考はノートブックごとに 1 行（ch6-grade の備考と同じ文）
                if n.startswith("採点のしくみへの干渉"):
                    self.log.warning("ch6: %s/%s: %s: %s", info["student"], info["assignment"], info["notebook"], n)
            for f in flags:
                self.log.warning("ch6: %s: %s", _where(info), f["why"])
            resources["ch6_flags"] += flags
            return nb, resources

    class GuardGrades(Preprocessor):
        """実行の直後に、採点のセルを外から確かめる（:func:`ch6.grading.gradecells.guard`: 読めない提出物の理由、
        採点のしくみに触れるコードの後の採点のセルを 0 点に）。"""

        def preprocess(self, nb, resources):
            info = resources["nbgrader"]
            try:
                said = guard(nb, info["notebook"])
            except Exception as exc:  # 1 人の提出物で、クラス全体の autograde を止めない
                said = [f"講座の確かめができませんでした（{type(exc).__name__}）。全問 0 点にしました。"]
                for c in nb.cells:
                    eid = test_exercise(c)
                    if eid:
                        c.outputs.append(error_output(eid, said[0]))
            for line in said:
                self.log.warning("ch6: %s/%s: %s", info["student"], info["assignment"], line)
            unreadable = nb.metadata.get(UNREADABLE_KEY)
            resources.setdefault("ch6_flags", []).extend(
                {"exercise": None, "why": line} for line in ([unreadable] if unreadable else said))
            return nb, resources

    class SaveFlags(Preprocessor):
        """SaveAutoGrades の後に: 印のある成績に needs_manual_grade を付け、理由を解答のセルのコメントに書く。"""

        def preprocess(self, nb, resources):
            flags = resources.get("ch6_flags") or []
            if flags:
                save_flags(resources["nbgrader"], flags)
            return nb, resources

    return {c.__name__: c for c in (NormalizeMetadata, RestoreGradeCells, Execute, GuardGrades, SaveFlags)}


def save_flags(info: dict, flags: list[dict]) -> None:
    """印を nbgrader の成績簿に: その演習（exercise が None なら全演習）の成績に needs_manual_grade、
    解答のセルのコメントに理由（FLAG_MARK で始まる 1 行ずつ）。"""
    from nbgrader.api import Gradebook

    course = course_notebook(info["notebook"])
    with Gradebook(info["db_url"]) as gb:
        sub = gb.find_submission_notebook(info["notebook"], info["assignment"], info["student"])
        whole = [f["why"] for f in flags if f.get("exercise") is None]
        for grade in sub.grades:
            eid = next((e for e in (course.ids if course else []) if grade_id(e, "test_") == grade.name), None)
            if whole or any(f.get("exercise") == eid for f in flags):
                grade.needs_manual_grade = True
        for comment in sub.comments:
            eid = next((e for e in (course.ids if course else [])
                        if comment.name in (grade_id(e), grade_id(course.titles[e]))), None)
            mine = whole + [f["why"] for f in flags if eid is not None and f.get("exercise") == eid]
            if mine:
                comment.auto_comment = "\n".join(FLAG_MARK + w for w in dict.fromkeys(mine))
        gb.db.commit()


def export_plugin():
    """nbgrader export の grades.csv に列 ch6_flags（その学生の印の理由。なければ空）を足す書き出し。"""
    import csv

    from nbgrader.api import MissingEntry
    from nbgrader.plugins import CsvExportPlugin

    class Ch6CsvExport(CsvExportPlugin):
        def export(self, gradebook) -> None:
            super().export(gradebook)
            dest = self.to or "grades.csv"
            with open(dest, encoding="utf-8", newline="") as f:
                rows = list(csv.DictReader(f))
            for row in rows:
                why = []
                try:
                    sub = gradebook.find_submission(row["assignment"], row["student_id"])
                except MissingEntry:
                    row["ch6_flags"] = ""
                    continue
                for nb in sub.notebooks:
                    for comment in nb.comments:
                        for ln in (comment.auto_comment or "").splitlines():
                            if ln.startswith(FLAG_MARK):
                                why.append(f"{nb.name}: {ln[len(FLAG_MARK):]}")
                row["ch6_flags"] = " / ".join(dict.fromkeys(why))
            with open(dest, "w", encoding="utf-8", newline="") as f:
                w = csv.DictWriter(f, fieldnames=[*(rows[0].keys() if rows else []), *([] if rows else ["ch6_flags"])])
                w.writeheader()
                w.writerows(rows)

    return Ch6CsvExport


def _exporter_class():
    from nbconvert.exporters import NotebookExporter

    class Ch6Exporter(NotebookExporter):
        """nbgrader が提出物（submitted/）を読むとき、読めないファイルならトレースバックで止まる代わりに、
        理由を書いた代わりのノートブックを採点する（全問 0 点。理由は採点のセルとログに）。セルのメタデータが
        壊れていれば外した写しを採点する（印つき）。"""

        def from_filename(self, filename, resources=None, **kw):
            import tempfile

            import nbformat

            info = (resources or {}).get("nbgrader") or {}
            path = Path(filename)
            if not (info.get("student") and len(path.parents) > 3 and path.parents[2].name == "submitted"):
                return super().from_filename(filename, resources, **kw)
            from .submission import read_submission

            nb, why = read_submission(path)
            where = f"submitted/{info['student']}/{info['assignment']}/{path.name}"
            if nb is None:
                self.log.error("ch6: %s: %s 全問 0 点にして、理由を採点のセルに書きます。", where, why)
                stand_in = unreadable_notebook(info["notebook"], why, where)
            else:
                stand_in = repaired(nb)
                if stand_in is None:
                    return super().from_filename(filename, resources, **kw)
                note = "セルのメタデータが壊れていたので、外して採点しました"
                self.log.warning("ch6: %s: %s。", where, note)
                _add_flag(stand_in, note)
            with tempfile.TemporaryDirectory() as tmp:
                target = os.path.join(tmp, path.name)
                nbformat.write(stand_in, target)
                return super().from_filename(target, resources, **kw)

    return Ch6Exporter


def __getattr__(name: str):  # nbgrader の設定が文字列で指すもの（nbgrader・nbconvert は使うときだけ読み込む）
    if name == "Ch6Exporter":
        cls = _exporter_class()
    elif name == "Ch6CsvExport":
        cls = export_plugin()
    elif name in ("NormalizeMetadata", "RestoreGradeCells", "Execute", "GuardGrades", "SaveFlags"):
        cls = _preprocessor_classes()[name]
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = cls
    return cls


def configure(c) -> None:
    """nbgrader の設定（nbgrader_config.py の c）に講座の採点を組み込む。

    - validate: 1 セルの制限時間を講座の CELL_TIMEOUT 秒に。メッセージを切らない。消された・書き換えられた採点の
      セルを失敗にし、失敗があれば終了コード 1（:mod:`ch6.grading.nbvalidate`）。
    - autograde: メタデータを作り直し（NormalizeMetadata）、採点のセルを戻し（RestoreGradeCells、OverwriteCells の前）、
      ch6-grade と同じ採点で 1 回だけ実行し（Execute）、外から確かめ（GuardGrades）、印を成績簿に（SaveFlags）。
      読めない提出物は、トレースバックで止まらずに全問 0 点で、理由つきで採点する（Ch6Exporter）。
    - export: grades.csv に列 ch6_flags（Ch6CsvExport）。"""
    from .nbvalidate import patch_validate

    c.Execute.timeout = CELL_TIMEOUT
    c.Validator.width = 400
    pp = "nbgrader.preprocessors."
    c.Autograde.sanitize_preprocessors = [
        f"{pp}ClearOutput", f"{MODULE}.NormalizeMetadata", f"{pp}DeduplicateIds", f"{pp}OverwriteKernelspec",
        f"{MODULE}.RestoreGradeCells", f"{pp}OverwriteCells", f"{pp}CheckCellMetadata"]
    c.Autograde.autograde_preprocessors = [
        f"{MODULE}.Execute", f"{MODULE}.GuardGrades", f"{pp}IgnorePattern",
        "nbconvert.preprocessors.ClearMetadataPreprocessor", f"{pp}LimitOutput", f"{pp}SaveAutoGrades",
        f"{MODULE}.SaveFlags", f"{pp}AssignLatePenalties", f"{pp}CheckCellMetadata"]
    c.Autograde.exporter_class = f"{MODULE}.Ch6Exporter"
    c.ExportApp.plugin_class = f"{MODULE}.Ch6CsvExport"
    patch_validate()

