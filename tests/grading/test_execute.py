"""ch6.grading.execute: 1 冊の流れを、台本どおりに振る舞う偽のカーネルで確かめる（本物のカーネルなし、速い）。

本物のカーネルでの同じ場面（落ちる・固まる・時間切れ）は tests/test_grade.py の end-to-end が 1 回で確かめます。
"""
from __future__ import annotations

import asyncio
import re

import nbformat
import pytest

from ch6.grading import execute, exercises, outputs
from ch6.grading.exercises import Assignment
from ch6.grading.model import Config
from ch6.grading.session import CellState, KernelLost, Lost

CFG = Config(timeout=30, check_timeout=5, setup_timeout=50)
SOURCES = ["import numpy as np", "def f(x):\n    return x", "def g(x):\n    return x", "def h(x):\n    return x"]
A = Assignment("9_1_test", ["9.1-1", "9.1-2", "9.1-3"], {"9.1-1": "f", "9.1-2": "g", "9.1-3": "h"})
SETUP, CHECK = "setup", "check"  # 台本のキー: 学習者のセルは番号、採点の準備は SETUP、チェックは (CHECK, 番号)


class FakeChannel:
    """監視のソケットの代わり: 送った命令を覚え、セルの実行で出た行を drain で返す。"""

    def __init__(self):
        self.sent, self.lines = [], []

    def send(self, **cmd):
        self.sent.append(cmd)

    def drain(self):
        out, self.lines = self.lines, []
        return out


class FakeSession:
    """script[(何個目のカーネル, どこ)] の振る舞い: "ok" / ("error", 名前) / "timeout" / Lost / "start" で起動失敗、
    ("flag", 種類) で監視の指摘、"silent" で監視が何も返さない。"""
    script: dict = {}
    kernels: list = []

    def __init__(self, nb, n_learner, cwd, cfg, env):
        assert env["CH6_GRADING"] == "1"
        self.nb, self.n, self.errors, self.defined = nb, n_learner, {}, set()
        self.channel = FakeChannel()
        self.k = len(FakeSession.kernels)
        FakeSession.kernels.append([])

    def _do(self, where):
        FakeSession.kernels[self.k].append(where)
        what = self.script.get((self.k, where), "ok")
        if isinstance(what, Lost):
            raise KernelLost(what)
        return what

    async def start(self):
        if self._do("start") == "start":
            raise RuntimeError("no kernel")

    async def stop(self):
        pass

    async def run_prelude(self, root, timeout):
        assert timeout == CFG.setup_timeout and (execute.PACKAGE_DIR.parent / root).is_dir()
        return self._do("prelude") == "ok"

    async def cell(self, index, timeout):
        cell = self.nb.cells[index]
        where = index if index < self.n else SETUP if index == self.n else (CHECK, index - self.n - 1)
        what = self._do(where)
        if what == "timeout":
            return CellState.TIMEOUT
        if isinstance(what, tuple) and what[0] == "flag":
            self.channel.lines.append({"k": "flag", "code": what[1], "what": "x"})
            what = "ok"
        if what == "silent":
            return CellState.OK
        if where == SETUP and isinstance(what, tuple):  # 準備の中の例外は、監視が理由を返す
            self.channel.lines.append({"k": "error", "cmd": "setup", "why": f"{what[1]}: boom"})
            return CellState.OK
        if isinstance(what, tuple):
            self.errors[index] = {"ename": what[1], "evalue": "boom"}
            if index >= self.n:  # 採点セルの出力は残る（学習者のセルの出力は GradeClient が捨てる）
                cell.outputs = [nbformat.v4.new_output("error", ename=what[1], evalue="boom", traceback=[])]
            return CellState.ERROR
        if where == SETUP:
            assert timeout == CFG.setup_timeout and self.channel.sent[-1] == {"cmd": "setup"}
            origin = what if what != "ok" else str(execute.PACKAGE_DIR / "_core.py")
            self.channel.lines.append({"k": "result", "kind": "setup", "origin": origin})
        elif isinstance(where, tuple):
            assert timeout == CFG.check_timeout
            eid = A.ids[where[1]]
            assert self.channel.sent[-1] == {"cmd": "check", "id": eid}
            status = "pass" if A.titles[eid] in self.defined else "missing"
            self.channel.lines.append({"k": "result", "id": eid, "title": A.titles[eid], "status": status,
                                       "message": "ok"})
        else:
            self.defined |= set(re.findall(r"^def (\w+)", cell.source, re.M))
        return CellState.OK



