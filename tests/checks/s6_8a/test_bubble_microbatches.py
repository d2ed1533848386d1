"""6.8a-3 microbatches_for_bubble: 正しい答え（数えても式でも）は通り、自然な誤りはそれぞれの言葉で落ちる。"""
import math

from ch6 import Status
from tests.checkhelp import boom, expect, not_done


def by_counting(n_stages, target, n_virtual=1):
    m = 1
    while (n_stages - 1) / (n_virtual * m + n_stages - 1) > target:
        m += 1
    return m


def by_formula(n_stages, target, n_virtual=1):
    # M >= (S − 1)(1 − f)/(f V) を切り上げる（丸めの誤差を小さく引いてから）
    return max(1, math.ceil((n_stages - 1) * (1 - target) / (target * n_virtual) - 1e-9))


def denominator_plus_s(n_stages, target, n_virtual=1):
    m = 1
    while (n_stages - 1) / (n_virtual * m + n_stages) > target:
        m += 1
    return m


def ignores_virtual(n_stages, target, n_virtual=1):
    return by_counting(n_stages, target)


def virtual_everywhere(n_stages, target, n_virtual=1):
    m = 1
    while (n_stages - 1) / (n_virtual * (m + n_stages - 1)) > target:
        m += 1
    return m


def floor_instead_of_ceil(n_stages, target, n_virtual=1):
    return max(1, math.floor((n_stages - 1) * (1 - target) / (target * n_virtual)))


def strict_less(n_stages, target, n_virtual=1):  # 「以下」でなく「未満」
    m = 1
    while (n_stages - 1) / (n_virtual * m + n_stages - 1) >= target:
        m += 1
    return m


def as_float(n_stages, target, n_virtual=1):
    return float(by_counting(n_stages, target, n_virtual))


def zero_for_one_stage(n_stages, target, n_virtual=1):
    return 0 if n_stages == 1 else by_counting(n_stages, target, n_virtual)


def test_reference_and_the_closed_form_pass():
    expect("6.8a-3", by_counting, Status.PASS, "8 通り")
    expect("6.8a-3", by_formula, Status.PASS)


def test_m_plus_s_is_named():
    expect("6.8a-3", denominator_plus_s, Status.FAIL, "V·M + S", "M + S − 1")


def test_ignoring_v_is_named():
    expect("6.8a-3", ignores_virtual, Status.FAIL, "V を使っていない")


def test_v_on_the_whole_denominator_is_named():
    expect("6.8a-3", virtual_everywhere, Status.FAIL, "分母全体に V")


def test_floor_is_too_small():
    expect("6.8a-3", floor_instead_of_ceil, Status.FAIL, "目標", "超えます", "切り上げ")


def test_strict_inequality_is_not_the_smallest():
    expect("6.8a-3", strict_less, Status.FAIL, "いちばん小さい数ではありません")


def test_float_and_zero_are_rejected():
    expect("6.8a-3", as_float, Status.FAIL, "浮動小数", "int")
    expect("6.8a-3", zero_for_one_stage, Status.FAIL, "1 個以上")
    expect("6.8a-3", lambda *a: True, Status.FAIL, "真偽値")
    expect("6.8a-3", lambda *a: "8", Status.FAIL, "str")


def test_not_done_and_learner_error():
    expect("6.8a-3", not_done, Status.NOT_DONE)
    expect("6.8a-3", boom, Status.ERROR, "ZeroDivisionError")
