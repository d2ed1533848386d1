"""6.8a-3 microbatches_for_bubble: 正しい答え（数えても式でも）は通り、自然な誤りはそれぞれの言葉で落ちる。
隠しの場合には、バブルが目標とちょうど等しくなる境目（問題文の「以下」と「差が 1e-9 以内なら等しい」）が入る。"""
import math

from ch6 import Status
from ch6.checks.s6_8a.bubble_microbatches import cases_for, smallest_m
from tests.checkhelp import boom, expect, not_done

TOL = 1e-9


def by_counting(n_stages, target, n_virtual=1):
    m = 1
    while (n_stages - 1) / (n_virtual * m + n_stages - 1) > target + TOL:
        m += 1
    return m


def by_formula(n_stages, target, n_virtual=1):
    # M >= (S − 1)(1 − f)/(f V) を、丸めの余裕を引いてから切り上げる
    return max(1, math.ceil((n_stages - 1) * (1 - target) / (target * n_virtual) - TOL))


def denominator_plus_s(n_stages, target, n_virtual=1):
    m = 1
    while (n_stages - 1) / (n_virtual * m + n_stages) > target + TOL:
        m += 1
    return m


def ignores_virtual(n_stages, target, n_virtual=1):
    return by_counting(n_stages, target)


def virtual_everywhere(n_stages, target, n_virtual=1):
    m = 1
    while (n_stages - 1) / (n_virtual * (m + n_stages - 1)) > target + TOL:
        m += 1
    return m


def floor_instead_of_ceil(n_stages, target, n_virtual=1):
    return max(1, math.floor((n_stages - 1) * (1 - target) / (target * n_virtual) + TOL))


def nearest_instead_of_ceil(n_stages, target, n_virtual=1):
    return max(1, round((n_stages - 1) * (1 - target) / (target * n_virtual)))


def ceil_without_tolerance(n_stages, target, n_virtual=1):
    return max(1, math.ceil((n_stages - 1) * (1 - target) / (target * n_virtual)))


def strict_less(n_stages, target, n_virtual=1):  # 「以下」でなく「未満」
    m = 1
    while (n_stages - 1) / (n_virtual * m + n_stages - 1) >= target:
        m += 1
    return m


def one_too_many(n_stages, target, n_virtual=1):
    return by_counting(n_stages, target, n_virtual) + (n_stages > 3)


def as_float(n_stages, target, n_virtual=1):
    return float(by_counting(n_stages, target, n_virtual))


def zero_for_one_stage(n_stages, target, n_virtual=1):
    return 0 if n_stages == 1 else by_counting(n_stages, target, n_virtual)


def test_hidden_cases_sit_on_the_boundaries_the_statement_names():
    cases = cases_for(8)
    ties = [(s, t, v) for s, t, v in cases if s > 1 and t < 1 and (s - 1) / (v * smallest_m(s, t, v) + s - 1) == t]
    assert len(ties) >= 3                                     # ちょうど等しい境目
    assert any(s == 1 for s, _, _ in cases) and any(t >= 1 for _, t, _ in cases)
    assert any(ceil_without_tolerance(*c) != smallest_m(*c) for c in cases)   # 丸めで 1 ずれる境目
    assert any(nearest_instead_of_ceil(*c) != smallest_m(*c) for c in cases)  # 四捨五入と切り上げが違う


def test_reference_and_the_closed_form_pass():
    expect("6.8a-3", by_counting, Status.PASS, "10 通り", "境目")
    expect("6.8a-3", by_formula, Status.PASS)


def test_strict_inequality_at_a_tie_is_named():
    expect("6.8a-3", strict_less, Status.FAIL, "ちょうど等しく", "<=")


def test_ceil_without_the_tolerance_is_named():
    expect("6.8a-3", ceil_without_tolerance, Status.FAIL, "丸め", "1e-9")


def test_m_plus_s_is_named():
    expect("6.8a-3", denominator_plus_s, Status.FAIL, "V·M + S", "V·M + S − 1")


def test_ignoring_v_is_named():
    expect("6.8a-3", ignores_virtual, Status.FAIL, "V = 1 のときと同じ", "V が掛かるのは M だけ")


