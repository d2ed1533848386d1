"""6.11b-2 max_hidden_ways: 正しい答え（数えても式でも、cost.hiding_width でも）は通り、自然な誤りはそれぞれの言葉で落ちる。"""
import math

from ch6 import Status, cost
from ch6.checks.s6_11b.common import exercise_rng
from ch6.checks.s6_11b.hidden_ways import MISTAKES, cases, reference
from ch6.recorded import input_devices
from tests.checkhelp import boom, expect, not_done


def by_counting(hw, n_out, n_max, bytes_per_value=2, direction="one"):
    bw = hw.axis_bw if direction == "two" else hw.link_oneway
    threshold = bytes_per_value * hw.flops / (2 * bw)
    best = 1
    for ways in range(1, n_max + 1):
        if n_out / ways >= threshold * (1 - 1e-9):
            best = ways
    return best


def by_formula(hw, n_out, n_max, bytes_per_value=2, direction="one"):
    h = cost.hiding_width(hw, bytes_per_value, direction)
    return max(1, min(n_max, math.floor(n_out / h * (1 + 1e-9))))


def by_times(hw, n_out, n_max, bytes_per_value=2, direction="one"):  # T_comm ≤ T_math をそのまま比べる
    best = 1
    for ways in range(2, n_max + 1):
        t = cost.collective_matmul_times(hw, 4096 * ways, 1024, n_out, ways, bytes_per_value, direction)
        if t.comm <= t.math * (1 + 1e-9):
            best = ways
    return best


def variant(kind):
    return lambda hw, n_out, n_max, b=2, direction="one": reference(hw, n_out, n_max, b, direction, kind=kind)


def test_every_named_mistake_changes_some_hidden_answer():
    todo = cases(exercise_rng(2), input_devices())  # チェックと同じ数（9 個以上では 8）
    want = [reference(*c[1:]) for c in todo]
    seen = {}
    for kind, _ in MISTAKES:
        answers = [reference(*c[1:], kind=kind) for c in todo]
        assert answers != want, kind
        assert tuple(answers) not in seen, (kind, seen.get(tuple(answers)))  # 前の誤りの言葉に隠れない
        seen[tuple(answers)] = kind


def test_a_border_case_where_plain_floor_division_is_one_short():
    """学習者の試行: 許容差なしの int(n_out // hiding_width) が通っていた。浮動小数のしきい値が丸められる境目がある。"""
    todo = cases(exercise_rng(2), input_devices())
    border = [c for c in todo if c[2] == 20_000]
    assert border
    _, hw, n_out, n_max, b, direction = border[0]
    h = cost.hiding_width(hw, b, direction)
    assert n_out // h == int(n_out / h) == 6 and reference(hw, n_out, n_max, b, direction) == 7


def test_reference_and_other_correct_answers_pass():
    expect("6.11b-2", by_counting, Status.PASS, "11 通り", "境目")
    expect("6.11b-2", by_formula, Status.PASS)
    expect("6.11b-2", by_times, Status.PASS)


def test_bandwidth_mistakes_are_named():
    expect("6.11b-2", variant("always_oneway"), Status.FAIL, "link_oneway", "axis_bw")
    expect("6.11b-2", variant("always_axis"), Status.FAIL, "一方向でも", "link_oneway")
    expect("6.11b-2", variant("doubled"), Status.FAIL, "NVLink", "出口が 1 つ")
    expect("6.11b-2", variant("hbm"), Status.FAIL, "hbm_bw")


def test_swapped_bandwidths_are_named():
    """学習者の試行: 一方向と双方向の帯域を入れ替えた答えに、帯域を確かめる一般のヒントしか出なかった。"""
    def swapped(hw, n_out, n_max, bytes_per_value=2, direction="one"):
        bw = hw.axis_bw if direction == "one" else hw.link_oneway
        threshold = bytes_per_value * hw.flops / (2 * bw)
        return max([1] + [k for k in range(1, n_max + 1) if n_out / k >= threshold * (1 - 1e-9)])
    expect("6.11b-2", swapped, Status.FAIL, "一方向で axis_bw、双方向で link_oneway", "逆です")


def test_bytes_and_flops_mistakes_are_named():
    expect("6.11b-2", variant("bytes_fixed"), Status.FAIL, "bytes_per_value")
    expect("6.11b-2", variant("no_factor2"), Status.FAIL, "2·m·k·n", "b·C/(2W)")


def test_division_and_rounding_mistakes_are_named():
    expect("6.11b-2", variant("no_divide"), Status.FAIL, "割らずに", "n_out / n")
    expect("6.11b-2", variant("strict"), Status.FAIL, "ちょうど等しい", "T_comm ≤ T_math")
    expect("6.11b-2", variant("ceil"), Status.FAIL, "切り上げ", "切り捨て")
    expect("6.11b-2", variant("round"), Status.FAIL, "四捨五入")
    expect("6.11b-2", variant("no_cap"), Status.FAIL, "n_max")
    expect("6.11b-2", variant("zero"), Status.FAIL, "0 を返して", "1 以上")


