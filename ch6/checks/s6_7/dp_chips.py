"""6.7-1 max_dp_chips: 全体のトークン数が決まっているとき、データ並列が計算律速でいられる最大のチップの数。

隠しのチップの行（ch6.hardware.Chip、実在しない数値）と、スケーリングブックの式・ステップ全体の式の両方で確かめます。
しきい値は ch6.cost.dp_critical_batch、通信の秒は ch6.cost.all_reduce_time から求め、式を書き直しません。
"""
from __future__ import annotations

import math

from ...checking import Fail, call, exercise
from ...cost import all_reduce_time, dp_critical_batch
from ...recorded import recorded
from ..chips import hidden_chip, number, with_values
from .common import rng

TOL = 1e-9  # 通信の秒が計算の秒の (1 + 1e-9) 倍以内なら計算律速（問題文の約束）
P = 7e9  # 重みの数（答えによらない: 計算の秒も通信の秒も P に比例する）


@recorded
def reference(hw, tokens: float, axes: int, form: str) -> int:
    """計算律速でいられる最大のチップの数（ちょうどは計算律速）。"""
    def bound_ok(n: int) -> bool:  # n チップで、通信を隠せる計算の秒 ≥ 勾配の all-reduce の秒（許容 TOL）
        flops = (4 if form == "book" else 6) * tokens / n * P  # スケーリングブック: 逆伝播の 4·b·P、ステップ: 6·b·P
        bw = hw.flops / dp_critical_batch(hw, axes, "book")  # 軸 axes 本のリングの帯域（ch6.cost と同じ）
        return all_reduce_time(2 * P, n, bw) <= flops / hw.flops * (1 + TOL)

    b_star = dp_critical_batch(hw, axes, form)
    n = max(1, math.floor((1 + tokens / b_star) * (1 + TOL)))
    assert bound_ok(n) and not bound_ok(n + 1)
    return n


@recorded
def wrong(hw, tokens: float, axes: int, form: str, kind: str) -> int:
    """名指しする誤りの答え（kind ごと）。"""
    if kind == "form":  # スケーリングブックの式とステップ全体の式を取り違える
        form = "step" if form == "book" else "book"
    if kind == "one_axis":  # axes を見ずに 1 軸の帯域
        axes = 1
    if kind == "first_fail":  # n を 1 ずつ増やし、条件を満たさなくなった最初の n を返す
        return reference(hw, tokens, axes, form) + 1
    if kind == "hbm":  # チップ間の帯域の代わりに HBM の帯域（1 軸の axis_bw が hbm_bw になる行で計算する）
        link = {"ici_link_oneway": hw.hbm_bw / 2} if hw.kind == "TPU" else {"nvlink_oneway": hw.hbm_bw}
        return reference(with_values(hw, **link), tokens, 1, form)
    b_star = dp_critical_batch(hw, axes, form)
    if kind == "gpu_axes" and hw.kind == "GPU":  # GPU でも帯域を axes 倍にする: b* が 1/axes
        b_star = dp_critical_batch(hw, 1, form) / axes
    if kind == "f32":  # 勾配を float32（4 バイト）で送る: b* が 2 倍
        b_star *= 2
    x = tokens / b_star
    if kind == "s1":  # (n − 1)/n を 1 にする: n ≤ tokens / b*
        return max(1, math.floor(x * (1 + TOL)))
    if kind == "no_tolerance":  # <= で比べるが許容がない（ちょうどが丸めで少し下にあると 1 個少ない）
        return max(1, math.floor(1 + x))
    if kind == "strict":  # ちょうどを通信律速にする
        return max(1, math.ceil(1 + x) - 1)
    if kind == "nearest":
        return max(1, round(1 + x))
    if kind == "ceil":
        return max(1, math.ceil(1 + x))
    if kind == "zero":  # n = 1 も b* と比べる
        return math.floor((1 + x) * (1 + TOL)) if x >= 1 else 0
    return max(1, math.floor((1 + x) * (1 + TOL)))


def cases(r):
    """(説明, hw, tokens, axes, form): ちょうど・わずかに下・端数（0.5 より上と下）・n = 1 の場面。"""
    tpu3 = hidden_chip(r, "TPU", "隠しの TPU（3 次元トーラス）", torus_axes=3)
    tpu2 = hidden_chip(r, "TPU", "隠しの TPU（2 次元トーラス）", torus_axes=2)
    gpu = hidden_chip(r, "GPU", "隠しの GPU")
    m = int(r.integers(20, 60))
    tokens = case_tokens(tpu3, tpu2, gpu, m)
    return [
        ("隠しの TPU（1 軸、スケーリングブックの式、通信と計算がちょうど等しい）", tpu3, tokens[0], 1, "book"),
        ("隠しの TPU（3 軸、ステップ全体の式、等しくなる点のわずかに下）", tpu3, tokens[1], 3, "step"),
        ("隠しの GPU（スケーリングブックの式、端数 0.7）", gpu, tokens[2], 2, "book"),
        ("隠しの TPU（3 軸、スケーリングブックの式、端数 0.3）", tpu3, tokens[3], 3, "book"),
        ("隠しの TPU（2 軸、ステップ全体の式、端数 0.6）", tpu2, tokens[4], 2, "step"),
        ("隠しの GPU（ステップ全体の式、通信と計算がちょうど等しい）", gpu, tokens[5], 1, "step"),
        ("全体のトークンが b* の半分", tpu2, tokens[6], 1, "book"),
    ]