def grade(script):
    FakeSession.script, FakeSession.kernels = script, []
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in SOURCES])
    results, notes = asyncio.run(execute.execute_and_check(nb, A, CFG, "."))
    return {eid: (r.status.value, r.message) for eid, r in results.items()}, notes


@pytest.fixture(autouse=True)
def fake_kernel(monkeypatch):
    monkeypatch.setattr(execute, "KernelSession", FakeSession)


def statuses(results):
    return [s for s, _ in results.values()]


def test_everything_runs_in_one_kernel():
    results, notes = grade({})
    assert statuses(results) == ["pass"] * 3 and notes == []
    assert FakeSession.kernels == [["start", "prelude", 0, 1, 2, 3, SETUP, (CHECK, 0), (CHECK, 1), (CHECK, 2)]]


def test_a_dead_learner_cell_is_skipped_in_a_new_kernel():
    results, notes = grade({(0, 2): Lost.DEAD})
    assert statuses(results) == ["pass", "missing", "pass"]
    assert "（そのセルでカーネルが停止しました）" in results["9.1-2"][1]
    assert notes == ["上から 3 番目のセルでカーネルが停止しました（os._exit やメモリ不足など）。"
                     "新しいカーネルでそのセルを飛ばして採点しました。"]
    assert FakeSession.kernels[1] == ["start", "prelude", 0, 1, 3, SETUP, (CHECK, 0), (CHECK, 1), (CHECK, 2)]


def test_a_hung_learner_cell_stops_the_notebook_there_in_a_new_kernel():
    results, notes = grade({(0, 2): Lost.HUNG})
    assert statuses(results) == ["pass", "missing", "missing"]
    assert "（上から 3 番目のそのセルが制限時間を超えました（無限ループ?））" in results["9.1-2"][1]
    assert "（制限時間内にそのセルまで実行されませんでした）" in results["9.1-3"][1]
    assert notes == ["上から 3 番目のセルが制限時間を超え、中断もできませんでした。"
                     "新しいカーネルでそのセルの手前までを実行して採点しました。"]
    assert FakeSession.kernels[1][:5] == ["start", "prelude", 0, 1, SETUP]


def test_an_interrupted_learner_cell_stops_the_notebook_there():
    results, notes = grade({(0, 2): "timeout"})
    assert statuses(results) == ["pass", "missing", "missing"] and len(FakeSession.kernels) == 1
    assert notes == ["上から 3 番目のセルで制限時間 30 秒を超えました（無限ループ?）。そのセル以降は実行せずに採点しました。"]


def test_learner_errors_are_one_note_and_explain_missing_functions():
    results, notes = grade({(0, 0): ("error", "ModuleNotFoundError"), (0, 3): ("error", "SyntaxError")})
    assert statuses(results) == ["pass", "pass", "missing"]
    assert "（上から 4 番目のそのセルでエラー: SyntaxError: boom）" in results["9.1-3"][1]
    assert notes == ["上から 1 番目のセルでエラー: ModuleNotFoundError: boom（ほか 1 セルでも）"]


@pytest.mark.parametrize("where", ["prelude", SETUP])
@pytest.mark.parametrize("kind, note, why", [
    (Lost.DEAD, "採点の準備中にカーネルが停止しました。", "採点の準備中にカーネルが停止したため"),
    (Lost.HUNG, "採点の準備が制限時間内に終わらず、中断もできませんでした。", "採点の準備中にカーネルが応答しなくなったため"),
])
def test_a_kernel_lost_while_setting_up_is_said_once(where, kind, note, why):
    results, notes = grade({(0, where): kind})
    assert notes == [note] and len(FakeSession.kernels) == 1
    assert all(r == ("not_graded", f"{A.titles[e]}: {why}採点できませんでした。") for e, r in results.items())


@pytest.mark.parametrize("script, why", [
    ({(0, SETUP): "timeout"}, "50 秒以内に終わりませんでした"),
    ({(0, SETUP): ("error", "ImportError")}, "ImportError"),
    ({(0, SETUP): "/elsewhere/ch6/_core.py"}, "読み込み先 /elsewhere/ch6/_core.py"),
    ({(0, "prelude"): "error"}, "採点の監視を入れられませんでした"),
])
def test_a_grader_that_cannot_be_set_up_is_internal(script, why):
    results, notes = grade(script)
    assert notes == [] and statuses(results) == ["internal"] * 3
    assert all(m.startswith(f"採点用の ch6 を読み込めませんでした（{why}") for _, m in results.values()), results


