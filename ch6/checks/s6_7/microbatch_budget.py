"""6.7-3 fewest_microbatches: メモリの予算（一時領域）に収まる、いちばん少ないマイクロバッチの数。

隠し入力（params と batch）は CPU に置いて渡します（:func:`~ch6.checks.on_cpu.measuring_device`）。一時領域は
バックエンドで違うので、こうしてどのマシンでも同じ表と判定にし、学習者版は作るときに記録した表と選択
（:func:`measured`、:func:`choices`）を引きます。
"""
from __future__ import annotations

import re

from ...checking import CANNOT_TELL, Fail, LearnerError, call, exercise
from ...recorded import recorded
from ..chips import number
from ..on_cpu import measuring_device, placed_inputs
from .common import lesson_accumulate, pair, rng, tanh_model

_B = 12
_DIVISORS = (1, 2, 3, 4, 6, 12)  # _B の約数（3 と 6 は 2 のべき乗ではない）
_TABLES: dict[tuple, dict] = {}


def _model():
    """隠しの params、batch（:func:`measuring_device` に置いたもの）と loss_fn。"""
    params, batch, loss_fn = tanh_model(rng(3), _B, 2, 1024)  # 一時領域が k とともに減る大きさ（活性化が重みより大きい）
    params, batch = placed_inputs((params, batch))
    return params, batch, loss_fn


@recorded
def measured(platform: str) -> list:
    """_DIVISORS の順に、k ごとの (一時領域, 引数, 出力) のバイト数。platform（隠し入力を置いたデバイスの種類）で測る。
    引数と出力は、名指しする誤り（予算と比べるものを取り違える）のため。"""
    import jax

    params, batch, loss_fn = _model()
    step = jax.jit(lesson_accumulate, static_argnums=(0, 3))
    rows = []
    for k in _DIVISORS:
        mem = step.lower(loss_fn, params, batch, k).compile().memory_analysis()
        rows.append((int(mem.temp_size_in_bytes), int(mem.argument_size_in_bytes), int(mem.output_size_in_bytes)))
    return rows


def table() -> dict:
    """k -> (一時領域, 引数, 出力)。1 度だけ測る（学習者版では記録した表）。"""
    import jax

    # 読み方（Compiled.memory_analysis）もキーに入れる: テストがそれを TPU の値に差し替えたら測り直す
    key = (measuring_device().platform, jax.stages.Compiled.memory_analysis)
    if key not in _TABLES:
        _TABLES[key] = dict(zip(_DIVISORS, measured(key[0])))
    return _TABLES[key]


@recorded
def choices(rows: list, budgets: list) -> dict:
    """予算ごとの正しい k と、名指しする誤りの k（誤りの名前 -> 予算ごとの k）。rows は :func:`measured` の表。"""
    t = dict(zip(_DIVISORS, rows))

    def first_fit(budget, ks=_DIVISORS, strict=False, col=lambda row: row[0]):
        for k in ks:
            size = col(t[k])
            if size < budget or (not strict and size == budget):
                return k
        return None

    pow2 = tuple(k for k in _DIVISORS if k & (k - 1) == 0)
    variants = {"want": {}, "strict": dict(strict=True), "no_last": dict(ks=_DIVISORS[:-1]),
                "no_first": dict(ks=_DIVISORS[1:]), "pow2": dict(ks=pow2),
                "args": dict(col=lambda row: row[0] + row[1]), "output": dict(col=lambda row: row[0] + row[2]),
                "largest": dict(ks=_DIVISORS[::-1])}
    return {name: [first_fit(b, **kw) for b in budgets] for name, kw in variants.items()}


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


def _temp_of_first(answers, temp):
    """ほかの k を返しているのに、一時領域が k = 1 のもの（k = 1 を測った値を持ち越した）。"""
    return [k for k, t in answers if k not in (None, 1) and t == temp[1] != temp[k]]


