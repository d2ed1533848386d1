"""6.7-1 max_dp_chips: 参照と別の正解（n を 1 から増やして秒を比べる）は通り、(n − 1)/n を 1 にする、ちょうどを
通信律速にする、四捨五入、切り上げ、条件を満たさない最初の n、形の取り違え、axes を見ない、GPU でも axes 倍、
hbm_bw で割る、勾配を 4 バイトで数える、n = 1 で 0 を返す答えはそれぞれの言葉で落ちる。"""
import math

import pytest

from ch6.cost import all_reduce_time, dp_critical_batch
from tests.checkhelp import boom, expect, not_done


def ref(hw, tokens, axes=1, form="book"):
    b_star = dp_critical_batch(hw, axes, form)
    return max(1, math.floor((1 + tokens / b_star) * (1 + 1e-9)))


def by_search(hw, tokens, axes=1, form="book"):
    # 別の正解: n を 1 から増やし、隠せる計算の秒と all-reduce の秒を比べる
    bw = hw.axis_bw * (axes if hw.kind == "TPU" else 1)
    params = 1e9
    n = 1
    while True:
        flops = (4 if form == "book" else 6) * tokens / (n + 1) * params
        if all_reduce_time(2 * params, n + 1, bw) > flops / hw.flops * (1 + 1e-9):
            return n
        n += 1


def search(hw, tokens, axes=1, form="book", *, bw_axes=None, last_ok=True):
    """n を 1 から増やして秒を比べる（bw_axes: 帯域に掛ける軸の数、last_ok=False: 条件を満たさない最初の n を返す）。"""
    bw = hw.axis_bw * (bw_axes(hw, axes) if bw_axes else (axes if hw.kind == "TPU" else 1))
    params = 1e9
    n = 1
    while True:
        flops = (4 if form == "book" else 6) * tokens / (n + 1) * params
        if all_reduce_time(2 * params, n + 1, bw) > flops / hw.flops * (1 + 1e-9):
            return n if last_ok else n + 1
        n += 1


def slip(kind):
    def fn(hw, tokens, axes=1, form="book"):
        if kind == "form":
            form = "step" if form == "book" else "book"
        b_star = dp_critical_batch(hw, 1 if kind == "one_axis" else axes, form)
        if kind == "hbm":
            b_star = hw.flops / hw.hbm_bw * (1 if form == "book" else 4 / 6)
        if kind == "f32":
            b_star *= 2
        x = tokens / b_star
        if kind == "s1":
            return max(1, math.floor(x + 1e-9))
        if kind == "strict":
            return max(1, math.ceil(1 + x) - 1)
        if kind == "nearest":
            return max(1, round(1 + x))
        if kind == "ceil":
            return max(1, math.ceil(1 + x))
        if kind == "no_tolerance":  # <= で比べるが、許容誤差なし
            return max(1, math.floor(1 + x))
        if kind == "zero" and x < 1:
            return 0
        return max(1, math.floor((1 + x) * (1 + 1e-9)))
    return fn


@pytest.mark.parametrize("fn", [ref, by_search], ids=["closed-form", "search"])
def test_correct(fn):
    expect("6.7-1", fn, "pass", "n = 1")


@pytest.mark.parametrize(("kind", "words"), [
    ("s1", ("(n − 1)/n を 1 とした", "1 個少なく")),
    ("strict", ("ちょうど等しい（相対 1e-9 以内の）n を通信律速",)),
    ("no_tolerance", ("ちょうど等しい（相対 1e-9 以内の）n を通信律速",)),
    ("nearest", ("四捨五入", "切り捨て")),
    ("ceil", ("切り上げて", "切り捨て")),
    ("form", ("取り違えて", "4·b·P")),
    ("one_axis", ("axes を見ずに",)),
    ("hbm", ("hbm_bw", "axis_bw")),
    ("f32", ("4 バイト", "bf16")),
    ("zero", ("0 を返して", "n = 1")),
])
def test_named_slips(kind, words):
    expect("6.7-1", slip(kind), "fail", *words)


def test_search_slips():
    # 条件を満たさなくなった最初の n を返す（ループの終わりの 1 つずれ）
    expect("6.7-1", lambda hw, t, axes=1, form="book": search(hw, t, axes, form, last_ok=False), "fail",
           "1 個多く", "1 つ前の n")
    # GPU の行でも帯域を axes 倍にする（NVLink の出口は 1 つ）
    expect("6.7-1", lambda hw, t, axes=1, form="book": search(hw, t, axes, form, bw_axes=lambda hw, a: a), "fail",
           "GPU の行でも帯域を axes 倍")


def test_other_wrong_answers():
    expect("6.7-1", lambda hw, t, axes=1, form="book": ref(hw, t, axes, form) + 0.5, "fail", "整数")
    expect("6.7-1", lambda hw, t, axes=1, form="book": None, "fail", "数値のはず")
    expect("6.7-1", lambda hw, t, axes=1, form="book": 64, "fail", "b* は", "のはずが 64 個")
    expect("6.7-1", lambda hw, t, axes=1, form="book": 1, "fail", "計算律速なので")


def test_not_done_and_learner_error():
    expect("6.7-1", not_done, "not_done", "関数の本体に答えを書いてから")
    expect("6.7-1", boom, "error", "ZeroDivisionError")


def test_a_changed_default_is_caught():
    """回帰（ミューテーションの生き残り）: チェックはいつも axes と form を渡していたので、定義の既定値を
    axes=2 や form="step" に変えても通っていた。"""
    def axes_two(hw, tokens, axes=2, form="book"):
        return ref(hw, tokens, axes, form)

    def step_form(hw, tokens, axes=1, form="step"):
        return ref(hw, tokens, axes, form)

    expect("6.7-1", axes_two, "fail", "既定値で呼ぶと", "既定値は axes=1、form='book'")
    expect("6.7-1", step_form, "fail", "既定値で呼ぶと", "既定値は axes=1、form='book'")