def test_fresh_slips_from_the_statement():
    # 埋まるまでのティックにも V を掛ける（分母と分子に同じ V）: V を使わないのと同じ値になり、そう言う
    def virtual_fill_too(n_stages, target, n_virtual=1):
        m = 1
        while (n_stages - 1) * n_virtual / (n_virtual * m + (n_stages - 1) * n_virtual) > target + 1e-9:
            m += 1
        return m
    expect("6.8a-3", virtual_fill_too, Status.FAIL, "V = 1 のときと同じ")

    # 分子を S にする（埋まるまでのティックを S と数える）
    def numerator_s(n_stages, target, n_virtual=1):
        m = 1
        while n_stages / (n_virtual * m + n_stages - 1) > target + 1e-9:
            m += 1
        return m
    expect("6.8a-3", numerator_s, Status.FAIL, "分子を S に", "S − 1")

    # 式を解いて切り上げるが、1 より小さい答えを 1 にしない（目標 1 で 0）
    def no_lower_bound(n_stages, target, n_virtual=1):
        if n_stages == 1:
            return 1
        return math.ceil((n_stages - 1) * (1 - target) / (target * n_virtual) - 1e-9)
    expect("6.8a-3", no_lower_bound, Status.FAIL, "1 以上", "目標が 1 以上")


def test_v_on_the_whole_denominator_is_named():
    expect("6.8a-3", virtual_everywhere, Status.FAIL, "分母全体に V")


def test_floor_and_nearest_are_named():
    expect("6.8a-3", floor_instead_of_ceil, Status.FAIL, "切り捨て", "切り上げ")
    expect("6.8a-3", nearest_instead_of_ceil, Status.FAIL, "四捨五入")


def test_not_the_smallest_is_said_without_naming_a_cause():
    expect("6.8a-3", one_too_many, Status.FAIL, "いちばん小さい数ではありません")


def test_float_and_zero_are_rejected():
    expect("6.8a-3", as_float, Status.FAIL, "浮動小数", "int")
    expect("6.8a-3", zero_for_one_stage, Status.FAIL, "1 以上")
    expect("6.8a-3", lambda *a: True, Status.FAIL, "真偽値")
    expect("6.8a-3", lambda *a: "8", Status.FAIL, "str")


def zero_only_for_one_stage(n_stages, target, n_virtual=1):  # S = 1 は特別扱い、目標 1 以上を忘れた閉じた式
    if n_stages == 1:
        return 1
    return math.ceil((n_stages - 1) * (1 - target) / (target * n_virtual) - 1e-9)


def from_zero(n_stages, target, n_virtual=1):  # M を 0 から調べる（S = 1 で 0 / 0）
    m = 0
    while (n_stages - 1) / (n_virtual * m + n_stages - 1) > target + 1e-9:
        m += 1
    return m


def ideal_ratio(n_stages, target, n_virtual=1):  # バブルを理想の時間との比 (S − 1)/(V·M) で計算した
    m = 1
    while n_stages > 1 and (n_stages - 1) / (n_virtual * m) > target + 1e-9:
        m += 1
    return m


def test_zero_at_a_target_of_one_names_the_target_not_the_stages():
    msg = expect("6.8a-3", zero_only_for_one_stage, Status.FAIL, "1 以上", "目標が 1 以上")
    assert "ステージが 1 つ" not in msg
    msg = expect("6.8a-3", zero_for_one_stage, Status.FAIL, "ステージが 1 つ")
    assert "目標が 1 以上" not in msg


def test_division_by_zero_from_m_zero_is_explained():
    msg = expect("6.8a-3", from_zero, Status.FAIL, "0 による割り算", "S = 1", "M は 1 から")
    assert "ZeroDivisionError" not in msg and "division" not in msg


def test_ratio_to_the_ideal_time_is_named():
    expect("6.8a-3", ideal_ratio, Status.FAIL, "理想の時間", "V·M + S − 1")


def test_not_done_and_learner_error():
    expect("6.8a-3", not_done, Status.NOT_DONE)
    expect("6.8a-3", boom, Status.FAIL, "0 による割り算", "分母が 0")
    expect("6.8a-3", lambda *a: [][1], Status.ERROR, "IndexError")


def test_a_changed_default_is_caught():
    """回帰（ミューテーションの生き残り）: チェックはいつも n_virtual を渡していたので、定義の既定値を
    n_virtual=2 に変えても通っていた。"""
    def virtual_two(n_stages, target, n_virtual=2):
        return by_counting(n_stages, target, n_virtual)

    expect("6.8a-3", virtual_two, "fail", "n_virtual を省いて呼ぶ", "既定値は n_virtual=1")
