"""ch6.grading.inkernel: 学習者のカーネルの中で動く採点コード（監視からの呼び出しは tests/grading/test_guard.py）。"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import ch6
from ch6.grading import inkernel

ROOT = Path(__file__).resolve().parents[2]
HOST_ONLY = ("nbformat", "jsonschema", "nbclient", "jupyter_client", "rich")


def _python(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_importing_the_in_kernel_module_loads_only_the_check_registry():
    got = json.loads(_python("import json, sys\nimport ch6.grading.inkernel\n"
                             "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
                             f"{HOST_ONLY + ('ch6',)!r})))"))
    assert not [m for m in got if m.split(".")[0] in HOST_ONLY], got  # nbformat も jsonschema も読まない
    assert [m for m in got if m.startswith("ch6.grading")] == ["ch6.grading", "ch6.grading.inkernel"], got
    assert {"ch6", "ch6._core"} <= set(got) and "ch6.nbrun" not in got, got


def test_grader_reports_a_broken_check_module(monkeypatch):
    monkeypatch.setattr(inkernel, "load_errors", lambda: {"s9_9": "SyntaxError: invalid syntax"})
    shown = []
    grade = inkernel.grader(shown.append, {})
    grade("9.9-1")
    assert shown[0]["kind"] == "setup"
    assert shown[1] == {"id": "9.9-1", "title": "?", "status": "internal",
                        "message": "チェックを読み込めませんでした（s9_9.py: SyntaxError: invalid syntax）。"}
    assert inkernel.check_module("6.3a-2") == "s6_3a"


def test_check_does_nothing_while_grading(monkeypatch, capsys):
    def never(*args):
        raise AssertionError("採点中の ch6.check は学習者の関数を呼ばない")

    before = len(ch6.RESULTS)
    monkeypatch.setenv("CH6_GRADING", "1")
    assert ch6.check("6.1-1", never) is None
    assert capsys.readouterr().out == "" and len(ch6.RESULTS) == before
    monkeypatch.delenv("CH6_GRADING")
    ch6.check("6.1-1", lambda W, xs: xs)
    assert "[6.1-1]" in capsys.readouterr().out and len(ch6.RESULTS) == before + 1


def test_one_status_vocabulary_and_one_table_of_marks():
    assert [s.value for s in ch6.Status] == ["pass", "fail", "error", "timeout", "crash", "not_done", "internal",
                                               "missing", "not_graded", "tampered"]
    assert set(ch6.MARKS) == set(ch6.Status)
    assert {s.value: s.mark for s in ch6.Status} == {
        "pass": "✅", "fail": "❌", "error": "❌", "timeout": "❌", "crash": "❌", "not_done": "⏳",
        "internal": "⚠️", "missing": "⚠️", "not_graded": "⚠️", "tampered": "⚠️"}
    r = ch6.Result("6.1-1", "not_done", "x")
    assert r.status is ch6.Status.NOT_DONE and r.line == "⏳ 未解答 [6.1-1] x" and not r.ok
