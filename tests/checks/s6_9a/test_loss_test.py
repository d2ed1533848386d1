"""6.9a-2 losses_match: 参照と別の正解（損失を全部集めてから比べる）は通り、台本の損失で誤りそれぞれの言葉が出る。最初のステップだけ比べる、等しさで
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
    expect(EX, ref, Status.PASS, "勾配の集め忘れ")
    expect(EX, collect, Status.PASS)


def test_first_step_only_is_named():
    def first(step_ref, step_test, state, batches, tol):
        return abs(float(step_ref(state, batches[0])[1]) - float(step_test(state, batches[0])[1])) < tol
    expect(EX, first, Status.FAIL, "1 ステップしか進めず")


def test_exact_equality_is_named():
    def exact(step_ref, step_test, state, batches, tol):
        a = b = state
        for batch in batches:
            a, la = step_ref(a, batch)
            b, lb = step_test(b, batch)
            if float(la) != float(lb):
                return False
        return True
    expect(EX, exact, Status.FAIL, "等しさではなく")


def test_always_true_and_non_bool():
    expect(EX, lambda *a: True, Status.FAIL, "1 度も呼ばずに True")
    expect(EX, lambda *a: "yes", Status.FAIL, "True か False")
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR)


def test_padding_only_missed_is_named():
    def loose(step_ref, step_test, state, batches, tol):      # 許容を 1e4 倍にしてしまう
        return ref(step_ref, step_test, state, batches, tol * 1e5)
    expect(EX, loose, Status.FAIL, "7.75", "どのステップでも差が tol 未満")


def _losses(step, state, batches):
    out = []
    for batch in batches:
        state, loss = step(state, batch)
        out.append(float(loss))
    return out


def _both(step_ref, step_test, state, batches):
    return _losses(step_ref, state, batches), _losses(step_test, state, batches)


def test_final_loss_only_is_named():
    def final(step_ref, step_test, state, batches, tol):
        a, b = _both(step_ref, step_test, state, batches)
        return abs(a[-1] - b[-1]) < tol
    expect(EX, final, Status.FAIL, "2 番目のステップだけ", "最後のステップだけでなく")


def test_mean_loss_is_named():
    def mean(step_ref, step_test, state, batches, tol):
        a, b = _both(step_ref, step_test, state, batches)
        return abs(sum(a) / len(a) - sum(b) / len(b)) < tol
    expect(EX, mean, Status.FAIL, "平均や合計ではなく")


def test_skipping_the_last_batch_is_named():
    expect(EX, lambda r, t, s, b, tol: ref(r, t, s, b[:-1], tol), Status.FAIL, "最後のバッチのステップを比べていません")


def test_less_or_equal_is_named():
    def le(step_ref, step_test, state, batches, tol):
        a, b = _both(step_ref, step_test, state, batches)
        return all(abs(x - y) <= tol for x, y in zip(a, b))
    expect(EX, le, Status.FAIL, "ちょうど tol", "<=")


def test_relative_error_is_named():
    def rel(step_ref, step_test, state, batches, tol):
        a, b = _both(step_ref, step_test, state, batches)
        return all(abs(x - y) / abs(x) < tol for x, y in zip(a, b))
    expect(EX, rel, Status.FAIL, "相対誤差ではなく")


def test_missing_abs_is_named_for_either_sign():
    def no_abs(step_ref, step_test, state, batches, tol):
        a, b = _both(step_ref, step_test, state, batches)
        return all(x - y < tol for x, y in zip(a, b))
    def no_abs_other(step_ref, step_test, state, batches, tol):
        a, b = _both(step_ref, step_test, state, batches)
        return all(y - x < tol for x, y in zip(a, b))
    expect(EX, no_abs, Status.FAIL, "0.25 大きい", "abs(...)")
    expect(EX, no_abs_other, Status.FAIL, "0.25 小さい", "abs(...)")


def test_state_slips_are_named():
    def shared(step_ref, step_test, state, batches, tol):
        for batch in batches:
            new, la = step_ref(state, batch)
            _, lb = step_test(state, batch)
            if not abs(float(la) - float(lb)) < tol:
                return False
            state = new
        return True
    def not_carried(step_ref, step_test, state, batches, tol):
        return all(abs(float(step_ref(state, b)[1]) - float(step_test(state, b)[1])) < tol for b in batches)
    expect(EX, shared, Status.FAIL, "もう一方のステップに渡しています")
    expect(EX, not_carried, Status.FAIL, "同じ状態で何度も")


def test_zero_dim_jax_bool_is_accepted_and_lists_are_not():
    import jax.numpy as jnp

    def jax_bool(step_ref, step_test, state, batches, tol):
        a, b = _both(step_ref, step_test, state, batches)
        return jnp.all(jnp.abs(jnp.array(a) - jnp.array(b)) < tol)
    def as_list(step_ref, step_test, state, batches, tol):
        a, b = _both(step_ref, step_test, state, batches)
        return [abs(x - y) < tol for x, y in zip(a, b)]
    expect(EX, jax_bool, Status.PASS)
    expect(EX, as_list, Status.FAIL, "list", "bool(...)")


def test_fresh_mistakes_from_the_statement():
    def skip_first(step_ref, step_test, state, batches, tol):   # 最初の損失は更新の前なので比べない
        a, b = _both(step_ref, step_test, state, batches)
        return all(abs(x - y) < tol for x, y in zip(a[1:], b[1:]))
    expect(EX, skip_first, Status.FAIL, "最初のステップだけで差が tol 以上", "最初のステップ（更新の前）")

    def with_isclose(step_ref, step_test, state, batches, tol):  # np.isclose は <= で、rtol も足す
        a, b = _both(step_ref, step_test, state, batches)
        return bool(np.all(np.isclose(a, b, atol=tol)))
    expect(EX, with_isclose, Status.FAIL, "ちょうど tol", "<=")

    def with_math_isclose(step_ref, step_test, state, batches, tol):
        import math
        a, b = _both(step_ref, step_test, state, batches)
        return all(math.isclose(x, y, abs_tol=tol) for x, y in zip(a, b))
    expect(EX, with_math_isclose, Status.FAIL, "ちょうど tol", "<=")
