"""採点セルの出力を読み、演習の結果と説明文にする。"""
from __future__ import annotations

import re

from .. import checking
from .._core import Status
from .exercises import source_of
from .model import ExerciseResult


def one_line(text, limit: int = 80) -> str:
    """1 行に縮める（アドレスは伏せる）。SyntaxError の "(3730423741.py, line 2)" はカーネルが付けた
    一時ファイル名なので、行番号だけ残す。"""
    text = re.sub(r"\s*\((?:[^()]*[/\\])?\d+\.py, line (\d+)\)", r"（\1 行目）", str(text))
    return checking.one_line(text, limit)


def first_error(cell) -> str:
    for o in cell.get("outputs", []):
        if o.get("output_type") == "error":
            return f"{o.get('ename', 'Error')}: {o.get('evalue', '')}".strip(": ")
    return ""


def result_from_payload(eid: str, title: str, p: dict) -> ExerciseResult:
    try:
        status = Status(p.get("status"))
    except ValueError:
        status = Status.INTERNAL
    return ExerciseResult(eid, str(p.get("title", title)), status, str(p.get("message", "")))


# ------------------------------------------------------------------------------ 説明文

def check_timeout(eid: str, title: str, seconds: float) -> ExerciseResult:
    return ExerciseResult(eid, title, Status.TIMEOUT, f"{title}: チェックが {seconds:g} 秒以内に終わりませんでした"
                                                      "（関数が無限ループしていませんか？）。")


def check_lost(eid: str, title: str, dead: bool, seconds: float) -> ExerciseResult:
    if dead:
        return ExerciseResult(eid, title, Status.CRASH,
                              f"{title}: カーネルが停止しました（関数の中で os._exit やメモリ不足?）。")
    return ExerciseResult(eid, title, Status.TIMEOUT,
                          f"{title}: チェックが {seconds:g} 秒以内に終わらず、中断もできませんでした。")


def not_graded(eid: str, title: str, why: str) -> ExerciseResult:
    return ExerciseResult(eid, title, Status.NOT_GRADED, f"{title}: {why}採点できませんでした。")


def cell_error_note(cell_errors: dict[int, dict]) -> str:
    first = min(cell_errors)
    e = cell_errors[first]
    more = f"（ほか {len(cell_errors) - 1} セルでも）" if len(cell_errors) > 1 else ""
    return f"上から {first + 1} 番目のセルでエラー: {one_line(e['ename'] + ': ' + e['evalue'])}{more}"


def why_missing(nb, learner_cells, title, cell_errors, skip, stop_at, overran=None) -> str:
    """関数が見つからない理由を、def のあるセルの様子から推し量る。
    stop_at: 時間切れでこのセルから先は実行していない。overran: 実行中に制限時間を超えたセル。"""
    pattern = re.compile(rf"^\s*def\s+{re.escape(title)}\s*\(", re.M)
    cells = [i for i in learner_cells if pattern.search(source_of(nb.cells[i]))]
    if not cells:
        return "そのセルを消したか、関数名を変えましたか？"
    j = cells[-1]
    if j in cell_errors:
        e = cell_errors[j]
        return f"上から {j + 1} 番目のそのセルでエラー: {one_line(e['ename'] + ': ' + e['evalue'])}"
    if overran is not None and j == overran:
        return f"上から {j + 1} 番目のそのセルが制限時間を超えました（無限ループ?）"
    if stop_at is not None and j >= stop_at:
        return "制限時間内にそのセルまで実行されませんでした"
    if j in skip:
        return "そのセルでカーネルが停止しました"
    return f"上から {j + 1} 番目のセルで定義したあと、消したか上書きしていませんか？"


def missing(r: ExerciseResult, why: str) -> None:
    r.message = f"{r.title}: 関数 {r.title} が定義されていません（{why}）。"
