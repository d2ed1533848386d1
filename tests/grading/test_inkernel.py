"""ch6.grading.inkernel: 学習者のカーネルの中で動く採点コード（カーネルの代わりにサブプロセスで確かめる）。"""
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


def test_prelude_setup_and_checks_survive_a_replaced_ch6():
    """カーネルでの順番どおり: 準備 → 学習者のコード（ch6 と display を差し替える）→ 読み込み直し → チェック。"""
    nonce, name = "n0nce", ch6.registry()["6.1-1"].title
    script = "\n".join([
        "import json, sys",
        "ns = {}",
        f"exec({inkernel.prelude(nonce, str(ROOT))!r}, ns)",
        # 学習者のコード: 未着手の関数（6.1-1）、ch6 と表示の差し替え
        f"exec('def {name}(*args, **kwargs):\\n    raise NotImplementedError', ns)",
        "import ch6, IPython.display",
        "sys.modules['ch6'] = None",
        "IPython.display.display = lambda *a, **k: print('FAKE')",
        f"exec({inkernel.SETUP!r}, ns)",
        f"exec({inkernel.check_code('6.1-1')!r}, ns)",
        f"exec({inkernel.check_code('6.1-2')!r}, ns)",
        f"exec({inkernel.check_code('9.9-1')!r}, ns)",
        f"print('HOST', json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HOST_ONLY!r})))",
    ])
    lines = _python(script).splitlines()
    assert "FAKE" not in lines and lines[-1] == "HOST []"
    shown = [eval(ln)[inkernel.MIME] for ln in lines[:-1]]  # 表示の関数は差し替え前のもの（素の Python では print）
    assert all(p["nonce"] == nonce for p in shown)
    assert shown[0]["kind"] == "setup" and Path(shown[0]["origin"]).resolve() == ROOT / "ch6" / "_core.py"
    assert [(p["id"], p["status"]) for p in shown[1:]] == [
        ("6.1-1", "not_done"), ("6.1-2", "missing"), ("9.9-1", "internal")]
    assert "この番号の演習はありません" in shown[3]["message"]


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
                                               "missing", "not_graded"]
    assert set(ch6.MARKS) == set(ch6.Status)
    assert {s.value: s.mark for s in ch6.Status} == {
        "pass": "✅", "fail": "❌", "error": "❌", "timeout": "❌", "crash": "❌", "not_done": "⏳",
        "internal": "⚠️", "missing": "⚠️", "not_graded": "⚠️"}
    r = ch6.Result("6.1-1", "not_done", "x")
    assert r.status is ch6.Status.NOT_DONE and r.line == "⏳ [6.1-1] x" and not r.ok


def test_prelude_loads_jax_but_leaves_the_backend_to_the_learner():
    """JAX の読み込みは準備の時間に（学習者のセルの制限時間を使わない）。バックエンドは初期化しない
    （学習者の ch6.setup() がデバイスを表示し、JAX_NUM_CPU_DEVICES を効かせる）。"""
    script = "\n".join([
        "import sys",
        "ns = {}",
        f"exec({inkernel.prelude('n', str(ROOT))!r}, ns)",
        "from jax._src import xla_bridge",
        "print('jax' in sys.modules, 'jax.numpy' in sys.modules, bool(xla_bridge._backends))",
    ])
    assert _python(script).split() == ["True", "True", "False"]
