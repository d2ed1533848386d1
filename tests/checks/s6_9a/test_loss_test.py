"""6.9a-2 losses_match: 参照と別の正解（損失を全部集めてから比べる）は通り、台本の損失で誤りそれぞれの言葉が出る。最初のステップだけ比べる、等しさで
比べる、パディングも通す（差を見ない）答え、bool でない答えはそれぞれの言葉で落ちる。隠しのステップは状態を譲渡するので、
2 つのステップに同じ状態を渡す答えは譲渡の言葉で落ち、バッチの渡し方の誤り（batches[0] だけ、逆順、添字のずれ、
2 つのステップに違うバッチ）はそれぞれの言葉で落ちる。"""
import copy

import jax
import jax.numpy as jnp
import numpy as np

from ch6 import Status
from tests.checkhelp import boom, expect, not_done

EX = "6.9a-2"


def own(state):
    """もう一方のステップに渡す、状態のコピー（ステップは状態を譲渡する）。"""
    return jax.tree.map(jnp.copy, state)


def ref(step_ref, step_test, state, batches, tol, first=lambda s: s, second=own):
    """参照の答え。first と second は、2 つのステップに渡す状態の作り方（既定: そのままと、そのコピー）。"""
    a, b = first(state), second(state)
    for batch in batches:
        a, la = step_ref(a, batch)
        b, lb = step_test(b, batch)
        if not abs(float(la) - float(lb)) < tol:
            return False
    return True


def collect(step_ref, step_test, state, batches, tol):
    out = []
    for step, s in ((step_ref, state), (step_test, own(state))):
        losses = []
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
        mine = own(state)
        return abs(float(step_ref(state, batches[0])[1]) - float(step_test(mine, batches[0])[1])) < tol
    expect(EX, first, Status.FAIL, "1 ステップしか進めず")


def test_exact_equality_is_named():
    def exact(step_ref, step_test, state, batches, tol):
        a, b = state, own(state)
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
    mine = own(state)                                     # 基準のステップが state を譲渡する前にコピーする
    return _losses(step_ref, state, batches), _losses(step_test, mine, batches)


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
    def shared(step_ref, step_test, state, batches, tol):     # 基準の状態をテストにも渡す（コピーはする）
        for batch in batches:
            mine = own(state)
            new, la = step_ref(state, batch)
            _, lb = step_test(mine, batch)
            if not abs(float(la) - float(lb)) < tol:
                return False
            state = new
        return True
    def not_carried(step_ref, step_test, state, batches, tol):   # 毎回、初めの状態のコピーから
        return all(abs(float(step_ref(own(state), b)[1]) - float(step_test(own(state), b)[1])) < tol for b in batches)
    expect(EX, shared, Status.FAIL, "もう一方のステップに渡しています")
    expect(EX, not_carried, Status.FAIL, "同じ状態で何度も")


def _same_state(step_ref, step_test, state, batches, tol):
    """いちばん自然な誤り: s1 = s2 = state（譲渡するステップでは、2 つ目のステップで状態が消えている）。"""
    s1 = s2 = state
    for b in batches:
        s1, l1 = step_ref(s1, b)
        s2, l2 = step_test(s2, b)
        if abs(l1 - l2) >= tol:
            return False
    return True


def test_one_state_for_both_steps_is_named_as_donation():
    expect(EX, _same_state, Status.FAIL, "step_ref に渡した状態を step_test にも渡しました", "譲渡", "jnp.copy")

    def two_loops(step_ref, step_test, state, batches, tol):     # 損失を集める書き方でも、同じ state から 2 度
        a, b = _losses(step_ref, state, batches), _losses(step_test, state, batches)
        return all(abs(x - y) < tol for x, y in zip(a, b))
    expect(EX, two_loops, Status.FAIL, "step_ref に渡した状態を step_test にも渡しました", "譲渡")

    def never_carried(step_ref, step_test, state, batches, tol):  # 状態を進めず、コピーもしない
        return all(abs(float(step_ref(state, b)[1]) - float(step_test(state, b)[1])) < tol for b in batches)
    expect(EX, never_carried, Status.FAIL, "譲渡")

    def late_copy(step_ref, step_test, state, batches, tol):     # 基準のステップを回した後でコピーする
        a = _losses(step_ref, state, batches)
        b = _losses(step_test, own(state), batches)
        return all(abs(x - y) < tol for x, y in zip(a, b))
    expect(EX, late_copy, Status.FAIL, "消えた state", "最初のステップに渡す前")


def test_other_ways_to_copy_the_state_pass():
    def deep(step_ref, step_test, state, batches, tol):
        return ref(step_ref, step_test, copy.deepcopy(state), batches, tol)
    def method(step_ref, step_test, state, batches, tol):       # x.copy() で両方ともコピー
        both = lambda s: jax.tree.map(lambda x: x.copy(), s)  # noqa: E731
        return ref(step_ref, step_test, state, batches, tol, first=both, second=both)
    expect(EX, deep, Status.PASS)
    expect(EX, method, Status.PASS)


