"""1 冊の採点の流れ: 監視を入れる → 学習者のセル → 採点の準備（ch6 の読み込み直し）→ 演習ごとのチェック。

監視（:mod:`ch6.grading.guard`）は監査フックと、ホストの UNIX ソケットです。結果も監視の指摘もソケットで届きます
（セルの表示は使いません）。学習者のセルごとに届いた指摘を読み、配ったままのセルからの ``ch6.checks`` の読み込み
（6.3a の ``gated_mlp``）は数えません。指摘が 1 つでもあれば、全演習を ⚠️ tampered（0 点）にして備考に書きます。

カーネルが落ちたセルは、新しいカーネルでそのセルを飛ばしてやり直します。中断しても応答しないセルは、新しいカーネルで
その手前までを実行し直します（カーネルは 1 冊につき最大 MAX_KERNELS 個）。どこまで分かったかは :class:`State` に
ためていき、最後に :func:`_finish` が結果と備考にまとめます。
"""
from __future__ import annotations

import copy
import dataclasses
import enum
import time
from pathlib import Path

import nbformat

from .. import nbrun
from .._core import Status
from . import guard, isolate, outputs
from .cells import is_test_cell, sane_metadata
from .exercises import Assignment, describe_cell
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
    given: set[int]  # 配ったままの学習者のセル（そこからの ch6.checks の読み込みは指摘にしない）

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
    flags: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # 監視の指摘 (種類, 中身)
    index: int = 0                     # 学習者のセルの番号、またはチェックの番号（0 始まり）


def plan(nb, assignment: Assignment, cfg: Config) -> Plan:
    work = copy.deepcopy(nb)
    n_learner = len(work.cells)
    # 採点の準備とチェックのセルは、監視への合図だけ（何をするかはソケットで送る）
    work.cells += [nbformat.v4.new_code_cell(guard.POKE) for _ in range(1 + len(assignment.ids))]
    for cell in work.cells:
        cell.pop("id", None)
        sane_metadata(cell)
    learner_cells = [i for i in range(n_learner)  # nbgrader 版の採点のセルは飛ばす（同じチェックを採点セルで行う）
                     if work.cells[i].cell_type == "code" and work.cells[i].source.strip()
                     and not is_test_cell(work.cells[i])]
    hashes = {c.hash for c in assignment.cells or []}
    given = {i for i in learner_cells if describe_cell(nb.cells[i]).hash in hashes}
    return Plan(work, n_learner, learner_cells, assignment, cfg, given)


def kernel_env(cfg: Config) -> dict[str, str]:
    env = nbrun.kernel_env(cfg.devices)
    env["CH6_GRADING"] = "1"  # 学習者セルの ch6.check は何もしない（採点は採点セルでまとめて）
    return env


async def execute_and_check(nb, assignment: Assignment, cfg: Config, cwd: str,
                            outputs_into=None) -> tuple[dict[str, ExerciseResult], list[str]]:
    """学習者のセルを実行し、採点セルで全演習をチェックする。(結果, 備考) を返す。
    outputs_into: nb と同じセルのノートブック。学習者のセルの出力をそこに写す（cfg.keep_outputs のとき。nbgrader 版）。"""
    p, st = plan(nb, assignment, cfg), State()
    # 隔離なしのときは、採点のしくみ・ほかの提出物・成績簿を写しておき、後で比べる
    watch = isolate.Watch(cfg.protect, skip=[cwd]) if (cfg.isolation or isolate.mode()) == isolate.UNISOLATED else None
    for _attempt in range(MAX_KERNELS):
        session = KernelSession(p.work, p.n_learner, cwd, cfg, kernel_env(cfg))
        try:
            await _run(session, p, st)
            break
        except KernelLost as lost:
            _listen(session, st)  # カーネルが落ちる前に監視が送った指摘も数える
            if not _after_lost(lost.kind, p, st):
                break
        finally:
            await session.stop()
    changed = watch.verify() if watch else []
    if changed:  # 書き換えは元に戻し、この提出物を 0 点に
        st.flags.append((isolate.OUTSIDE, isolate.outside_note(changed)))
    if outputs_into is not None:
        for i in p.learner_cells:
            target = outputs_into.cells[i]
            target.outputs = p.work.cells[i].get("outputs", [])
            target.execution_count = p.work.cells[i].get("execution_count")
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
    ok = await session.run_prelude(str(PACKAGE_DIR.parent), p.cfg.setup_timeout)
    if ok:
        await _learner_cells(session, p, st)
    why = await _set_up_grader(session, p, st) if ok else "採点の監視を入れられませんでした"
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
        _listen(session, st, given=i in p.given)
        if state is CellState.TIMEOUT:
            st.stop_at = st.timed_out_cell = st.overran = i
            break
        if state is CellState.ERROR and "raises-exception" not in p.work.cells[i].metadata.get("tags", []):
            st.cell_errors[i] = session.errors[i]


