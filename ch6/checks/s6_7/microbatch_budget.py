"""6.7-3 fewest_microbatches: メモリの予算（一時領域）に収まる、いちばん少ないマイクロバッチの数。"""
from __future__ import annotations

import re

from ...checking import CANNOT_TELL, Fail, LearnerError, call, exercise
from ..chips import number
from .common import lesson_accumulate, pair, rng, tanh_model

_B = 12  # 約数 1, 2, 3, 4, 6, 12（3 と 6 は 2 のべき乗ではない）
_DIVISORS = tuple(k for k in range(1, _B + 1) if _B % k == 0)
_TEMPS: dict[tuple, int] = {}
_ARGS: dict[int, int] = {}
_OUTS: dict[int, int] = {}


def _model():
    return tanh_model(rng(3), _B, 2, 1024)  # 一時領域が k とともに減る大きさ（活性化が重みより大きい）


def _temp(k: int) -> int:
    """k の一時領域（学習者に渡す accumulate を static_argnums=(0, 3) で jit してコンパイル）。デバイス数ごとに 1 度だけ。"""
    import jax

    # 読み方（Compiled.memory_analysis）もキーに入れる: テストがそれを TPU の値に差し替えたら測り直す
    key = (jax.device_count(), k, jax.stages.Compiled.memory_analysis)
    if key not in _TEMPS:
        params, batch, loss_fn = _model()
        step = jax.jit(lesson_accumulate, static_argnums=(0, 3))
        mem = step.lower(loss_fn, params, batch, k).compile().memory_analysis()
        _TEMPS[key], _ARGS[key[0]], _OUTS[key[0]] = (mem.temp_size_in_bytes, mem.argument_size_in_bytes,
                                                     mem.output_size_in_bytes)
    return _TEMPS[key]


def _with_args(k: int) -> int:
    """一時領域 + 引数（よくある誤り: 予算と比べるものを取り違える）。"""
    import jax

    return _temp(k) + _ARGS[jax.device_count()]


def _with_output(k: int) -> int:
    """一時領域 + 出力（予算と比べるものを取り違える、もう 1 つの形）。"""
    import jax

    return _temp(k) + _OUTS[jax.device_count()]


def _call(fn, *args):
    """学習者の関数を呼ぶ。jax.jit の static_argnums を忘れたときと、約数でない k で呼んだときの JAX のエラーは、その理由を言う。"""
    try:
        return call(fn, *args)
    except LearnerError as exc:
        text = str(exc.exc)
        bad = re.search(r"cannot reshape array of shape \(" + str(_B) + r",.*into shape \((\d+),", text)
        if bad and int(bad.group(1)) not in _DIVISORS:
            raise Fail(f"k = {bad.group(1)} は {_B} の約数ではないので、マイクロバッチに分ける reshape がエラーになりました。"
                       "1 から B までのうち、B の約数だけを試します。") from None
        if "as an abstract array" in text and "function" in text:
            raise Fail("jax.jit が loss_fn（関数）を配列として受け取ろうとして、エラーになりました。"
                       "static_argnums=(0, 3) で、loss_fn と k を静的な引数にします。") from None
        if "concrete values of integer type" in text or "TracerIntegerConversionError" in type(exc.exc).__name__:
            raise Fail("k がトレーサになり、reshape の形に使えませんでした。"
                       "static_argnums=(0, 3) で、k も静的な引数にします。") from None
        raise


def _first_fit(budget: float, ks=_DIVISORS, strict: bool = False, size=_temp):
    for k in ks:
        t = size(k)
        if t < budget or (not strict and t == budget):
            return k
    return None


def _answer(out, budget):
    """学習者の返り値を確かめて、k（int か None）と一時領域にする。"""
    k, temp = pair(out, "fewest_microbatches", "（k, 一時領域のバイト数）")
    if k is None:
        if temp is not None:
            raise Fail(f"予算 {budget:,} バイトで k が None なのに、一時領域に {temp!r} が返りました。収まらなければ (None, None) です。")
        return None, None
    k_num = number(k, "返した k")
    if k_num != int(k_num) or int(k_num) not in _DIVISORS:
        raise Fail(f"k = {k!r} はバッチの大きさ {_B} の約数ではありません。約数 {list(_DIVISORS)} だけを試します。")
    return int(k_num), number(temp, "返した一時領域")


def _temp_of_first(answers):
    """ほかの k を返しているのに、一時領域が k = 1 のもの（k = 1 を測った値を持ち越した）。"""
    return [k for k, t in answers if k not in (None, 1) and t == _temp(1) != _temp(k)]


