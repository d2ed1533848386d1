"""1 冊の採点の流れ: 準備（表示の関数を閉じ込める）→ 学習者のセル → 採点の準備（ch6 の読み込み直し）→ 演習ごとのチェック。

カーネルが落ちたセルは、新しいカーネルでそのセルを飛ばしてやり直します。中断しても応答しないセルは、新しいカーネルで
その手前までを実行し直します（カーネルは 1 冊につき最大 MAX_KERNELS 個）。どこまで分かったかは :class:`State` に
ためていき、最後に :func:`_finish` が結果と備考にまとめます。
"""
from __future__ import annotations

import copy
import dataclasses
import enum
import secrets
import time
from pathlib import Path

import nbformat

from .. import nbrun
from .._core import Status
from . import inkernel, outputs
from . import nbgrader as nbgrader_edition
from .exercises import Assignment
from .model import Config, ExerciseResult
from .session import CellState, KernelLost, KernelSession, Lost

MAX_KERNELS = 3  # 1 冊あたり: カーネルが落ちた・固まったときのやり直しを含めて
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # インストール先の ch6/


class Step(enum.Enum):
    PRELUDE = "prelude"  # 学習者のセルより先の準備
    LEARNER = "learner"  # 学習者のセル
    SETUP = "setup"      # 採点の準備（ch6 の読み込み直し）
    CHECK = "check"      # 演習ごとのチェック


@dataclasses.dataclass
class Plan:
    """1 冊について変わらないもの: 実行するノートブック（学習者のセル + 採点セル）と設定。"""
    work: nbformat.NotebookNode
    n_learner: int
    learner_cells: list[int]  # 実行する学習者のセル（空でないコードセル）
    assignment: Assignment
    cfg: Config
    nonce: str

    def title(self, eid: str) -> str:
        return self.assignment.titles.get(eid, "?")


@dataclasses.dataclass
class State:
    """カーネルをやり直しても引き継ぐ、分かったこと。"""
    results: dict[str, ExerciseResult] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    skip: set[int] = dataclasses.field(default_factory=set)  # カーネルが落ちたセル（飛ばす）
    stop_at: int | None = None         # 時間切れ: このセルから先は実行しない
    timed_out_cell: int | None = None  # 制限時間を超えたセル（備考用）
    overran: int | None = None         # 実行中に制限時間を超えたセル（def がそこにあれば「そのセルが時間切れ」）
    hung: bool = False                 # 中断しても応答せず、カーネルを替えた
    cell_errors: dict[int, dict] = dataclasses.field(default_factory=dict)
    not_graded_why: str | None = None  # 採点できなかった演習の理由（既定: カーネルが何度も停止した）
    step: Step | None = None           # いま実行しているところ（カーネルが失われたときの判断に使う）
    index: int = 0                     # 学習者のセルの番号、またはチェックの番号（0 始まり）


def plan(nb, assignment: Assignment, cfg: Config) -> Plan:
    work = copy.deepcopy(nb)
    n_learner = len(work.cells)
    work.cells.append(nbformat.v4.new_code_cell(inkernel.SETUP))
    work.cells += [nbformat.v4.new_code_cell(inkernel.check_code(eid)) for eid in assignment.ids]
    for cell in work.cells:
        cell.pop("id", None)
    learner_cells = [i for i in range(n_learner)  # nbgrader 版の採点のセルは飛ばす（同じチェックを採点セルで行う）
                     if work.cells[i].cell_type == "code" and work.cells[i].source.strip()
                     and not nbgrader_edition.is_test_cell(work.cells[i])]
    return Plan(work, n_learner, learner_cells, assignment, cfg, secrets.token_hex(8))


def kernel_env(cfg: Config) -> dict[str, str]:
    env = nbrun.kernel_env(cfg.devices)
    env["CH6_GRADING"] = "1"  # 学習者セルの ch6.check は何もしない（採点は採点セルでまとめて）
    return env


async def execute_and_check(nb, assignment: Assignment, cfg: Config,
                            cwd: str) -> tuple[dict[str, ExerciseResult], list[str]]:
    """学習者のセルを実行し、採点セルで全演習をチェックする。(結果, 備考) を返す。"""
    p, st = plan(nb, assignment, cfg), State()
    for _attempt in range(MAX_KERNELS):
        session = KernelSession(p.work, p.n_learner, cwd, cfg, kernel_env(cfg))
        try:
            await _run(session, p, st)
            break
        except KernelLost as lost:
            if not _after_lost(lost.kind, p, st):
                break
        finally:
            await session.stop()
    return _finish(p, st)


async def _run(session: KernelSession, p: Plan, st: State) -> None:
    """カーネル 1 つで最後まで。カーネルが失われたら KernelLost（st.step にその場所）。"""
    try:
        await session.start()
    except Exception as exc:
        st.notes.append(f"カーネルを起動できませんでした（{type(exc).__name__}）。")
        st.not_graded_why = "カーネルを起動できなかったため"
        return
    st.step = Step.PRELUDE
    ok = await session.run_hidden(inkernel.prelude(p.nonce, str(PACKAGE_DIR.parent)), p.cfg.setup_timeout)
    if ok:
        await _learner_cells(session, p, st)
    why = await _set_up_grader(session, p, st) if ok else "表示の準備ができませんでした"
    if why:
        for eid in p.assignment.ids:
            st.results.setdefault(eid, ExerciseResult(
                eid, p.title(eid), Status.INTERNAL, f"採点用の ch6 を読み込めませんでした（{outputs.one_line(why)}）。"))
    else:
        await _checks(session, p, st)
    st.step = None