@exercise("6.7-3", "fewest_microbatches")
def check_fewest_microbatches(fn):
    params, batch, loss_fn = _model()
    t = table()
    temp = {k: row[0] for k, row in t.items()}
    lowest = min(temp.values())  # CPU では k=B がいちばん小さい。TPU では k によらず 0 のことがある
    # 予算: 3 で初めて収まる予算（少し余裕）、3 のちょうど、どれでも収まる予算、6 のちょうど（約数でない 5 の次）、
    # いちばん小さい一時領域ちょうど（CPU では k=B だけ）、どれも収まらない予算。同じ予算は 1 度だけ
    budgets = list(dict.fromkeys([temp[3] + 8, temp[3], temp[1] + 4096, temp[6], lowest, lowest - 1]))
    # 参照の値と誤りの答えはすべて学習者を呼ぶ前に（学習者版では、作るときに記録した値を引く）
    picks = choices([t[k] for k in _DIVISORS], budgets)
    want = picks["want"]
    answers = [_answer(_call(fn, lesson_accumulate, loss_fn, params, batch, b), b) for b in budgets]
    got = [k for k, _ in answers]
    if got != want:
        i = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
        budget, g, w = budgets[i], got[i], want[i]
        # 誤りの並びが丸ごと一致したら、その誤りを名指しする
        if got == picks["strict"]:
            raise Fail(f"予算ちょうどを収まらないとしたので（< で比べている）、予算 {budget:,} バイトちょうどの k = {w} を"
                       "飛ばしました。<= で比べます。")
        if got == picks["no_last"]:
            raise Fail(f"k = {_B}（バッチの大きさそのもの）を試していないので、k = {_B} だけが収まる予算で None が返りました。"
                       f"約数は {_B} まで試します（range の終わりは B + 1）。")
        if got == picks["no_first"]:
            raise Fail("k = 1（マイクロバッチ 1 つ）を試していないので、どれでも収まる予算で k = 1 になりませんでした。1 から試します。")
        if got == picks["pow2"]:
            raise Fail(f"2 のべき乗だけを試したので、k = {w}（一時領域 {temp[w]:,} バイト）が収まる予算で k = {g} が返りました。"
                       "すべての約数を小さい順に試します。")
        plus = [name for name, key in (("引数", "args"), ("出力", "output")) if got == picks[key]]
        if plus and all(k is None for k in got):
            # 一時領域がどれも 0 のチップでは、いつも None を返す答えと、引数や出力まで数えた答えを見分けられない
            raise Fail(f"k = {w} の一時領域 {temp[w]:,} バイトは予算 {budget:,} バイト以下なので、None ではなく k = {w} の"
                       f"はずが、どの予算でも None でした。一時領域に{'か'.join(plus)}を足した値で比べたときも同じ答えに"
                       "なります。比べるのは temp_size_in_bytes だけです。")
        if plus:
            raise Fail(f"一時領域に{'か'.join(plus)}を足した値で予算と比べたときと同じで、予算 {budget:,} バイトで"
                       f" k = {w} のはずが k = {g} でした。比べるのは temp_size_in_bytes だけです。")
        if got == picks["largest"]:
            raise Fail(f"収まる中でいちばん大きい k を返しているので、予算 {budget:,} バイトで k = {w} のはずが k = {g} でした。"
                       "小さい順に試し、最初に収まる k を選びます。")
        if w is None:
            raise Fail(f"どの k でも一時領域が {lowest:,} バイト以上あり、予算 {budget:,} バイトに収まらないので、"
                       f"(None, None) のはずが k = {g!r} でした。")
        if g is None:
            raise Fail(f"k = {w} の一時領域 {temp[w]:,} バイトは予算 {budget:,} バイト以下なので、None ではなく k = {w} のはずでした。")
        if g > w:
            raise Fail(f"予算 {budget:,} バイトに収まるいちばん小さい k は {w} なので、k = {w} のはずが k = {g} でした。"
                       "小さい順に試し、最初に収まる k を選びます。")
        raise Fail(f"k = {g} の一時領域は {temp[g]:,} バイトで予算 {budget:,} バイトを超えるので、k = {w} のはずでした。"
                   "比べるのは temp_size_in_bytes です。")
    carried = _temp_of_first(answers, temp)
    if carried:
        raise Fail(f"k = {carried[0]} を選んだのに、一時領域は k = 1 の {temp[1]:,} バイトを返しました。"
                   "選んだ k でコンパイルした temp_size_in_bytes を返します。")
    for (k, value), _budget in zip(answers, budgets):
        if k is not None and value != temp[k]:
            raise Fail(f"k = {k} の一時領域は {temp[k]:,} バイトのはずが {value:,.0f} でした。"
                       "memory_analysis().temp_size_in_bytes をそのまま返します。")
    return (f"隠しのバッチ {_B} 件と {len(budgets)} つの予算（どれも収まらない予算を含む）で、選んだ k が一致しました。"
            + _untested(picks, temp))


def _untested(picks, temp) -> str:
    """このバックエンドの一時領域の値では、どの予算でも正解と同じ答えになってしまう誤り（✅ の行で断る）。"""
    want = picks["want"]
    same = [what for what, key in (("予算ちょうどを収まらないとする誤り", "strict"), ("2 のべき乗だけを試す誤り", "pow2"),
                                   (f"k = {_B} を試さない誤り", "no_last"))
            if picks[key] == want]
    if all(w in (None, 1) for w in want):  # k = 1 から試せば、ほかにどの約数を飛ばしても同じ答え
        same.append("約数の一部を飛ばす誤り")
    if all(w in (None, 1) or temp[w] == temp[1] for w in want):
        same.append("k = 1 の一時領域を返す誤り")
    if not same:
        return ""
    return (f"（このバックエンドの memory_analysis() では一時領域が k でほとんど変わらないので、"
            f"{'、'.join(same)}は{CANNOT_TELL}）")