@exercise("6.7-3", "fewest_microbatches")
def check_fewest_microbatches(fn):
    params, batch, loss_fn = _model()
    lowest = min(_temp(k) for k in _DIVISORS)  # CPU では k=B がいちばん小さい。TPU では k によらず 0 のことがある
    # 予算: 3 で初めて収まる予算（少し余裕）、3 のちょうど、どれでも収まる予算、6 のちょうど（約数でない 5 の次）、
    # いちばん小さい一時領域ちょうど（CPU では k=B だけ）、どれも収まらない予算。同じ予算は 1 度だけ
    budgets = list(dict.fromkeys([_temp(3) + 8, _temp(3), _temp(1) + 4096, _temp(6), lowest, lowest - 1]))
    answers = [_answer(_call(fn, lesson_accumulate, loss_fn, params, batch, b), b) for b in budgets]
    got = [k for k, _ in answers]
    want = [_first_fit(b) for b in budgets]
    pow2 = tuple(k for k in _DIVISORS if k & (k - 1) == 0)
    if got != want:
        i = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
        budget, g, w = budgets[i], got[i], want[i]
        # 誤りの並びが丸ごと一致したら、その誤りを名指しする
        if got == [_first_fit(b, strict=True) for b in budgets]:
            raise Fail(f"予算ちょうどを収まらないとしたので（< で比べている）、予算 {budget:,} バイトちょうどの k = {w} を"
                       "飛ばしました。<= で比べます。")
        if got == [_first_fit(b, _DIVISORS[:-1]) for b in budgets]:
            raise Fail(f"k = {_B}（バッチの大きさそのもの）を試していないので、k = {_B} だけが収まる予算で None が返りました。"
                       f"約数は {_B} まで試します（range の終わりは B + 1）。")
        if got == [_first_fit(b, _DIVISORS[1:]) for b in budgets]:
            raise Fail("k = 1（マイクロバッチ 1 つ）を試していないので、どれでも収まる予算で k = 1 になりませんでした。1 から試します。")
        if got == [_first_fit(b, pow2) for b in budgets]:
            raise Fail(f"2 のべき乗だけを試したので、k = {w}（一時領域 {_temp(w):,} バイト）が収まる予算で k = {g} が返りました。"
                       "すべての約数を小さい順に試します。")
        plus = [name for name, size in (("引数", _with_args), ("出力", _with_output))
                if got == [_first_fit(b, size=size) for b in budgets]]
        if plus and all(k is None for k in got):
            # 一時領域がどれも 0 のチップでは、いつも None を返す答えと、引数や出力まで数えた答えを見分けられない
            raise Fail(f"k = {w} の一時領域 {_temp(w):,} バイトは予算 {budget:,} バイト以下なので、None ではなく k = {w} の"
                       f"はずが、どの予算でも None でした。一時領域に{'か'.join(plus)}を足した値で比べたときも同じ答えに"
                       "なります。比べるのは temp_size_in_bytes だけです。")
        if plus:
            raise Fail(f"一時領域に{'か'.join(plus)}を足した値で予算と比べたときと同じで、予算 {budget:,} バイトで"
                       f" k = {w} のはずが k = {g} でした。比べるのは temp_size_in_bytes だけです。")
        if got == [_first_fit(b, _DIVISORS[::-1]) for b in budgets]:
            raise Fail(f"収まる中でいちばん大きい k を返しているので、予算 {budget:,} バイトで k = {w} のはずが k = {g} でした。"
                       "小さい順に試し、最初に収まる k を選びます。")
        if w is None:
            raise Fail(f"どの k でも一時領域が {lowest:,} バイト以上あり、予算 {budget:,} バイトに収まらないので、"
                       f"(None, None) のはずが k = {g!r} でした。")
        if g is None:
            raise Fail(f"k = {w} の一時領域 {_temp(w):,} バイトは予算 {budget:,} バイト以下なので、None ではなく k = {w} のはずでした。")
        if g > w:
            raise Fail(f"予算 {budget:,} バイトに収まるいちばん小さい k は {w} なので、k = {w} のはずが k = {g} でした。"
                       "小さい順に試し、最初に収まる k を選びます。")
        raise Fail(f"k = {g} の一時領域は {_temp(g):,} バイトで予算 {budget:,} バイトを超えるので、k = {w} のはずでした。"
                   "比べるのは temp_size_in_bytes です。")
    carried = _temp_of_first(answers)
    if carried:
        raise Fail(f"k = {carried[0]} を選んだのに、一時領域は k = 1 の {_temp(1):,} バイトを返しました。"
                   "選んだ k でコンパイルした temp_size_in_bytes を返します。")
    for (k, temp), _budget in zip(answers, budgets):
        if k is not None and temp != _temp(k):
            raise Fail(f"k = {k} の一時領域は {_temp(k):,} バイトのはずが {temp:,.0f} でした。"
                       "memory_analysis().temp_size_in_bytes をそのまま返します。")
    return (f"隠しのバッチ {_B} 件と {len(budgets)} つの予算（どれも収まらない予算を含む）で、選んだ k が一致しました。"
            + _untested(budgets, want, pow2))


def _untested(budgets, want, pow2) -> str:
    """このバックエンドの一時領域の値では、どの予算でも正解と同じ答えになってしまう誤り（✅ の行で断る）。"""
    same = [what for what, ks, strict in (("予算ちょうどを収まらないとする誤り", _DIVISORS, True),
                                         ("2 のべき乗だけを試す誤り", pow2, False),
                                         (f"k = {_B} を試さない誤り", _DIVISORS[:-1], False))
            if [_first_fit(b, ks, strict) for b in budgets] == want]
    if all(w in (None, 1) for w in want):  # k = 1 から試せば、ほかにどの約数を飛ばしても同じ答え
        same.append("約数の一部を飛ばす誤り")
    if all(w in (None, 1) or _temp(w) == _temp(1) for w in want):
        same.append("k = 1 の一時領域を返す誤り")
    if not same:
        return ""
    return (f"（このバックエンドの memory_analysis() では一時領域が k でほとんど変わらないので、"
            f"{'、'.join(same)}は{CANNOT_TELL}）")
