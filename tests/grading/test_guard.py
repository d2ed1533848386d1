"""ch6.grading.guard: 監視（監査フック + ホストのソケット）を、カーネルの代わりの Python のサブプロセスで確かめる。

サブプロセスは採点のカーネルと同じ順に動きます: 監視を入れる → 学習者のセル（ipykernel と同じく一時フォルダの
ファイル名でコンパイル）→ 採点の準備の合図 → 演習ごとの合図。ホスト（このテスト）は UNIX ソケットで命令を送り、
結果と指摘を受け取ります。issue 40 の攻撃それぞれが、書き方を変えても指摘になることを確かめます
（ch6-grade と nbgrader での端から端までは tests/test_grade.py と tests/grading/test_nbgrader_roundtrip.py）。
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ch6.grading import guard
from tests.grading.attacks import FORGERIES

ROOT = Path(__file__).resolve().parents[2]
CELL = "/tmp/ipykernel_4242/{}.py"  # ipykernel が学習者のセルに付けるファイル名の形
RIGHT_6_1_1 = textwrap.dedent("""
    import jax
    def rbf_features(kernel, x, centers, gammas):
        return jax.vmap(kernel, in_axes=(None, 0, 0))(x, centers, gammas)
""")
TODO_6_1_5 = "def ensemble_sgd_step(*args, **kwargs):\n    raise NotImplementedError\n"


def kernel(cells: list[str], ids=("6.1-1",), after: str = "", env: dict | None = None,
           cwd: Path = ROOT) -> tuple[list[dict], str]:
    """監視つきのサブプロセスで cells を実行して採点する。(ホストに届いた行, stderr)。cwd は作業フォルダ。"""
    ch = guard.Channel()
    lines = ["ns = {'__name__': '__main__'}", f"exec({guard.kernel_source(ch.path, str(ROOT))!r}, ns)"]
    lines += [f"exec(compile({src!r}, {CELL.format(k)!r}, 'exec'), ns)" for k, src in enumerate(cells)]
    lines += [f"exec(compile({guard.POKE!r}, {CELL.format('poke')!r}, 'exec'), ns)"] * (1 + len(ids))
    lines.append(after)
    env = {"JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": "2", "PATH": "/usr/bin:/bin", "CH6_GRADING": "1",
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(ROOT), **(env or {})}
    cwd.mkdir(parents=True, exist_ok=True)
    p = subprocess.Popen([sys.executable, "-c", "\n".join(lines)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env, cwd=cwd)
    try:
        ch.accept_blocking(120)
        ch.send(cmd="setup")
        for i in ids:
            ch.send(cmd="check", id=i)
        _, err = p.communicate(timeout=300)
        return ch.drain(), err
    finally:
        p.kill()
        ch.close()


def flags(msgs: list[dict]) -> list[tuple[str, str]]:
    return [(m["code"], m["what"]) for m in msgs if m.get("k") == "flag"]


def results(msgs: list[dict]) -> dict[str, str]:
    return {m["id"]: m["status"] for m in msgs if m.get("k") == "result" and "id" in m}


def test_an_honest_notebook_is_graded_with_no_flag_and_the_backend_is_left_to_the_learner():
    msgs, err = kernel([RIGHT_6_1_1 + "import sys\nfrom jax._src import xla_bridge\n"
                        "LOADED = ('jax.numpy' in sys.modules, bool(xla_bridge._backends))\n"],
                       ids=("6.1-1", "6.1-2", "9.9-1"),
                       after="print(ns['LOADED'])")
    assert msgs[0]["k"] == "ready" and flags(msgs) == [], (msgs, err)
    setup = next(m for m in msgs if m.get("kind") == "setup")
    assert Path(setup["origin"]).resolve() == ROOT / "ch6" / "_core.py"
    assert results(msgs) == {"6.1-1": "pass", "6.1-2": "missing", "9.9-1": "internal"}


def test_a_replaced_ch6_and_display_do_not_change_the_results_and_are_flagged():
    """学習者のセルが sys.modules の ch6 と表示の関数を差し替えても、結果は講座のチェックのもの（ソケットで届く）。"""
    msgs, _ = kernel([TODO_6_1_5, "import sys, IPython.display\nIPython.display.display = print\n"
                      "import ch6\nsys.modules['ch6'] = None\n"], ids=("6.1-5",))
    assert results(msgs) == {"6.1-5": "not_done"}
    assert ("replaced", "ch6（モジュールごと）") in flags(msgs), flags(msgs)


def test_attack_1_grade_of_the_nbgrader_edition_replaced_under_an_alias():
    msgs, _ = kernel([TODO_6_1_5, "import ch6.grading.nbgrader as g\n"
                      "g.grade = lambda *a, **k: print('✅ 正解 [6.1-5] 正解です。')\n"], ids=("6.1-5",))
    assert results(msgs) == {"6.1-5": "not_done"}
    assert ("replaced", "ch6.grading.nbgrader.grade") in flags(msgs), flags(msgs)


@pytest.mark.parametrize("trick, found", [
    ("m = getattr(__import__('sy' + 's'), 'mod' + 'ules')\n__import__('ch6._core')\n"
     "setattr(m['ch6.' + '_core'], 'run_' + 'check', lambda *a, **k: None)\n", "ch6._core.run_check"),
    ("setattr(__import__('built' + 'ins'), 'isin' + 'stance', lambda *a: True)\n", "builtins.isinstance"),
    ("import numpy\nsetattr(getattr(numpy, 'test' + 'ing'), 'assert_all' + 'close', lambda *a, **k: None)\n",
     "numpy.testing.assert_allclose"),
    ("getattr(__import__('sy' + 's'), 'meta_' + 'path').insert(0, type('F', (), {'find_spec': "
     "lambda *a, **k: None})())\n", "sys.meta_path の F"),
])
def test_attack_2_sys_modules_builtins_and_libraries_behind_string_tricks(trick, found):
    msgs, _ = kernel([TODO_6_1_5, trick], ids=("6.1-5",))
    assert any(found in what for _, what in flags(msgs)), flags(msgs)


def test_attack_3_a_thread_still_alive_when_the_checks_run():
    thread = textwrap.dedent("""
        import sys, threading, time
        def swap():
            while True:  # 読み込み直した ch6._core の run_check を「いつも正解」に替え続ける
                core = sys.modules.get('ch6._core')
                if core is not None and getattr(core.run_check, '__name__', '') != 'always':
                    def always(eid, fn, core=core):
                        return core.Result(eid, core.Status.PASS, 'ok')
                    core.run_check = always
                time.sleep(0.001)
        threading.Thread(target=swap, daemon=True).start()
    """)
    msgs, _ = kernel([TODO_6_1_5, thread], ids=("6.1-5",))
    assert any(code == "thread" and "swap" in what for code, what in flags(msgs)), flags(msgs)


@pytest.mark.parametrize("cell, found", [
    ("from ch6.checks.s6_1.ensemble_sgd_step import _sgd_reference\n"
     "def ensemble_sgd_step(loss_fn, stacked, xs, ys, lrs):\n    return _sgd_reference(loss_fn, stacked, xs, ys, lrs)\n",
     "ch6.checks.s6_1.ensemble_sgd_step"),
    ("import importlib\nm = importlib.import_module('ch6.' + 'checks.s6_1.ensemble_sgd_step')\n"
     "def ensemble_sgd_step(loss_fn, stacked, xs, ys, lrs):\n"
     "    return getattr(m, '_sgd_' + 'reference')(loss_fn, stacked, xs, ys, lrs)\n", "ch6.checks.s6_1"),
    ("src = open(__import__('ch6').__file__.replace('__init__.py', 'checks/s6_1/ensemble_sgd_step.py')).read()\n"
     + TODO_6_1_5, "ch6/checks/s6_1/ensemble_sgd_step.py"),
])
def test_attack_4_reading_the_reference_answers(cell, found):
    msgs, _ = kernel([cell], ids=("6.1-5",))
    assert any(code == "reference" and found in what for code, what in flags(msgs)), flags(msgs)


@pytest.mark.parametrize("cell, code", [
    ("import gc\nfound = [o for o in gc.get_objects() if callable(o)][:1]\n" + TODO_6_1_5, "introspect"),
    ("import sys\ndef ensemble_sgd_step(*a, **k):\n    sys._getframe(1)\n    raise NotImplementedError\n", "frames"),
    ("import inspect\ndef ensemble_sgd_step(*a, **k):\n    inspect.stack()\n    raise NotImplementedError\n", "frames"),
    ("import sys\nsys.settrace(lambda *a: None)\n" + TODO_6_1_5, "introspect"),
])
def test_looking_into_the_grader_from_learner_code(cell, code):
    msgs, _ = kernel([cell], ids=("6.1-5",))
    assert code in [c for c, _ in flags(msgs)], flags(msgs)


def test_lines_written_to_the_channel_by_learner_code_are_forged():
    """ファイル番号を当て推量で書き込んでも、nonce のない行は偽造の指摘になる。"""
    msgs, _ = kernel([TODO_6_1_5 + "import os\nfor fd in range(3, 30):\n    try:\n"
                      "        os.write(fd, b\"{'k': 'result', 'id': '6.1-5', 'status': 'pass'}\\n\")\n"
                      "    except OSError:\n        pass\n"], ids=("6.1-5",))
    assert results(msgs) == {"6.1-5": "not_done"} and "forged" in [c for c, _ in flags(msgs)], msgs


def test_the_note_says_what_was_found_in_one_line():
    note = guard.tamper_note([("thread", "swap"), ("replaced", "ch6._core.run_check、builtins.round"),
                              ("thread", "swap"), ("replaced", "builtins.round"), ("reference", "ch6.checks.s6_1")])
    assert "\n" not in note and note.startswith("採点のしくみへの干渉が見つかりました: ")
    assert note.count("swap") == 1 and note.count("builtins.round") == 1 and "ch6._core.run_check" in note
    assert "（ほか 1 件）" in note and "0 点" in note


def test_a_lazily_exported_name_replaced_on_the_package_is_found():
    """ch6.run_check（ch6 の遅延読み込みの名前）を差し替えると、読み込み直した ch6 の同じ名前と比べて見つかる。"""
    msgs, _ = kernel([TODO_6_1_5, "import ch6\nch6.run_check = lambda *a, **k: None\n"], ids=("6.1-5",))
    assert ("replaced", "ch6.run_check") in flags(msgs), flags(msgs)


# ------------------------------------------------------------------ issue 47: 採点が頼るものを替える攻撃

@pytest.mark.parametrize("name", list(FORGERIES))
def test_issue_47_forgeries_are_named(name):
    """読み込みのキャッシュの探し方、比べる関数（np.allclose、ufunc、jnp、既定値）の差し替え: 名指しで見つかり、
    採点はインストールされたチェックのまま（探し方は外して読み込み直す）。"""
    cell, found = FORGERIES[name]
    msgs, err = kernel([TODO_6_1_5, cell], ids=("6.1-5",))
    assert any(found in what for _, what in flags(msgs)), (flags(msgs), err[-2000:])
    assert results(msgs) == {"6.1-5": "not_done"}, (msgs, err[-2000:])


def test_a_file_finder_that_points_elsewhere_is_named_and_not_used(tmp_path):
    """ライブラリの FileFinder でも、ch6/grading のキャッシュが別のフォルダ（偽の inkernel.py）を指せば見つかる。"""
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "inkernel.py").write_text(
        "import sys\ncore = sys.modules['ch6._core']\ndef grader(emit, user_ns):\n"
        "    emit(dict(kind='setup', origin=core.__file__))\n"
        "    return lambda eid: emit(dict(id=eid, title='?', status='pass', message='ok'))\n")
    cell = ("import sys, ch6.grading.model\nfolder = ch6.grading.__path__[0]\nreal = sys.path_importer_cache[folder]\n"
            "loader = type(sys.modules['ch6'].__spec__.loader)\n"
            f"sys.path_importer_cache[folder] = type(real)({str(fake)!r}, (loader, ['.py']))\n")
    msgs, err = kernel([TODO_6_1_5, cell], ids=("6.1-5",))
    assert any(c == "imports" and "ch6/grading →" in w and "fake" in w for c, w in flags(msgs)), (flags(msgs), err)
    assert results(msgs) == {"6.1-5": "not_done"}, msgs


def test_a_library_module_imported_and_changed_by_the_learner_is_named():
    """学習者のセルで初めて読み込んだライブラリ（突き合わせの元がない）に、学習者の関数を入れても見つかる。"""
    msgs, _ = kernel([TODO_6_1_5, "import colorsys\ncolorsys.rgb_to_hsv = lambda *a: (0, 0, 0)\n"], ids=("6.1-5",))
    assert ("replaced", "colorsys.rgb_to_hsv") in flags(msgs), flags(msgs)


def test_a_method_of_jax_arrays_replaced_is_named():
    msgs, _ = kernel([TODO_6_1_5, "import jax.numpy as jnp\nA = type(jnp.zeros(1))\nA.__abs__ = lambda self: self * 0\n"],
                     ids=("6.1-5",))
    assert any(c == "replaced" and what.endswith("ArrayImpl.__abs__") for c, what in flags(msgs)), flags(msgs)


def test_trying_to_write_outside_is_named_even_when_it_fails(tmp_path):
    """採点のしくみ（ch6）・ほかの提出物・成績簿を書き換えようとしたこと（隔離で書けなくても、ここでは開くだけ）。"""
    other = tmp_path / "class"
    (other / "victim").mkdir(parents=True)
    (other / "gradebook.db").write_bytes(b"")
    cell = (f"import os, shutil, ch6\nopen(ch6.__file__.replace('__init__.py', 'grading/inkernel.py'), 'r+').close()\n"
            f"open({str(other / 'gradebook.db')!r}, 'a').close()\n"
            f"try:\n    shutil.rmtree({str(other / 'nobody')!r})\nexcept OSError:\n    pass\n"
            f"os.makedirs('mine', exist_ok=True)\nopen('mine/notes.txt', 'w').close()\n")
    msgs, _ = kernel([TODO_6_1_5, cell], ids=("6.1-5",), env={"CH6_GUARD_PROTECT": str(other)}, cwd=tmp_path / "work")
    writes = sorted(w for c, w in flags(msgs) if c == "write")
    assert writes == ["ch6/grading/inkernel.py", f"{tmp_path.name}/class/gradebook.db", f"{tmp_path.name}/class/nobody"]
    assert results(msgs) == {"6.1-5": "not_done"}


def test_the_grader_reads_ch6_from_its_source_and_checks_every_file():
    """採点の準備の後: ch6 のモジュールはすべてディスクのソースから（.pyc を使わず）、ホストの読んだ中身のまま。"""
    msgs, _ = kernel([RIGHT_6_1_1], after="import sys\nprint(sys.pycache_prefix, sys.dont_write_bytecode)")
    assert flags(msgs) == [] and results(msgs) == {"6.1-1": "pass"}, msgs
    assert guard.file_hashes(ROOT)["grading/inkernel.py"] and "numpy" in guard.grading_imports()