def _listen(session: KernelSession, st: State, given: bool = False) -> list[dict]:
    """監視から届いた行を読み、指摘を st.flags に足して、残り（結果）を返す。
    given: 配ったままのセルの実行中（そこからの ch6.checks の読み込みは講座のコードなので数えない）。"""
    out = []
    for msg in session.channel.drain():
        if msg.get("k") == "flag":
            if not (given and msg.get("code") == "reference"):
                st.flags.append((str(msg.get("code")), str(msg.get("what", ""))))
        else:
            out.append(msg)
    return out


async def _set_up_grader(session: KernelSession, p: Plan, st: State) -> str | None:
    """インストール先の ch6 を読み込み直す（制限時間は cfg.setup_timeout）。できなければその理由。"""
    st.step = Step.SETUP
    session.channel.send(cmd="setup")
    state = await session.cell(p.n_learner, p.cfg.setup_timeout)
    got = _listen(session, st)
    origin = next((m.get("origin") for m in got if m.get("kind") == "setup"), None)
    error = next((m.get("why") for m in got if m.get("k") == "error"), None)
    if state is CellState.TIMEOUT:
        return f"{p.cfg.setup_timeout:g} 秒以内に終わりませんでした"
    if origin is None and error is None:  # 監視が何も返さない: 合図が届かないようにされた
        st.flags.append(("silent", "採点の準備"))
        return "監視から返事がありませんでした"
    if origin is None or not Path(origin).resolve().is_relative_to(PACKAGE_DIR):
        return error or outputs.first_error(p.work.cells[p.n_learner]) or f"読み込み先 {origin}"
    return None


async def _checks(session: KernelSession, p: Plan, st: State) -> None:
    """演習ごとに講座のチェック（1 つ cfg.check_timeout 秒まで）。前のカーネルで結果の出たものは飛ばす。"""
    for k, eid in enumerate(p.assignment.ids):
        if eid in st.results:
            continue
        st.step, st.index = Step.CHECK, k
        index = p.n_learner + 1 + k
        session.channel.send(cmd="check", id=eid)
        state = await session.cell(index, p.cfg.check_timeout)
        msgs = _listen(session, st)
        # 採点セルが最後まで実行されたときだけ結果にする（学習者の関数が途中で何か表示してから止まっても使わない）
        got = [x for x in msgs if x.get("k") == "result" and x.get("id") == eid]
        error = next((m.get("why") for m in msgs if m.get("k") == "error"), None)
        if state is CellState.OK and got:
            st.results[eid] = outputs.result_from_payload(eid, p.title(eid), got[-1])
        elif state is CellState.TIMEOUT:
            st.results[eid] = outputs.check_timeout(eid, p.title(eid), p.cfg.check_timeout)
        else:
            if not msgs and state in (CellState.OK, CellState.ERROR):
                st.flags.append(("silent", eid))
            why = error or outputs.first_error(p.work.cells[index]) or "結果が返りませんでした"
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
    if st.flags:  # 採点のしくみへの干渉: 全演習を 0 点に（何が見つかったかを備考と各演習のメッセージに）
        note = guard.tamper_note(st.flags)
        notes.insert(0, note)
        st.results = {eid: ExerciseResult(eid, p.title(eid), Status.TAMPERED, note) for eid in p.assignment.ids}
    for eid in p.assignment.ids:
        r = st.results.get(eid)
        if r is None:  # やり直しを使い切った、または準備で止まった
            st.results[eid] = outputs.not_graded(eid, p.title(eid), st.not_graded_why or "カーネルが何度も停止したため")
        elif r.status is Status.MISSING:
            outputs.missing(r, outputs.why_missing(p.work, p.learner_cells, r.title, st.cell_errors, st.skip,
                                                   st.stop_at, st.overran))
    return {eid: st.results[eid] for eid in p.assignment.ids}, notes