def test_step_test_never_called_is_named():
    def copy_paste(step_ref, step_test, state, batches, tol):   # 2 つ目も step_ref（状態はコピーして進める）
        a, b = state, own(state)
        for batch in batches:
            a, la = step_ref(a, batch)
            b, lb = step_ref(b, batch)
            if abs(float(la) - float(lb)) >= tol:
                return False
        return True
    def copy_paste_shared(step_ref, step_test, state, batches, tol):   # 状態も 1 つ
        a = b = state
        for batch in batches:
            a, la = step_ref(a, batch)
            b, lb = step_ref(b, batch)
            if abs(float(la) - float(lb)) >= tol:
                return False
        return True
    for answer in (copy_paste, copy_paste_shared):
        expect(EX, answer, Status.FAIL, "step_test を 1 度も呼ばず", "step_ref だけを 2 度ずつ")
    swapped = lambda r, t, s, b, tol: copy_paste(t, r, s, b, tol)   # noqa: E731
    expect(EX, swapped, Status.FAIL, "step_ref を 1 度も呼ばず", "step_test だけを 2 度ずつ")


def _feeding(pick_ref, pick_test=None):
    """ステップ i に、基準は pick_ref(batches, i)、テストは pick_test(batches, i) を渡す答え（状態は正しく扱う）。"""
    pick_test = pick_test or pick_ref
    def answer(step_ref, step_test, state, batches, tol):
        a, b = state, own(state)
        for i in range(len(batches)):
            a, la = step_ref(a, pick_ref(batches, i))
            b, lb = step_test(b, pick_test(batches, i))
            if abs(float(la) - float(lb)) >= tol:
                return False
        return True
    return answer


def test_batch_slips_are_named():
    expect(EX, _feeding(lambda bs, i: bs[0]), Status.FAIL, "すべてのステップに最初のバッチ batches[0]")
    expect(EX, _feeding(lambda bs, i: bs[-1 - i]), Status.FAIL, "逆の順", "batches[3]")
    expect(EX, _feeding(lambda bs, i: bs[i - 1]), Status.FAIL, "batches[0] ではなく batches[3]", "1 つ前にずれて")
    expect(EX, _feeding(lambda bs, i: bs[i], lambda bs, i: bs[-1 - i]), Status.FAIL,
           "step_ref には batches[0]、step_test には batches[3]", "同じバッチを同じ順に")
    expect(EX, _feeding(lambda bs, i: bs[i], lambda bs, i: bs[i - 1]), Status.FAIL,
           "step_ref には batches[0]、step_test には batches[3]")
    expect(EX, _feeding(lambda bs, i: bs[min(i + 1, len(bs) - 1)]), Status.FAIL, "1 番目のステップに batches[0] ではなく batches[1]")

    def skip_first(step_ref, step_test, state, batches, tol):
        return ref(step_ref, step_test, state, batches[1:], tol)
    expect(EX, skip_first, Status.FAIL, "最初のバッチ batches[0] のステップを飛ばして")


def test_zero_dim_jax_bool_is_accepted_and_lists_are_not():
    import jax.numpy as jnp

    def jax_bool(step_ref, step_test, state, batches, tol):
        a, b = _both(step_ref, step_test, state, batches)
        return jnp.all(jnp.abs(jnp.array(a) - jnp.array(b)) < tol)
    def as_list(step_ref, step_test, state, batches, tol):
        a, b = _both(step_ref, step_test, state, batches)
        return [abs(x - y) < tol for x, y in zip(a, b)]
    def numpy_bool(step_ref, step_test, state, batches, tol):
        a, b = _both(step_ref, step_test, state, batches)
        return np.max(np.abs(np.array(a) - np.array(b))) < tol
    def as_int(step_ref, step_test, state, batches, tol):
        return int(ref(step_ref, step_test, state, batches, tol))
    expect(EX, jax_bool, Status.PASS)
    expect(EX, numpy_bool, Status.PASS)
    expect(EX, as_list, Status.FAIL, "list", "bool(...)")
    expect(EX, as_int, Status.FAIL, "int の 1", "np.bool_")


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


def test_hidden_steps_donate_like_the_lessons_step():
    """問題文の「ステップは状態を譲渡することがある」は本編の train.make_step に当てはまり、隠しの回帰のステップも譲渡する。"""
    from ch6 import lm
    from ch6.capstone import train
    from ch6.checks.s6_9a.loss_test import cases, make_steps

    config, rules = lm.Config(), lm.RULES["dp"]
    mesh = lm.make_mesh(jax.devices()[:1])
    shardings, batch_sh = train.state_shardings(config, rules, mesh), lm.batch_sharding(rules, mesh)
    tokens = jax.ShapeDtypeStruct((train.BATCH, train.SEQ + 1), jnp.int32, sharding=batch_sh)
    lowered = train.make_step(config, rules, shardings, batch_sh).lower(train.abstract_state(config, shardings), tokens)
    assert all(a.donated for a in jax.tree.leaves(lowered.args_info[0][0]))

    ref_step, steps = make_steps()
    _, w0, batches, _ = cases(np.random.default_rng(0))[0]
    for step in (ref_step, *steps.values()):
        w = jnp.array(w0)
        step(w, batches[0])
        assert w.is_deleted()
