"""6.7-3 fewest_microbatches: 参照と別の正解は通り、いちばん大きい k、予算ちょうどを飛ばす（<）、2 のべき乗だけ、
None を返さない、一時領域の値の違い、引数や出力まで数える答え、static_argnums を忘れる答えはそれぞれの言葉で落ちる。
一時領域が k によらないバックエンド（memory_analysis() の差し替え）での同じテストは test_microbatch_budget_chip.py に。"""
import re

import jax
import pytest

from tests.checkhelp import boom, expect, expect_named_or_untold, not_done


def _temp(accumulate, loss_fn, params, batch, k, what="temp"):
    m = jax.jit(accumulate, static_argnums=(0, 3)).lower(loss_fn, params, batch, k).compile().memory_analysis()
    extra = {"temp": 0, "temp+args": m.argument_size_in_bytes, "temp+out": m.output_size_in_bytes}[what]
    return m.temp_size_in_bytes + extra


def _size(batch):
    return jax.tree.leaves(batch)[0].shape[0]


def make(candidates=None, strict=False, what="temp", largest=False, none=(None, None)):
    def fn(accumulate, loss_fn, params, batch, budget):
        n = _size(batch)
        ks = candidates(n) if candidates else [k for k in range(1, n + 1) if n % k == 0]
        if largest:
            ks = ks[::-1]
        for k in ks:
            t = _temp(accumulate, loss_fn, params, batch, k, what)
            if t < budget or (not strict and t == budget):
                return k, _temp(accumulate, loss_fn, params, batch, k)
        return none
    return fn


def measure_all(accumulate, loss_fn, params, batch, budget):
    # 別の正解: 全部測ってから選び、リストで返す
    n = _size(batch)
    temps = {k: _temp(accumulate, loss_fn, params, batch, k) for k in range(1, n + 1) if n % k == 0}
    fits = [k for k in sorted(temps) if temps[k] <= budget]
    return [fits[0], temps[fits[0]]] if fits else [None, None]


@pytest.fixture
def backend_memory():
    """このバックエンドのまま（test_microbatch_budget_chip.py は、一時領域がどの k でも 0 のときに差し替える）。"""
    return "as-is"


@pytest.mark.parametrize("fn", [make(), measure_all])
def test_correct(fn, backend_memory):
    # 予算の数は一時領域から作るので、値が重なるバックエンド（チップ: どの k でも同じ）では 6 より少ない
    msg = expect("6.7-3", fn, "pass", "つの予算", "どれも収まらない")
    count = int(re.search(r"(\d+) つの予算", msg).group(1))
    if backend_memory == "temp0":
        assert count < 6, msg
    elif jax.default_backend() == "cpu":
        assert count == 6, msg


def test_wrong_answers_are_named(backend_memory):
    expect_named_or_untold("6.7-3", make(strict=True), "予算ちょうどを収まらないとする誤り",
                           "予算ちょうどを収まらないとした", "<=")
    # range(1, B): k = B を試さない。原因（k=B を試していない）を言い、「<= で」とは言わない
    msg = expect_named_or_untold("6.7-3", make(candidates=lambda n: [k for k in range(1, n) if n % k == 0]),
                                 "k = 12 を試さない誤り", "k = 12（バッチの大きさそのもの）を試していない")
    assert "<=" not in msg
    expect("6.7-3", make(candidates=lambda n: [k for k in range(2, n + 1) if n % k == 0]), "fail", "k = 1（マイクロバッチ 1 つ）を試していない")
    expect_named_or_untold("6.7-3", make(candidates=lambda n: [k for k in (1, 2, 4, 8, 16) if n % k == 0]),
                           "2 のべき乗だけを試す誤り", "2 のべき乗だけ", "すべての約数")
    expect_named_or_untold("6.7-3", make(candidates=lambda n: [k for k in (1, 2, 6) if n % k == 0]),
                           "約数の一部を飛ばす誤り", "いちばん小さい k")
    expect("6.7-3", make(largest=True), "fail", "いちばん大きい k", "小さい順")
    expect("6.7-3", make(none=(12, 0)), "fail", "(None, None)")
    expect("6.7-3", make(what="temp+args"), "fail", "引数", "足した値", "temp_size_in_bytes")
    expect("6.7-3", make(what="temp+out"), "fail", "出力", "足した値", "temp_size_in_bytes")
    msg = expect("6.7-3", lambda acc, f, p, b, budget: (1, _temp(acc, f, p, b, 1)), "fail")
    assert "超えるので" in msg or "(None, None) のはずが k = 1" in msg, msg  # 一時領域がどれも 0 なら後者で名指し

    def reports_args_too(acc, f, p, b, budget):
        k, t = make()(acc, f, p, b, budget)
        return (k, None if k is None else _temp(acc, f, p, b, k, "temp+args"))
    expect("6.7-3", reports_args_too, "fail", "一時領域は", "のはずが")
    expect("6.7-3", lambda *a: (None, None), "fail", "None ではなく k = ")  # k = 3（一時領域がどれも 0 なら k = 1）
    expect("6.7-3", lambda *a: (5, 0), "fail", "約数ではありません")
    expect("6.7-3", lambda *a: 3, "fail", "2 つ組")


def test_jit_without_static_arguments_is_explained():
    def jit_plain(accumulate, loss_fn, params, batch, budget, static=None):
        n = _size(batch)
        step = jax.jit(accumulate) if static is None else jax.jit(accumulate, static_argnums=static)
        for k in (k for k in range(1, n + 1) if n % k == 0):
            t = step.lower(loss_fn, params, batch, k).compile().memory_analysis().temp_size_in_bytes
            if t <= budget:
                return k, t
        return None, None
    expect("6.7-3", jit_plain, "fail", "loss_fn（関数）を配列として", "static_argnums=(0, 3)")
    expect("6.7-3", lambda *a: jit_plain(*a, static=(0,)), "fail", "k がトレーサ", "static_argnums=(0, 3)")


def test_not_done_and_learner_error():
    expect("6.7-3", not_done, "not_done", "関数の本体に答えを書いてから")
    expect("6.7-3", boom, "error", "ZeroDivisionError")


def test_tries_on_every_k_and_carried_temps_and_bare_none_are_named(backend_memory):
    # 1..B のすべての k: 約数でない k = 5 で reshape がエラーになる（どれも収まらない予算でそこまで進む）
    expect("6.7-3", make(candidates=lambda n: list(range(1, n + 1))), "fail", "k = 5 は 12 の約数ではない", "reshape")
    expect("6.7-3", make(none=None), "fail", "2 つ組")  # 収まらないとき (None, None) でなく None だけ

    def carries_first_temp(acc, f, p, b, budget):
        k, _ = make()(acc, f, p, b, budget)
        return (k, None if k is None else _temp(acc, f, p, b, 1))
    expect_named_or_untold("6.7-3", carries_first_temp, "k = 1 の一時領域を返す誤り", "一時領域は k = 1 の",
                           "選んだ k でコンパイルした")
