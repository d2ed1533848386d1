"""6.11b-2 max_hidden_ways: collective matmul（all-gather の形）の通信が行列積の裏に隠れる、最大の並列数。

条件は N/n ≥ b·C/(2W)（W は one なら link_oneway、two なら axis_bw）。答えは 1..n_max のうち条件を満たす最大の n で、
満たすものがなければ 1（1 デバイスは送らない）。差が相対 1e-9 以内なら等しいとみなし、等しいときは隠れる。
隠しのチップの行（ch6.checks.chips.hidden_chip: TPU と GPU）で、一方向と双方向、bf16・float32・int8、上限 n_max が
効く場面と効かない場面、しきい値とちょうど等しくなる場面を確かめます。境目は 2 つ: しきい値が整数 4000 でちょうど
等しい場面と、しきい値 2e14/7e10 = 2857.14…が浮動小数で丸められ、20000 / 7 と最後の桁で違う場面（20000 // しきい値 も
int(20000 / しきい値) も 6 になる。正しくは 7）。後者と同じチップで幅 20001 なら、整数の割り算 20001 // 7 = 2857 が
しきい値を下回る（幅を n_out // n で求めた答えだけが 6）。
"""
from __future__ import annotations

import math

from ...checking import Fail, call, exercise
from ...recorded import input_devices, recorded
from ..chips import hidden_chip, with_values
from .common import as_int, exercise_rng

TOL = 1e-9