@recorded
def case_tokens(tpu3, tpu2, gpu, m: int) -> list:
    """cases の場面ごとの全体のトークン数（場面の作り方が答えの式を言うので、学習者版では記録した値）。"""
    return [
        # ちょうど: 相対 1e-12 だけ少ないトークン（許容 1e-9 の内なので計算律速。許容なしの比較では 1 個少なくなる）
        (m - 1) * dp_critical_batch(tpu3, 1, "book") * (1 - 1e-12),
        (m + 6) * dp_critical_batch(tpu3, 3, "step") * (1 - 1e-6),
        (m + 2.7) * dp_critical_batch(gpu, 2, "book"),
        # 端数 0.3: 四捨五入は切り捨てと同じ、切り上げとは違う
        (m + 4.3) * dp_critical_batch(tpu3, 3, "book"),
        (m + 9.6) * dp_critical_batch(tpu2, 2, "step"),
        (m - 3) * dp_critical_batch(gpu, 1, "step"),
        0.5 * dp_critical_batch(tpu2, 1, "book"),
    ]


_TIE = "通信と計算がちょうど等しい（相対 1e-9 以内の）n を通信律速としています。ちょうどは計算律速に数えます。"
_MISTAKES = (
    ("s1", "(n − 1)/n を 1 としたので、答えのチップが 1 個少なくなっています。n チップの all-reduce は 2·(n − 1)/n·2P バイトを送ります。"),
    ("strict", _TIE),
    ("no_tolerance", _TIE),
    ("nearest", "1 + tokens / b* を四捨五入しています。条件を満たす最大の整数なので、切り捨てます。"),
    ("ceil", "1 + tokens / b* を切り上げています。条件を満たす最大の整数なので、切り捨てます。"),
    ("first_fail", "どの場面でもチップが 1 個多く、条件を満たさなくなった最初の n を返しています。返すのはその 1 つ前の n です。"),
    ("gpu_axes", "GPU の行でも帯域を axes 倍にしています。GPU は NVLink の出口が 1 つなので、axes によらず axis_bw です。"),
    ("form", "スケーリングブックの式とステップ全体の式を取り違えています。"
             "スケーリングブックの式は逆伝播の 4·b·P、ステップ全体の式は 6·b·P と比べます。"),
    ("one_axis", "axes を見ずに 1 軸の帯域で割っています。TPU は axes 本の軸を同時に使い、帯域は axes 倍です。"),
    ("hbm", "通信の秒を HBM の帯域 hbm_bw で割っています。勾配の all-reduce はチップ間の axis_bw で割ります。"),
    ("f32", "勾配を 4 バイトで数えたので、b* が 2 倍になっています。勾配は bf16 の 2 バイト（2P バイト）で送ります。"),
    ("zero", "全体のトークンが b* に届かないとき 0 を返しています。n = 1 は通信がないので、いつも計算律速でチップ 1 個です。"),
)


@exercise("6.7-1", "max_dp_chips")
def check_max_dp_chips(fn):
    r = rng(1)
    todo = cases(r)
    # 参照の値と誤りの答えはすべて学習者を呼ぶ前に（学習者版では、作るときに記録した値を引く）
    want = [reference(hw, t, a, f) for _, hw, t, a, f in todo]
    slips = [([wrong(hw, t, a, f, kind) for _, hw, t, a, f in todo], message) for kind, message in _MISTAKES]
    got = []
    for label, hw, tokens, axes, form in todo:
        out = call(fn, hw, tokens, axes, form)
        value = number(out, f"{label}: 返したチップの数")
        if value != int(value):
            raise Fail(f"{label}: チップの数が {value:g} でした。n は整数なので、条件を満たす最大の整数を返します。")
        got.append(int(value))
    if got == want:
        k = next(k for k, c in enumerate(todo) if c[3:] == (1, "book"))  # 既定値 axes=1, form="book" と同じ場面
        label, hw, tokens = todo[k][:3]
        default = number(call(fn, hw, tokens), f"{label}: axes と form を省いて返したチップの数")
        if default != want[k]:
            raise Fail(f"{label}: 既定値で呼ぶと {default:g} 個で、axes=1, form='book' を渡したときの {want[k]} 個と"
                       "違います。既定値は axes=1、form='book' のままにします。")
        return f"隠しの TPU と GPU の行の {len(todo)} つの場面で、最大のチップの数が一致しました（ちょうどと n = 1 を含みます）。"
    for answers, message in slips:  # ほかの誤りの並びと重なるときは名指ししない（同じ文どうしは重なってよい）
        if got == answers and all(a != answers or text == message for a, text in slips):
            raise Fail(message)
    i = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
    label, hw, tokens, axes, form = todo[i]
    b_star = dp_critical_batch(hw, axes, form)
    if got[i] > want[i]:
        return_cause = f"{got[i]} 個では 1 チップ {tokens / got[i]:,.0f} トークンで通信律速なので"
    else:
        return_cause = f"{want[i]} 個でも 1 チップ {tokens / want[i]:,.0f} トークンで計算律速なので"
    raise Fail(f"{label}: b* は {b_star:,.0f} トークンで、{return_cause}、{want[i]} 個のはずが {got[i]} 個でした。")

