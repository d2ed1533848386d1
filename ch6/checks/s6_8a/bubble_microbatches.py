"""6.8a-3 microbatches_for_bubble: バブルの割合を目標以下にする、いちばん少ないマイクロバッチの数。

問題文の約束: 差が TOL 以内なら等しいとみなし、ちょうど等しい M も条件を満たす（「以下」）。S = 1 や目標 ≥ 1 なら 1。
隠しの場合には、ちょうど等しくなる境目（丸めのない 0.25 と、浮動小数では 1 ずれやすい 0.2）も入れる。
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ...checking import Fail, LearnerError, call, exercise
from ...recorded import input_devices, recorded

TOL = 1e-9  # 問題文の「差が 1e-9 以内なら等しい」


def bubble(n_stages: int, n_micro: int, n_virtual: int = 1) -> Fraction:
    """(S − 1)/(V·M + S − 1)（分数で正確に）。"""
    return Fraction(n_stages - 1, n_virtual * n_micro + n_stages - 1)


def _smallest(ok) -> int:
    m = 1
    while not ok(m):
        m += 1
    return m


@recorded
def smallest_m(n_stages: int, target: float, n_virtual: int = 1) -> int:
    limit = Fraction(target) + Fraction(TOL)
    return _smallest(lambda m: bubble(n_stages, m, n_virtual) <= limit)


# 名前を言う誤り（同じ場合のすべてで一致したときだけ、その名前を言う）
@recorded
def _strict(n_stages, target, n_virtual=1):  # 「以下」でなく「未満」
    limit = Fraction(target) - Fraction(TOL)
    return _smallest(lambda m: bubble(n_stages, m, n_virtual) < limit)


@recorded
def _plus_s(n_stages, target, n_virtual=1):  # 分母を V·M + S にした
    return _smallest(lambda m: Fraction(n_stages - 1, n_virtual * m + n_stages) <= Fraction(target) + Fraction(TOL))


@recorded
def _no_virtual(n_stages, target, n_virtual=1):  # V を使わない（分母と分子に同じ V を掛けても同じ）
    return smallest_m(n_stages, target)


@recorded
def _numerator_s(n_stages, target, n_virtual=1):  # 分子を S − 1 でなく S にした
    limit = Fraction(target) + Fraction(TOL)
    return _smallest(lambda m: Fraction(n_stages, n_virtual * m + n_stages - 1) <= limit)


@recorded
def _virtual_everywhere(n_stages, target, n_virtual=1):  # 分母全体に V を掛けた
    limit = Fraction(target) + Fraction(TOL)
    return _smallest(lambda m: Fraction(n_stages - 1, n_virtual * (m + n_stages - 1)) <= limit)


@recorded
def _ideal_ratio(n_stages, target, n_virtual=1):  # 割合でなく、理想の時間との比 (S − 1)/(V·M) を目標と比べた
    if n_stages == 1:
        return 1
    return _smallest(lambda m: Fraction(n_stages - 1, n_virtual * m) <= Fraction(target) + Fraction(TOL))


@recorded
def _closed(n_stages, target, n_virtual):
    return (n_stages - 1) * (1 - target) / (target * n_virtual)


@recorded
def _nearest(n_stages, target, n_virtual=1):  # 切り上げでなく四捨五入
    return max(1, round(_closed(n_stages, target, n_virtual)))


@recorded
def _floor(n_stages, target, n_virtual=1):  # 切り捨て
    return max(1, math.floor(_closed(n_stages, target, n_virtual) + TOL))


@recorded
def _ceil_no_tolerance(n_stages, target, n_virtual=1):  # 浮動小数の式をそのまま切り上げた
    return max(1, math.ceil(_closed(n_stages, target, n_virtual))) if n_stages > 1 else 1


# 名前を言う誤り（隠しの場合のすべてでその答えと一致したときだけ、その名前を言う）と、その文（{want} と {got}）
WRONG = "答えが {want} になるはずが {got} でした。"
MISTAKES = [
    (_strict, WRONG + "M = {want} のバブルは目標とちょうど等しく、「以下」なので条件を満たします（<= で比べます）。"),
    (_ceil_no_tolerance, WRONG + "式の値が浮動小数の丸めで整数を少し超え、切り上げが 1 ずれています"
                                 "（差が 1e-9 以内なら等しいとみなします）。"),
    (_plus_s, WRONG + "分母を V·M + S にしていますが、ティックは V·M + S − 1 です。"),
    (_no_virtual, "答えが {want} になるはずが、V = 1 のときと同じ {got} でした。"
                  "バブル (S − 1)/(V·M + S − 1) で V が掛かるのは M だけです。"),
    (_numerator_s, WRONG + "分子を S にしていますが、埋まるまでのティックは S − 1 なので、バブルは (S − 1)/(V·M + S − 1) です。"),
    (_virtual_everywhere, WRONG + "分母全体に V を掛けていますが、V 倍になるのは V·M だけで、S − 1 は変わりません。"),
    (_ideal_ratio, WRONG + "(S − 1)/(V·M) は理想の時間との比で、割合の分母は全体のティック V·M + S − 1 です。"),
    (_nearest, WRONG + "M を四捨五入していますが、条件を満たすには切り上げます。"),
    (_floor, WRONG + "M を切り捨てていますが、それではバブルが目標を超えるので切り上げます。"),
]


def _as_int(got, what: str) -> int:
    if isinstance(got, (bool, np.bool_)):
        raise Fail(f"{what}: マイクロバッチの数は整数のはずが、真偽値 {got} でした。")
    if isinstance(got, (int, np.integer)):
        return int(got)
    if isinstance(got, (float, np.floating)):
        raise Fail(f"{what}: マイクロバッチの数は整数のはずが、浮動小数 {float(got):.4g} でした。"
                   "切り上げた値を int で返します。")
    raise Fail(f"{what}: マイクロバッチの数は整数のはずが、{type(got).__name__} でした。")


def cases_for(n: int) -> list[tuple[int, float, int]]:
    """(S, 目標, V)。境目ちょうど（0.25、0.2、0.5）、1 ステージ、目標 1、四捨五入と切り上げが違う場合を含む。"""
    return [(max(n, 2), 0.13, 1), (5, 0.07, 1), (5, 0.25, 1), (4, 0.2, 2), (3, 0.41, 1), (12, 0.26, 2),
            (6, 0.09, 4), (1, 0.05, 1), (9, 0.5, 1), (4, 1.0, 1)]


def _answer(fn, s: int, target: float, v: int) -> int:
    what = f"S = {s}、目標 {target}、V = {v}"
    try:
        got = call(fn, s, target, v)
    except LearnerError as exc:
        if isinstance(exc.exc, ZeroDivisionError):
            where = "分母 V·M + S − 1 が M = 0 で 0 になります" if s == 1 else "分母が 0 になりました"
            raise Fail(f"{what} で 0 による割り算が起きました（{where}）。M は 1 から調べ、S = 1 なら 1 を返します。") from None
        raise
    return _as_int(got, what)


@exercise("6.8a-3", "microbatches_for_bubble")
def check_microbatches_for_bubble(fn):
    cases = cases_for(input_devices())
    # 参照の値はすべて学習者を呼ぶ前に（学習者版では、作るときに記録した値を引く）
    wants = [smallest_m(*c) for c in cases]
    alts = [[rule(*c) for c in cases] for rule, _ in MISTAKES]
    gots = [_answer(fn, *c) for c in cases]
    if gots == wants:
        k = next(k for k, c in enumerate(cases) if c[2] == 1)  # 既定値 n_virtual=1 と同じ場面
        s, target, _ = cases[k]
        default = _as_int(call(fn, s, target), f"S = {s}、目標 {target}（n_virtual を省いて呼んだ結果）")
        if default != wants[k]:
            raise Fail(f"S = {s}、目標 {target} で n_virtual を省いて呼ぶと M = {default} で、n_virtual=1 を渡したときの "
                       f"{wants[k]} と違います。関数の定義の既定値は n_virtual=1 のままにします。")
        s, target, v = cases[0]
        return f"境目ちょうどの目標を含む {len(cases)} 通りで一致しました（例: S = {s}、目標 {target} → M = {wants[0]}）。"

    k = next(i for i, (g, w) in enumerate(zip(gots, wants)) if g != w)
    (s, target, v), got, want = cases[k], gots[k], wants[k]
    what = f"S = {s}、目標 {target}、V = {v}"
    if got < 1:
        why = ("ステージが 1 つならバブルは 0 なので、M = 1 で足ります。" if s == 1
               else "目標が 1 以上なら、どの M でも条件を満たすので 1 です。" if target >= 1
               else "M は 1 から数えます。")
        raise Fail(f"{what}: M は 1 以上のはずが {got} でした。{why}")
    for (_, message), alt in zip(MISTAKES, alts):
        if gots == alt:
            raise Fail(f"{what}: " + message.format(want=want, got=got))
    if got < want:
        raise Fail(f"{what}: 答えが {want} になるはずが {got} でした。M = {got} のバブルは {float(bubble(s, got, v)):.3f} で、"
                   "目標を超えます。")
    raise Fail(f"{what}: 答えが {want} になるはずが {got} でした。M = {got} も条件を満たしますが、"
               "いちばん小さい数ではありません。")