async def _learner_cells(session: KernelSession, p: Plan, st: State) -> None:
    """学習者のセルを上から（全体で cfg.timeout 秒まで）。落ちたセルは飛ばし、時間切れならそこで止める。"""
    deadline = time.monotonic() + p.cfg.timeout
    st.cell_errors = {}
    for i in p.learner_cells:
        if i in st.skip:
            continue
        if st.stop_at is not None and i >= st.stop_at:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            st.stop_at = st.timed_out_cell = i
            break
        st.step, st.index = Step.LEARNER, i
        state = await session.cell(i, remaining)
        if state is CellState.TIMEOUT:
            st.stop_at = st.timed_out_cell = st.overran = i
            break
        if state is CellState.ERROR and "raises-exception" not in p.work.cells[i].metadata.get("tags", []):
            st.cell_errors[i] = session.errors[i]


async def _set_up_grader(session: KernelSession, p: Plan, st: State) -> str | None:
    """インストール先の ch6 を読み込み直す（制限時間は cfg.setup_timeout）。できなければその理由。"""
    st.step = Step.SETUP
    cell = p.work.cells[p.n_learner]
    state = await session.cell(p.n_learner, p.cfg.setup_timeout)
    origin = outputs.setup_origin(cell, p.nonce)
    if state is CellState.TIMEOUT:
        return f"{p.cfg.setup_timeout:g} 秒以内に終わりませんでした"
    if origin is None or not Path(origin).resolve().is_relative_to(PACKAGE_DIR):
        return outputs.first_error(cell) or f"読み込み先 {origin}"
    return None


async def _checks(session: KernelSession, p: Plan, st: State) -> None:
    """演習ごとに講座のチェック（1 つ cfg.check_timeout 秒まで）。前のカーネルで結果の出たものは飛ばす。"""
    for k, eid in enumerate(p.assignment.ids):
        if eid in st.results:
            continue
        st.step, st.index = Step.CHECK, k
        index = p.n_learner + 1 + k
        state = await session.cell(index, p.cfg.check_timeout)
        # 採点セルが最後まで実行されたときだけ結果にする（学習者の関数が途中で何か表示してから止まっても使わない）
        got = [x for x in outputs.payloads(p.work.cells[index], p.nonce) if x.get("id") == eid]
        if state is CellState.OK and got:
            st.results[eid] = outputs.result_from_payload(eid, p.title(eid), got[-1])
        elif state is CellState.TIMEOUT:
            st.results[eid] = outputs.check_timeout(eid, p.title(eid), p.cfg.check_timeout)
        else:
            why = outputs.first_error(p.work.cells[index]) or "結果が返りませんでした"
            st.results[eid] = ExerciseResult(eid, p.title(eid), Status.INTERNAL,
                                             f"{p.title(eid)}: 採点できませんでした（{outputs.one_line(why)}）。")


def _after_lost(kind: Lost, p: Plan, st: State) -> bool:
    """カーネルが失われたあと: 分かったことを st に書き、新しいカーネルでやり直すなら True。"""
    dead = kind is Lost.DEAD
    if st.step is Step.CHECK:
        eid = p.assignment.ids[st.index]
        st.results[eid] = outputs.check_lost(eid, p.title(eid), dead, p.cfg.check_timeout)
        return True
    if st.step is Step.LEARNER:
        if dead:
            st.skip.add(st.index)
            st.notes.append(f"上から {st.index + 1} 番目のセルでカーネルが停止しました（os._exit やメモリ不足など）。"
                            "新しいカーネルでそのセルを飛ばして採点しました。")
        else:
            st.stop_at = st.timed_out_cell = st.overran = st.index
            st.hung = True
            st.notes.append(f"上から {st.index + 1} 番目のセルが制限時間を超え、中断もできませんでした。"
                            "新しいカーネルでそのセルの手前までを実行して採点しました。")
        return True
    if st.step in (Step.PRELUDE, Step.SETUP):
        if dead:
            st.notes.append("採点の準備中にカーネルが停止しました。")
            st.not_graded_why = "採点の準備中にカーネルが停止したため"
        else:
            st.notes.append("採点の準備が制限時間内に終わらず、中断もできませんでした。")
            st.not_graded_why = "採点の準備中にカーネルが応答しなくなったため"
        return False
    st.not_graded_why = "カーネルが停止したため"
    return False


def _finish(p: Plan, st: State) -> tuple[dict[str, ExerciseResult], list[str]]:
    notes = list(st.notes)
    if st.timed_out_cell is not None and not st.hung:
        notes.insert(0, f"上から {st.timed_out_cell + 1} 番目のセルで制限時間 {p.cfg.timeout:g} 秒を超えました"
                        "（無限ループ?）。そのセル以降は実行せずに採点しました。")
    if st.cell_errors:
        notes.append(outputs.cell_error_note(st.cell_errors))
    for eid in p.assignment.ids:
        r = st.results.get(eid)
        if r is None:  # やり直しを使い切った、または準備で止まった
            st.results[eid] = outputs.not_graded(eid, p.title(eid), st.not_graded_why or "カーネルが何度も停止したため")
        elif r.status is Status.MISSING:
            outputs.missing(r, outputs.why_missing(p.work, p.learner_cells, r.title, st.cell_errors, st.skip,
                                                   st.stop_at, st.overran))
    return {eid: st.results[eid] for eid in p.assignment.ids}, notes
