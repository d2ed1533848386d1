"""チェックの単体テストが共有する部品: 未解答の関数、例外を出す関数、状態と言葉の確認。"""
from ch6 import run_check


def not_done(*args, **kwargs):
    raise NotImplementedError


def boom(*args, **kwargs):
    raise ZeroDivisionError("division by zero")


def expect(ex, fn, want_status, *words):
    """run_check の状態が want_status で、メッセージが 1 行で words をすべて含むこと。メッセージを返す。"""
    r = run_check(ex, fn)
    assert r.status == want_status, r.message
    assert "\n" not in r.message, r.message
    for w in words:
        assert w in r.message, f"{w!r} not in {r.message!r}"
    return r.message