@recorded
def reference(hw, n_out, n_max, bytes_per_value=2, direction="one", kind=""):
    """正しい答え（kind を渡すと、名指しする誤りの答え）。"""
    if kind == "hbm":
        bw = hw.hbm_bw
    elif kind == "swapped":
        bw = hw.axis_bw if direction == "one" else hw.link_oneway
    elif kind == "always_oneway" or (direction == "one" and kind != "always_axis"):
        bw = hw.link_oneway
    elif kind == "doubled":
        bw = 2 * hw.link_oneway
    else:
        bw = hw.axis_bw
    b = 2 if kind == "bytes_fixed" else bytes_per_value
    threshold = b * hw.flops / ((1 if kind == "no_factor2" else 2) * bw)
    if kind == "no_divide":
        return n_max if n_out >= threshold * (1 - TOL) else 1
    if kind == "int_width":  # 1 デバイスの幅を整数の割り算 n_out // n で求める
        return max([1] + [k for k in range(1, n_max + 1) if n_out // k >= threshold * (1 - TOL)])
    if kind == "no_tol":  # 許容差なしの切り捨て（n_out // しきい値、cost.max_chunks_hidden と同じ）
        return max(1, min(n_max, int(n_out // threshold)))
    ratio = n_out / threshold
    if kind == "strict":
        best = math.ceil(ratio * (1 - TOL)) - 1
    elif kind == "ceil":
        best = math.ceil(ratio * (1 - TOL))
    elif kind == "round":
        best = round(ratio)
    else:
        best = math.floor(ratio * (1 + TOL))
    if kind != "no_cap":
        best = min(best, n_max)
    if kind == "no_top":  # range(1, n_max): n_max 自身を調べない
        best = min(best, n_max - 1)
    if kind == "first_fail":  # 隠れない最小の n（どれも隠れれば n_max）
        best = n_max if best >= n_max else best + 1
    return best if kind == "zero" else max(1, best)


def cases(rng, n_dev: int):
    """(説明, hw, n_out, n_max, bytes_per_value, direction)。"""
    tpu = hidden_chip(rng, "TPU", "隠しの TPU", torus_axes=2)
    gpu = hidden_chip(rng, "GPU", "隠しの GPU")
    tie = with_values(tpu, name="隠しの TPU（境目）", flops=2e14, ici_link_oneway=5e10)  # 一方向のしきい値 4000
    # 一方向のしきい値 2e14/7e10 = 2857.142857…（浮動小数では真の値より少し大きい）: 20000 / 7 とちょうど等しいはず
    odd = with_values(tpu, name="隠しの TPU（整数でないしきい値）", flops=2e14, ici_link_oneway=7e10)
    t1 = tpu.flops / tpu.link_oneway          # bf16 の一方向のしきい値
    g1 = gpu.flops / gpu.link_oneway
    big = 8 * n_dev + 24
    return [
        ("隠しの TPU・一方向・bf16", tpu, int(7.6 * t1), big, 2, "one"),
        ("隠しの TPU・双方向・bf16", tpu, int(7.6 * t1), big, 2, "two"),
        ("隠しの TPU・双方向・float32", tpu, int(9.3 * t1), big, 4, "two"),
        ("隠しの TPU・一方向・int8", tpu, int(3.4 * t1), big, 1, "one"),
        ("隠しの GPU・双方向・bf16", gpu, int(5.7 * g1), big, 2, "two"),
        ("隠しの GPU・一方向・bf16", gpu, int(2.5 * g1), big, 2, "one"),
        (f"隠しの TPU・双方向・上限 {n_dev + 2}", tpu, int(40.5 * t1), n_dev + 2, 2, "two"),
        ("隠しの TPU（境目）・一方向", tie, 12_000, big, 2, "one"),
        ("隠しの TPU（整数でないしきい値）・一方向・幅 20000", odd, 20_000, big, 2, "one"),
        ("隠しの TPU（整数でないしきい値）・一方向・幅 20001", odd, 20_001, big, 2, "one"),
        ("隠しの TPU・幅がしきい値より狭い", tpu, int(0.6 * t1), big, 2, "one"),
    ]


MISTAKES = (
    ("swapped", "一方向で axis_bw、双方向で link_oneway を使っています。逆です。"
                "一方向のリングはリンク 1 本の片方向 link_oneway、双方向のリングは両方向の axis_bw で送ります。"),
    ("always_oneway", "双方向でも片方向のリンク link_oneway で割っています。双方向のリングは両方向の axis_bw で送れます。"),
    ("always_axis", "一方向でも両方向の帯域 axis_bw で割っています。一方向のリングが使うのはリンク 1 本の片方向 link_oneway です。"),
    ("doubled", "双方向で link_oneway を 2 倍にしています。GPU の NVLink は出口が 1 つなので、hw.axis_bw を使います。"),
    ("hbm", "HBM の帯域 hbm_bw で割っています。チップ間の送信は link_oneway か axis_bw で割ります。"),
    ("bytes_fixed", "1 値のバイトを 2 と決めています。送るバイトは bytes_per_value に比例します。"),
    ("no_factor2", "行列積の FLOP を m·k·n と数えています。掛け算と足し算で 2·m·k·n なので、しきい値は b·C/(2W) です。"),
    ("no_divide", "出力の幅 n_out を並列数で割らずに比べています。1 デバイスの幅 n_out / n がしきい値以上なら隠れます。"),
    ("int_width", "1 デバイスの幅を整数の割り算 n_out // n で求めています。幅は n_out / n（実数の割り算）で、"
                  "しきい値は整数とは限らないので、切り捨てた幅がしきい値を下回ります。"),
    ("no_tol", "しきい値とちょうど等しくなる境目で、答えが 1 小さくなりました。浮動小数のしきい値は最後の桁が丸められるので、"
               "// や int() で切り捨てると 1 つ下がります。差が相対 1e-9 以内なら等しいとみなします。"),
    ("strict", "しきい値とちょうど等しい幅を、隠れないとしています。T_comm ≤ T_math なら隠れるので、等しいときも含めます。"),
    ("ceil", "n_out / しきい値 を切り上げています。それより大きい n では 1 デバイスの幅がしきい値を下回るので、切り捨てます。"),
    ("round", "n_out / しきい値 を四捨五入しています。条件を満たす最大の整数は切り捨てです。"),
    ("no_cap", "上限 n_max を超える並列数を返しています。答えは 1 から n_max の中から選びます。"),
    ("no_top", "上限の n_max 自身を調べていません。n を 1 から調べるなら、range(1, n_max + 1) で n_max まで調べます。"),
    ("first_fail", "隠れない最小の n を返しています。隠れる最大の n はその 1 つ前です。"),
    ("zero", "幅がしきい値より狭いとき 0 を返しています。1 デバイスなら送らないので、答えは 1 以上です。"),
)


@exercise("6.11b-2", "max_hidden_ways")
def check_max_hidden_ways(fn):
    todo = cases(exercise_rng(2), input_devices())
    # 参照の値はすべて学習者を呼ぶ前に（学習者版では、作るときに記録した値を引く）
    want = [reference(*case[1:]) for case in todo]
    alts = [[reference(*case[1:], kind=kind) for case in todo] for kind, _ in MISTAKES]
    got = []
    for label, hw, n_out, n_max, b, direction in todo:
        got.append(as_int(call(fn, hw, n_out, n_max, b, direction), label))
    if got == want:
        label, hw, n_out, n_max, _, _ = todo[0]  # bf16・一方向: 定義の既定値で呼んだ答えも同じはず
        default = as_int(call(fn, hw, n_out, n_max), f"{label}（bytes_per_value と direction を省いて呼んだ結果）")
        if default != want[0]:
            raise Fail(f"{label} で bytes_per_value と direction を省いて呼ぶと {default} 並列、2 と \"one\" を渡すと "
                       f"{want[0]} 並列です。定義の既定値は bytes_per_value=2, direction=\"one\" のままにします。")
        return (f"隠しのチップの行で {len(todo)} 通り（一方向と双方向、GPU、上限、ちょうど等しい境目）が一致しました"
                f"（例: {todo[1][0]} → {want[1]} 並列）。")
    for (_, message), alt in zip(MISTAKES, alts):
        if got == alt:
            raise Fail(message)
    i = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
    label = todo[i][0]
    if got[i] < 1:
        raise Fail(f"{label}: 並列数は 1 以上のはずが {got[i]} でした。1 デバイスなら送らないので、答えは 1 以上です。")
    if got[i] > todo[i][3]:
        raise Fail(f"{label}: 上限 n_max = {todo[i][3]} を超える {got[i]} 並列を返しています。答えは 1 から n_max の中から選びます。")
    raise Fail(f"{label}: 答えは {want[i]} 並列のはずが {got[i]} でした。帯域と 1 値のバイト、n で割る位置を確かめてください。")