@pytest.mark.parametrize("script", [{(0, 1): ("flag", "replaced")}, {(0, (CHECK, 1)): ("flag", "thread")},
                                    {(0, (CHECK, 2)): "silent"}, {(0, SETUP): "silent"}])
def test_a_flag_from_the_guard_or_its_silence_zeroes_every_exercise_with_one_note(script):
    results, notes = grade(script)
    assert statuses(results) == ["tampered"] * 3 and len(notes) == 1, (results, notes)
    assert notes[0].startswith("採点のしくみへの干渉が見つかりました: ") and all(m == notes[0] for _, m in results.values())


def test_a_reference_import_in_a_cell_given_as_distributed_is_not_a_flag():
    given = Assignment(A.name, A.ids, A.titles, cells=[exercises.describe_cell(nbformat.v4.new_code_cell(SOURCES[0]))])
    FakeSession.script, FakeSession.kernels = {(0, 0): ("flag", "reference")}, []
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in SOURCES])
    results, notes = asyncio.run(execute.execute_and_check(nb, given, CFG, "."))
    assert [r.status.value for r in results.values()] == ["pass"] * 3 and notes == []
    FakeSession.script, FakeSession.kernels = {(0, 1): ("flag", "reference")}, []
    results, notes = asyncio.run(execute.execute_and_check(nb, given, CFG, "."))
    assert [r.status.value for r in results.values()] == ["tampered"] * 3


def test_check_timeouts_and_crashes_cost_only_their_exercise():
    results, notes = grade({(0, (CHECK, 0)): "timeout", (0, (CHECK, 1)): Lost.DEAD, (1, (CHECK, 2)): Lost.HUNG})
    assert results == {
        "9.1-1": ("timeout", "f: チェックが 5 秒以内に終わりませんでした（関数が無限ループしていませんか？）。"),
        "9.1-2": ("crash", "g: カーネルが停止しました（関数の中で os._exit やメモリ不足?）。"),
        "9.1-3": ("timeout", "h: チェックが 5 秒以内に終わらず、中断もできませんでした。")}
    assert notes == [] and FakeSession.kernels[1][-1] == (CHECK, 2)


def test_a_kernel_that_keeps_dying_gives_up_after_max_kernels():
    results, notes = grade({(k, k): Lost.DEAD for k in range(execute.MAX_KERNELS)})
    assert len(FakeSession.kernels) == execute.MAX_KERNELS == 3 and len(notes) == 3
    assert all(r == ("not_graded", f"{A.titles[e]}: カーネルが何度も停止したため採点できませんでした。")
               for e, r in results.items())


def test_a_kernel_that_does_not_start():
    results, notes = grade({(0, "start"): "start"})
    assert notes == ["カーネルを起動できませんでした（RuntimeError）。"]
    assert statuses(results) == ["not_graded"] * 3 and "カーネルを起動できなかったため" in results["9.1-1"][1]


def test_why_missing_tells_a_cell_that_ran_out_of_time_from_one_never_reached():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import time\nwhile True:\n    time.sleep(0.1)\ndef f(x):\n    return x"),
        nbformat.v4.new_code_cell("def g(x):\n    return x")])
    why = outputs.why_missing
    assert why(nb, [0, 1], "f", {}, set(), 0, 0) == "上から 1 番目のそのセルが制限時間を超えました（無限ループ?）"
    assert why(nb, [0, 1], "g", {}, set(), 0, 0) == "制限時間内にそのセルまで実行されませんでした"
    # 時間切れがセルとセルのあいだ（そのセルは始まっていない）なら、実行されなかった
    assert why(nb, [0, 1], "f", {}, set(), 0, None) == "制限時間内にそのセルまで実行されませんでした"
    assert why(nb, [0, 1], "h", {}, set(), None) == "そのセルを消したか、関数名を変えましたか？"
    assert why(nb, [0, 1], "g", {}, set(), None) == "上から 2 番目のセルで定義したあと、消したか上書きしていませんか？"


def test_one_line_keeps_the_line_number_of_a_syntax_error():
    assert outputs.one_line("SyntaxError: '(' was never closed (3730423741.py, line 2)") == \
        "SyntaxError: '(' was never closed（2 行目）"
    assert outputs.one_line("ValueError: at 0x7f00deadbeef\nsecond") == "ValueError: at 0x…"
