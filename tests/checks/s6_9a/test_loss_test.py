"""6.9a-2 losses_match: 参照と別の正解（損失を全部集めてから比べる）は通り、最初のステップだけ比べる、等しさで
比べる、パディングも通す（差を見ない）答え、bool でない答えはそれぞれの言葉で落ちる。"""
import numpy as np

from ch6 import Status
from tests.checkhelp import boom, expect, not_done

EX = "6.9a-2"


def ref(step_ref, step_test, state, batches, tol):
    a = b = state
    for batch in batches:
        a, la = step_ref(a, batch)
        b, lb = step_test(b, batch)
        if not abs(float(la) - float(lb)) < tol:
            return False
    return True


def collect(step_ref, step_test, state, batches, tol):
    out = []
    for step in (step_ref, step_test):
        s, losses = state, []
        for batch in batches:
            s, loss = step(s, batch)
            losses.append(float(loss))
        out.append(np.array(losses))
    return bool(np.all(np.abs(out[0] - out[1]) < tol))


def test_reference_and_collecting_answer_pass():
    expect(EX, ref, Status.PASS, "勾配の平均の忘れ")
    expect(EX, collect, Status.PASS)


def test_first_step_only_is_named():
    def first(step_ref, step_test, state, batches, tol):
        return abs(float(step_ref(state, batches[0])[1]) - float(step_test(state, batches[0])[1])) < tol
    expect(EX, first, Status.FAIL, "最初の損失は更新の前")


def test_exact_equality_is_named():
    def exact(step_ref, step_test, state, batches, tol):
        a = b = state
        for batch in batches:
            a, la = step_ref(a, batch)
            b, lb = step_test(b, batch)
            if float(la) != float(lb):
                return False
        return True
    expect(EX, exact, Status.FAIL, "丸めだけ")


def test_always_true_and_non_bool():
    expect(EX, lambda *a: True, Status.FAIL, "一致と判定しました")
    expect(EX, lambda *a: "yes", Status.FAIL, "True か False")
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR)


def test_padding_only_missed_is_named():
    def loose(step_ref, step_test, state, batches, tol):      # 許容を 1e4 倍にしてしまう
        return ref(step_ref, step_test, state, batches, tol * 1e5)
    msg = expect(EX, loose, Status.FAIL)
    assert "パディング" in msg or "勾配の平均" in msg