def test_rounding_at_the_border_is_named():
    """学習者の試行: int(n_out // cost.hiding_width(...)) と、幅を n_out // n で求めた答えが通っていた。"""
    def floor_division(hw, n_out, n_max, bytes_per_value=2, direction="one"):
        return max(1, min(n_max, int(n_out // cost.hiding_width(hw, bytes_per_value, direction))))

    def true_division_no_tol(hw, n_out, n_max, bytes_per_value=2, direction="one"):
        return max(1, min(n_max, int(n_out / cost.hiding_width(hw, bytes_per_value, direction))))

    def integer_width(hw, n_out, n_max, bytes_per_value=2, direction="one"):
        h, best = cost.hiding_width(hw, bytes_per_value, direction), 1
        for ways in range(1, n_max + 1):
            if n_out // ways >= h * (1 - 1e-9):
                best = ways
        return best
    expect("6.11b-2", floor_division, Status.FAIL, "ちょうど等しくなる境目", "丸められる", "相対 1e-9")
    expect("6.11b-2", true_division_no_tol, Status.FAIL, "ちょうど等しくなる境目", "相対 1e-9")
    expect("6.11b-2", integer_width, Status.FAIL, "n_out // n", "実数の割り算")


def test_off_by_one_searches_are_named():
    """学習者の試行: range(1, n_max) と、隠れない最小の n を返す答えに、帯域のヒントが出ていた。"""
    def below_cap(hw, n_out, n_max, bytes_per_value=2, direction="one"):
        h, best = cost.hiding_width(hw, bytes_per_value, direction), 1
        for ways in range(1, n_max):
            if n_out / ways >= h * (1 - 1e-9):
                best = ways
        return best

    def first_failing(hw, n_out, n_max, bytes_per_value=2, direction="one"):
        h = cost.hiding_width(hw, bytes_per_value, direction)
        for ways in range(1, n_max + 1):
            if n_out / ways < h * (1 - 1e-9):
                return ways
        return n_max
    expect("6.11b-2", below_cap, Status.FAIL, "n_max 自身", "range(1, n_max + 1)")
    expect("6.11b-2", first_failing, Status.FAIL, "隠れない最小の n", "その 1 つ前")


def test_wrong_types_and_unnamed_errors():
    expect("6.11b-2", lambda *a: float(by_counting(*a)), Status.FAIL, "浮動小数", "int")
    expect("6.11b-2", lambda *a: True, Status.FAIL, "真偽値")
    expect("6.11b-2", lambda *a: "3", Status.FAIL, "str")
    expect("6.11b-2", lambda *a: by_counting(*a) + (a[1] > 20_000), Status.FAIL, "並列のはずが")
    expect("6.11b-2", not_done, Status.NOT_DONE)
    expect("6.11b-2", boom, Status.ERROR, "ZeroDivisionError")


def test_a_changed_default_is_caught():
    """回帰（ミューテーションの生き残り）: チェックがいつも 5 つの引数を渡すと、定義の既定値を変えても通っていた。"""
    def float32_default(hw, n_out, n_max, bytes_per_value=4, direction="one"):
        return by_counting(hw, n_out, n_max, bytes_per_value, direction)

    def two_way_default(hw, n_out, n_max, bytes_per_value=2, direction="two"):
        return by_counting(hw, n_out, n_max, bytes_per_value, direction)

    expect("6.11b-2", float32_default, Status.FAIL, "省いて呼ぶ", "既定値")
    expect("6.11b-2", two_way_default, Status.FAIL, "省いて呼ぶ", "既定値")


def test_strict_comparison_without_tolerance_fails_at_the_tie():
    def strict_no_tol(hw, n_out, n_max, bytes_per_value=2, direction="one"):
        bw = hw.axis_bw if direction == "two" else hw.link_oneway
        threshold = bytes_per_value * hw.flops / (2 * bw)
        return max([1] + [k for k in range(1, n_max + 1) if n_out / k > threshold])
    expect("6.11b-2", strict_no_tol, Status.FAIL, "ちょうど等しい")


def test_the_library_function_with_and_without_the_cap():
    def with_cap(hw, n_out, n_max, bytes_per_value=2, direction="one"):
        return min(n_max, cost.max_chunks_hidden(hw, n_out, bytes_per_value, direction))

    def without_cap(hw, n_out, n_max, bytes_per_value=2, direction="one"):
        return cost.max_chunks_hidden(hw, n_out, bytes_per_value, direction)

    def with_cap_and_tol(hw, n_out, n_max, bytes_per_value=2, direction="one"):  # 境目は許容差で
        return max(1, min(n_max, math.floor(n_out / cost.hiding_width(hw, bytes_per_value, direction) * (1 + 1e-9))))

    # cost.max_chunks_hidden は許容差なしの // で切り捨てるので、丸めの境目で 1 小さい（問題文がそう書く）
    expect("6.11b-2", with_cap, Status.FAIL, "ちょうど等しくなる境目")
    expect("6.11b-2", with_cap_and_tol, Status.PASS)
    expect("6.11b-2", without_cap, Status.FAIL, "上限 n_max =", "を超える")
