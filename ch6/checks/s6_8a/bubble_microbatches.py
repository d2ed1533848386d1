"""6.8a-3 microbatches_for_bubble: バブルの割合を目標以下にする、いちばん少ないマイクロバッチの数。"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ...checking import Fail, call, exercise, n_devices


def bubble(n_stages: int, n_micro: int, n_virtual: int = 1) -> Fraction:
    """(S − 1)/(V·M + S − 1)（分数で正確に）。"""
    return Fraction(n_stages - 1, n_virtual * n_micro + n_stages - 1)


def smallest_m(n_stages: int, target: float, n_virtual: int = 1, rule=bubble) -> int:
    target = Fraction(target)
    m = 1
    while rule(n_stages, m, n_virtual) > target:
        m += 1
    return m


def _plus_s(n_stages, n_micro, n_virtual=1):  # 分母を M + S にした誤り
    return Fraction(n_stages - 1, n_virtual * n_micro + n_stages)


def _no_virtual(n_stages, n_micro, n_virtual=1):  # V を使わない誤り
    return bubble(n_stages, n_micro)


def _virtual_everywhere(n_stages, n_micro, n_virtual=1):  # 分母全体に V を掛けた誤り
    return Fraction(n_stages - 1, n_virtual * (n_micro + n_stages - 1))


def _as_int(got, what: str) -> int:
    if isinstance(got, (bool, np.bool_)):
        raise Fail(f"{what}: マイクロバッチの数（整数）のはずですが、真偽値 {got} が返りました。")
    if isinstance(got, (int, np.integer)):
        return int(got)
    if isinstance(got, (float, np.floating)):
        raise Fail(f"{what}: マイクロバッチの数は整数のはずですが、浮動小数 {float(got):.4g} が返りました。"
                   "条件を満たすいちばん小さい整数を int で返しましょう（切り上げた値を int() で）。")
    raise Fail(f"{what}: マイクロバッチの数（整数）のはずですが、{type(got).__name__} が返りました。")


@exercise("6.8a-3", "microbatches_for_bubble")
def check_microbatches_for_bubble(fn):
    n = n_devices()
    # (S, 目標, V): 境目にちょうど来ない目標（浮動小数の丸めで答えが変わらない）。0.5 は丸めのない境目、1.0 はどの M でもよい
    cases = [(max(n, 2), 0.13, 1), (5, 0.07, 1), (3, 0.41, 1), (12, 0.26, 2), (6, 0.09, 4), (1, 0.05, 1), (9, 0.5, 1),
             (4, 1.0, 1)]
    wants = [smallest_m(s, target, v) for s, target, v in cases]
    gots = [_as_int(call(fn, s, target, v), f"S = {s}, 目標 {target}, V = {v}") for s, target, v in cases]
    if gots != wants:
        # 誤りの名前は、すべての場合の答えがその誤りの答えと一致するときだけ言う
        def same_as(rule):
            return gots == [smallest_m(s, target, v, rule) for s, target, v in cases]

        k = next(i for i, (g, w) in enumerate(zip(gots, wants)) if g != w)
        (s, target, v), got, want = cases[k], gots[k], wants[k]
        what = f"S = {s}, 目標 {target}, V = {v}"
        if got < 1:
            raise Fail(f"{what}: 期待 {want}、実際 {got}。マイクロバッチは 1 個以上です"
                       "（ステージが 1 つならバブルは 0 なので、M = 1 で足ります）。")
        b_got = float(bubble(s, got, v))
        if same_as(_plus_s):
            raise Fail(f"{what}: 期待 {want}、実際 {got}（分母を V·M + S にした値）。ティックの数は M + S − 1 です"
                       f"（M = {got} のバブルは {b_got:.3f} で、目標を超えます）。")
        if same_as(_no_virtual):
            raise Fail(f"{what}: 期待 {want}、実際 {got}（V を使っていない値）。1 デバイスが V 個のステージを持つと、"
                       "仕事は V 倍に細かくなり、バブルは (S − 1)/(V·M + S − 1) です。")
        if same_as(_virtual_everywhere):
            raise Fail(f"{what}: 期待 {want}、実際 {got}（分母全体に V を掛けた値）。"
                       "V 倍になるのは仕事のマス V·M だけで、埋まるまでの S − 1 ティックは変わりません。")
        if got < want:
            raise Fail(f"{what}: 期待 {want}、実際 {got}。M = {got} のバブルは {b_got:.3f} で、目標 {target} を超えます"
                       "（割り切れないときは切り上げます）。")
        raise Fail(f"{what}: 期待 {want}、実際 {got}。M = {got} でも条件は満たしますが、いちばん小さい数ではありません"
                   f"（M = {want} のバブルは {float(bubble(s, want, v)):.3f} です）。")
    return (f"隠しの {len(cases)} 通りの (S, 目標, V) で一致しました"
            f"（例: S = {cases[0][0]}, 目標 {cases[0][1]} → M = {smallest_m(*cases[0])}）。")
