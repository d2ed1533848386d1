"""チェックの枠組み: 例外を外に出さない、1 行で決定的、未完了と内部エラーの区別。"""
import jax.numpy as jnp
import pytest

import ch6
from ch6 import run_check
from ch6.checking import Fail, exercise


def test_unknown_exercise_is_reported_not_raised(capsys):
    ch6.check("9.9-9", lambda: None)
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "この番号の演習はありません" in out


def test_checker_bug_is_reported_without_traceback():
    @exercise("0.0-bug", "buggy")
    def buggy(fn):
        return {}["missing"]  # チェッカ自身の不具合

    try:
        r = run_check("0.0-bug", lambda: None)
        assert r.status == "internal" and "チェッカ内部の問題" in r.message
        assert "Traceback" not in r.line and "\n" not in r.line
    finally:
        ch6.registry().pop("0.0-bug")


def test_messages_are_deterministic_one_liners():
    wrong = lambda *args: jnp.zeros(3) + 1  # noqa: E731  どの演習にも合わない答え（演習の中身によらない）
    a = run_check("6.1-1", wrong)
    b = run_check("6.1-1", wrong)
    assert a == b and "\n" not in a.line and a.line.startswith("❌ 不正解 [6.1-1]")


def test_learner_error_message_hides_addresses():
    def bad(*args, **kwargs):
        raise ValueError(f"object at {hex(id(args))}\nsecond line")

    r = run_check("6.1-1", bad)
    assert r.status == "error" and "0xADDR" in r.message and "second line" not in r.message


def test_check_records_results(capsys):
    @exercise("0.0-ok", "answer")
    def ok(fn):
        if fn(2) != 4:
            raise Fail("2 倍になっていません。")
        return "2 を渡すと 4 が返りました。"

    try:
        before = len(ch6.RESULTS)
        ch6.check("0.0-ok", lambda x: 2 * x)
        assert len(ch6.RESULTS) == before + 1 and ch6.RESULTS[-1].ok
        assert capsys.readouterr().out.strip() == "✅ 正解 [0.0-ok] answer: 2 を渡すと 4 が返りました。"  # 「正解です。」を重ねない
    finally:
        ch6.registry().pop("0.0-ok")


def test_a_pass_without_detail_is_the_title_alone():
    @exercise("0.0-bare", "answer")
    def bare(fn):
        return None

    try:
        r = run_check("0.0-bare", lambda x: x)
        assert r.status == "pass" and r.message == "answer", r.message
    finally:
        ch6.registry().pop("0.0-bare")


def test_fail_is_an_exception_with_message():
    assert str(Fail("x")) == "x"


def test_every_check_reports_not_done_for_a_stub():
    def stub(*args, **kwargs):
        raise NotImplementedError

    for ex in sorted(ch6.registry()):
        r = run_check(ex, stub)
        assert r.status == "not_done", (ex, r.line)


def test_every_check_module_loads():
    assert ch6.load_errors() == {}
    assert len(ch6.registry()) >= 6


def test_a_library_not_implemented_error_is_not_reported_as_not_done():
    def uses_unsupported(*args):
        raise NotImplementedError("this primitive is not supported on this backend")

    def stub(*args):
        raise NotImplementedError

    assert run_check("6.1-1", stub).status == "not_done"
    r = run_check("6.1-1", uses_unsupported)
    assert r.status == "error" and "not supported" in r.message


def test_call_within_stops_a_loop_in_the_main_thread_and_falls_back_elsewhere():
    """call_within: メインスレッドでは時間切れで Fail(late)、ほかのスレッドでは call と同じ（時間は計らない）。"""
    import threading

    import pytest

    from ch6.checking import call_within

    def spin():
        while True:
            pass
    with pytest.raises(Fail, match="遅すぎ"):
        call_within(0.2, spin, late="遅すぎます")
    assert call_within(0.2, lambda a, b: a + b, 1, b=2, late="x") == 3
    out = []
    t = threading.Thread(target=lambda: out.append(call_within(0.1, lambda: "ok", late="x")))
    t.start()
    t.join()
    assert out == ["ok"]


def test_a_learners_own_system_exit_is_an_error_not_internal(monkeypatch):
    """issue 47: 学習者の関数の sys.exit() は ❌ エラー（internal ではない）。KeyboardInterrupt は採点の中だけエラー、
    ノートブックでは止める操作なのでそのまま送出する。"""
    import sys

    from ch6.checking import LearnerError, call

    with pytest.raises(LearnerError):
        call(lambda: sys.exit(3))
    with pytest.raises(KeyboardInterrupt):
        call(lambda: (_ for _ in ()).throw(KeyboardInterrupt()))
    monkeypatch.setenv("CH6_GRADING", "1")
    with pytest.raises(LearnerError):
        call(lambda: (_ for _ in ()).throw(KeyboardInterrupt()))


def test_time_limits_nest_and_a_check_in_the_notebook_stops_after_its_limit():
    """time_limit は入れ子にでき（内側が先に切れても外側は続く）、ch6.check の時間切れは演習の名前つきの 1 行。"""
    import time

    from ch6 import _core  # the module under test (tests/test_public_api.py allows this one file)
    from ch6.checking import TimeUp, time_limit

    with pytest.raises(TimeUp):
        with time_limit(0.3):
            with pytest.raises(TimeUp):
                with time_limit(0.1):
                    while True:
                        pass
            while True:  # 外側の制限はまだ生きている
                time.sleep(0.01)

    def spin(*a, **k):
        while True:
            pass

    r = _core.run_check_within("6.1-1", spin, 0.5)
    assert r.status is _core.Status.TIMEOUT and "rbf_features" in r.message and "0.5 秒以内" in r.message, r
