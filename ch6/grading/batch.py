"""クラス全員: 提出ファイルを集め、1 冊ずつ（--jobs 冊を並列に）採点し、名前の重なりを解く。"""
from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from .._core import Status
from .exercises import Assignment
from .identify import disambiguate, identify, learner_name
from .model import Config, ExerciseResult, Row
from .outputs import one_line
from .tamper import older_version, structure_notes


def collect(paths: list[str | Path]) -> list[Path]:
    """ファイルはそのまま、フォルダは中の *.ipynb（隠しファイルとチェックポイントを除く）。重複は 1 つに。"""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(q for q in p.rglob("*.ipynb") if q.is_file() and not any(
                part.startswith(".") for part in q.relative_to(p).parts))
        else:
            out.append(p)
    seen, uniq = set(), []
    for p in out:
        if p.resolve() not in seen:
            seen.add(p.resolve())
            uniq.append(p)
    return uniq


def nbgrader_course(folder: Path) -> bool:
    """nbgrader のコースのフォルダ（submitted/ と、nbgrader_config.py・gradebook.db・source/ のどれか）か。"""
    return (folder / "submitted").is_dir() and any(
        (folder / n).exists() for n in ("nbgrader_config.py", "gradebook.db", "source"))


def nbgrader_paths(paths: list[str | Path]) -> tuple[list[Path], list[str]]:
    """nbgrader のコースのフォルダは、その submitted/ に置き換える。返り値は (パス, 採点する人への知らせ)。"""
    out, said = [], []
    for p in map(Path, paths):
        if p.is_dir() and nbgrader_course(p):
            out.append(p / "submitted")
            said.append(f"{p} は nbgrader のコースのフォルダです。submitted/ の提出物だけを採点します。"
                        "source/ は解答、release/ は配布版、autograded/ は同じ提出物を nbgrader が採点した写しです。"
                        "autograded/ を採点するなら、そのフォルダを渡してください。")
        else:
            out.append(p)
    return out, said


FEEDBACK_ONLY = ("nbgrader の feedback/ にあるのは HTML で、ノートブックではないので採点できません。"
                 "autograded/ か submitted/ のフォルダを渡してください。")


def only_feedback(paths: list[Path]) -> bool:
    """ノートブックがなく、nbgrader の feedback/ の HTML だけがあるか。"""
    return any(p.is_dir() and "feedback" in p.absolute().parts + tuple(q.name for q in p.iterdir() if q.is_dir())
               and any(p.rglob("*.html")) for p in paths)


def _all(assignment: Assignment, status: Status, message: str) -> dict[str, ExerciseResult]:
    return {i: ExerciseResult(i, assignment.titles.get(i, "?"), status, message) for i in assignment.ids}


async def grade_one(path: Path, assignments: dict[str, Assignment], cfg: Config,
                    forced: str | None = None) -> Row:
    # nbformat と nbclient は採点するときにだけ読み込む（jsonschema 経由で数秒かかる: --help や引数の誤りはすぐ答える）
    from .execute import execute_and_check
    from .submission import read_submission

    start = time.monotonic()
    nb, problem = read_submission(path)
    try:  # 学習者が壊したメタデータなどで判別が失敗しても、クラス全体は止めない（この提出物だけ ⚠️ と備考）
        assignment = identify(path, nb, assignments, forced)
    except Exception as exc:
        assignment, problem = None, (f"どの演習ノートブックか判別できません（ノートブックのメタデータが壊れています: "
                                     f"{type(exc).__name__}）。--notebook で指定するか、出し直してもらってください。")
    name = assignment.name if assignment else None
    row = Row(learner_name(path, name), str(path), name)
    try:
        if assignment is None:
            row.notes.append(problem or "どの演習ノートブックか判別できません（--notebook で指定してください）。")
        elif problem:
            row.notes.append(problem)
            row.exercises = _all(assignment, Status.NOT_GRADED, problem)
        else:
            notes = structure_notes(nb, assignment)
            with tempfile.TemporaryDirectory(prefix="ch6-grade-") as cwd:
                row.exercises, run_notes = await execute_and_check(nb, assignment, cfg, cwd)
            for i, why in older_version(nb, assignment).items():  # 古い版で違う演習: 関数が見つからないのは当然
                if getattr(row.exercises.get(i), "status", None) is not Status.PASS:
                    row.exercises[i] = ExerciseResult(i, assignment.titles.get(i, "?"), Status.NOT_GRADED, why)
            row.notes = run_notes + notes
    except Exception as exc:  # 採点ツール自身の不具合でも、ほかの提出物は採点を続ける
        row.notes.append(f"採点ツール内部のエラー: {type(exc).__name__}: {one_line(exc)}")
        if assignment is not None:
            for i, r in _all(assignment, Status.NOT_GRADED, "採点ツール内部のエラーで採点できませんでした。").items():
                row.exercises.setdefault(i, r)
    row.seconds = time.monotonic() - start
    return row


async def grade_all(paths: list[Path], assignments: dict[str, Assignment], cfg: Config,
                    forced: str | None = None, progress: Callable[[str], None] | None = None) -> list[Row]:
    sem = asyncio.Semaphore(max(1, cfg.jobs))
    done = 0

    async def one(p: Path) -> Row:
        nonlocal done
        async with sem:
            row = await grade_one(p, assignments, cfg, forced)
        done += 1
        if progress:
            progress(f"[{done}/{len(paths)}] {row.notebook or '?'} {row.learner}: "
                     f"{row.score}/{row.max_score} ({row.seconds:.1f} s)")
        return row

    rows = await asyncio.gather(*(one(p) for p in paths))
    disambiguate(rows)
    return sorted(rows, key=lambda r: (r.notebook or "~", r.learner, r.file))
