"""6.6-1 local_rows: 参照と別の書き方（slice、リスト、デバイス単位から数える）は通り、割り切れるかの調べ方の誤り
（調べない、プロセス数だけ、ローカルデバイス数だけ、P と L を別々に）、別の例外、割り切れるのに送出する、
1 デバイス分の行、stop を含める、1 から数える、浮動小数、形の誤りは、それぞれの言葉で落ちる。
どれもデバイスを使わないので、デバイスの数によらず同じ結果になる。"""
from ch6 import Status
from ch6.checks.s6_6.local_rows import BAD, reference
from tests.checkhelp import boom, not_done

from .common import say

EX = "6.6-1"


def rows_with(divides):
    """divides(B, P, L) が偽なら ValueError、真なら正しい範囲を返す答え。"""
    def local_rows(b, p, n_proc, n_local):
        if not divides(b, n_proc, n_local):
            raise ValueError("割り切れません")
        per = b // n_proc
        return p * per, (p + 1) * per
    return local_rows


def test_hidden_bad_cases_separate_the_divisibility_slips():
    # P では割り切れる、L では割り切れる、P でも L でも割り切れる、どれでも割り切れない
    assert [b % p == 0 for b, p, _ in BAD] == [True, False, True, False]
    assert [b % ell == 0 for b, _, ell in BAD] == [False, True, True, False]
    assert all(b % (p * ell) for b, p, ell in BAD)


def test_reference_and_other_forms_pass():
    say(EX, reference, Status.PASS, "ValueError")
    say(EX, lambda b, p, n, ell: slice(*reference(b, p, n, ell)), Status.PASS)
    say(EX, lambda b, p, n, ell: list(reference(b, p, n, ell)), Status.PASS)

    def per_device(b, p, n_proc, n_local):   # 1 デバイスの行数から数える
        if b % (n_proc * n_local):
            raise ValueError(f"{b} % {n_proc * n_local}")
        rows = b // (n_proc * n_local)
        return slice(p * n_local * rows, (p + 1) * n_local * rows, 1)
    say(EX, per_device, Status.PASS)


def test_no_check_at_all():
    msg = say(EX, rows_with(lambda b, p, ell: True), Status.FAIL, "送出されませんでした", "raise ValueError")
    assert "プロセス数で" not in msg


def test_divisibility_by_process_count_only_is_named():
    say(EX, rows_with(lambda b, p, ell: b % p == 0), Status.FAIL, "プロセス数で割り切れるか", "P·L")


def test_divisibility_by_local_device_count_only_is_named():
    say(EX, rows_with(lambda b, p, ell: b % ell == 0), Status.FAIL, "ローカルデバイス数で割り切れるか", "P·L")


def test_p_and_l_separately_is_named():
    say(EX, rows_with(lambda b, p, ell: b % p == 0 and b % ell == 0), Status.FAIL, "それぞれで割り切れても", "P·L = 8")


def test_other_exception_type_is_named():
    def with_assert(b, p, n_proc, n_local):
        assert b % (n_proc * n_local) == 0
        return reference(b, p, n_proc, n_local)
    say(EX, with_assert, Status.FAIL, "AssertionError", "ValueError")


def test_raising_for_a_batch_that_divides_is_named():
    say(EX, rows_with(lambda b, p, ell: b % (p * ell) != 0), Status.FAIL, "割り切れるのに", "ValueError")


def test_one_device_of_rows_is_named():
    def one_device(b, p, n_proc, n_local):
        reference(b, p, n_proc, n_local)
        per = b // (n_proc * n_local)
        return p * per, (p + 1) * per
    say(EX, one_device, Status.FAIL, "1 デバイス分", "B / P")


def test_inclusive_stop_is_named():
    say(EX, lambda *a: (reference(*a)[0], reference(*a)[1] - 1), Status.FAIL, "半開区間")


def test_counting_processes_from_one_is_named():
    def from_one(b, p, n_proc, n_local):
        return reference(b, p + 1, n_proc, n_local)
    say(EX, from_one, Status.FAIL, "0 から数える")


def test_true_division_is_named():
    def divided(b, p, n_proc, n_local):
        reference(b, p, n_proc, n_local)
        per = b / n_proc
        return p * per, (p + 1) * per
    say(EX, divided, Status.FAIL, "浮動小数", "//")


def test_other_wrong_ranges_and_forms():
    def strided(b, p, n_proc, n_local):
        reference(b, p, n_proc, n_local)
        return slice(p, b, n_proc)
    say(EX, strided, Status.FAIL, "step")
    say(EX, lambda *a: (*reference(*a), 1), Status.FAIL, "2 つ組", "長さ 3")
    say(EX, lambda *a: "0:8", Status.FAIL, "2 つ組", "str")
    say(EX, lambda b, p, n, ell: reference(b, p, n, ell) if p == 0 else (0, b // n), Status.FAIL, "連続")


def test_not_done_and_learner_error():
    say(EX, not_done, Status.NOT_DONE)
    say(EX, boom, Status.ERROR, "ZeroDivisionError")
