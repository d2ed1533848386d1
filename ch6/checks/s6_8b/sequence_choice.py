"""6.8b-2 choose_sequence_parallel: リングと Ulysses のどちらが速いか（リングの通信は計算と重なり、Ulysses は重ならない）。

隠しのチップの行で、リングが計算に隠れる場面、Ulysses が勝つ場面、トーラスでリングが勝つ通信律速の場面、n = 1、
割り切れないヘッド、相対 1e-9 の内側の同点と、そのすぐ外側を確かめます。
"""
from __future__ import annotations

import math

from ...checking import Fail, call, exercise
from ...cost import step_time
from ...recorded import recorded
from ..chips import hidden_chip, number, with_values
from .comm_times import reference as comm_reference
from .common import exercise_rng

TIE = 1e-9
WIDE_TIE = 1e-6      # 名指しする誤り: 同点の幅を広くとりすぎる（同点のすぐ外側の場面は相対 1e-7）
RTOL = 1e-6
METHODS = ("ring", "ulysses")


@recorded
def flop_count(seq_len, heads, head_dim) -> float:
    """アテンションの FLOP（全デバイスの合計）。"""
    return 4 * seq_len**2 * heads * head_dim


@recorded
def reference(hw, n, seq_len, heads, head_dim, nbytes, kind: str = "") -> tuple[str, float]:
    """正しい (方式, 秒)（kind を渡すと、名指しする誤りの答え）。"""
    flops = flop_count(seq_len, heads, head_dim) / (2 if kind == "flops2" else 1)
    # 必須: T_math = 4·L²·H·d / n / flops、リングは step_time(...).overlapped、Ulysses は .serial、
    #       差が大きいほうの 1e-9 倍以下なら同点で "ring"、Ulysses が使えないときも "ring"。
    # 自由: タプルでもリストでも、attention_comm_times を呼んでも呼ばなくても。
    t_math = flops / {"no_div_n": 1, "div_n_twice": n * n}.get(kind, n) / hw.flops
    comm = comm_reference(hw, n, seq_len, heads, head_dim, nbytes, kind="no_inf" if kind == "no_heads" else "")
    ring_t, uly_t = step_time(t_math, comm["ring"]), step_time(t_math, comm["ulysses"])
    ring, uly = ring_t.overlapped, uly_t.serial
    if kind == "both_serial":
        ring = ring_t.serial
    elif kind == "both_overlap":
        uly = uly_t.overlapped
    elif kind == "swapped":
        ring, uly = ring_t.serial, uly_t.overlapped
    elif kind == "comm_only":
        ring, uly = comm["ring"], comm["ulysses"]
    if kind == "tie_ulysses":
        pick_ulysses = uly <= ring * (1 + TIE)
    elif kind == "no_tol":
        pick_ulysses = uly < ring
    elif kind == "wide_tol":
        pick_ulysses = ring - uly > WIDE_TIE * ring
    else:
        pick_ulysses = ring - uly > TIE * ring
    if kind == "math_seconds":
        return ("ulysses" if pick_ulysses else "ring"), t_math
    if kind == "other_seconds":  # 方式は合っているが、選ばなかった方式の秒（使えない Ulysses なら選んだ方式の秒）
        other = ring if pick_ulysses else uly
        return ("ulysses" if pick_ulysses else "ring"), (other if math.isfinite(other) else ring)
    return ("ulysses", uly) if pick_ulysses else ("ring", ring)


@recorded
def _scene_flops(hw, n, seq_len, heads, head_dim, nbytes, scene: str) -> float:
    """隠しの場面 scene（計算律速、通信律速、同点、同点のすぐ外側）になるように選んだチップの flops。"""
    comm = comm_reference(hw, n, seq_len, heads, head_dim, nbytes)
    t_math = {"compute": 2 * comm["ring"], "comm": comm["ring"] / 1.2,
              "tie": comm["ring"] * (1 - 1e-12) - comm["ulysses"],
              "near_tie": comm["ring"] * (1 - 1e-7) - comm["ulysses"]}[scene]
    return flop_count(seq_len, heads, head_dim) / n / t_math


def cases(r):
    """(説明, hw, n, seq_len, heads, head_dim, bytes_per_value)。"""
    tpu = hidden_chip(r, "TPU", "隠しの TPU", torus_axes=3)
    gpu = hidden_chip(r, "GPU", "隠しの GPU")
    # 計算律速: リングの通信は計算の半分で、計算の裏に隠れる
    n, seq, heads, dim = 4, 4 * 16384, 16, 128
    out = [
        ("隠しの TPU・n = 4・計算律速", with_values(tpu, flops=_scene_flops(tpu, n, seq, heads, dim, 2, "compute")),
         n, seq, heads, dim, 2),
        ("隠しの GPU・n = 8・短い系列", gpu, 8, 8 * 256, 16, 128, 2),
        ("隠しの GPU・n = 1", gpu, 1, 4096, 8, 128, 2),
        ("隠しの GPU・n = 6・ヘッド 8（割り切れない）", gpu, 6, 6 * 256, 8, 128, 2),
    ]
    # トーラスで通信律速だが、リングの通信が計算の 1.2 倍なのでリングが勝つ
    n, seq, heads, dim = 6, 6 * 2048, 12, 128
    out.append(("隠しの TPU・n = 6・通信律速", with_values(tpu, flops=_scene_flops(tpu, n, seq, heads, dim, 2, "comm")),
                n, seq, heads, dim, 2))
    # 同点（Ulysses が相対 1e-12 だけ小さい: 許容の内側）と、そのすぐ外側（相対 1e-7）
    n, seq, heads, dim = 5, 5 * 1024, 10, 64
    for label, scene in (("同点", "tie"), ("同点のすぐ外側", "near_tie")):
        out.append((f"隠しの GPU・n = 5・{label}", with_values(gpu, flops=_scene_flops(gpu, n, seq, heads, dim, 4, scene)),
                    n, seq, heads, dim, 4))
    return out


_MISTAKES = (
    ("both_serial", "リングも和（serial）で見積もっています。リングの通信は次のブロックの計算と重なるので overlapped（max）です。"),
    ("both_overlap", "Ulysses も max（overlapped）で見積もっています。all-to-all はアテンションの前後にあり重ならないので serial（和）です。"),
    ("swapped", "リングと Ulysses の見積もりが逆です。リングは overlapped（max）、Ulysses は serial（和）です。"),
    ("comm_only", "通信の秒だけで比べています。リングは通信が計算に隠れるので、計算の秒を含めた step_time で比べます。"),
    ("tie_ulysses", "同点で \"ulysses\" を選んでいます。差が相対 1e-9 以下なら同点で、\"ring\" を選びます（n = 1 も同点です）。"),
    ("no_tol", "許容なしで比べたので、相対 1e-9 の内側の差で \"ulysses\" を選んでいます。その差は同点で \"ring\" です。"),
    ("wide_tol", "同点の幅が広すぎて、相対 1e-7 の差でも \"ring\" を選んでいます。同点は差が大きいほうの 1e-9 倍以下のときだけです。"),
    ("flops2", "アテンションの FLOP を半分で数えています。QK^T と PV がそれぞれ 2·L²·d なので、合わせて 4·L²·H·d です。"),
    ("no_div_n", "計算の秒を n で割っていません。FLOP は n 個のデバイスが等しく分担するので、1 デバイスの秒は 1/n です。"),
    ("div_n_twice", "計算の秒を n で 2 回割っています（ヘッドを n で割り、さらに n で割るなど）。1 デバイスの秒は全体の 1/n です。"),
    ("no_heads", "ヘッドの数が n で割り切れないのに Ulysses を選んでいます。そのときは使えないので \"ring\" です。"),
    ("math_seconds", "方式は合っていますが、秒が計算の秒だけです。選んだ方式の step_time の見積もり（max か和）を返します。"),
    ("other_seconds", "方式は合っていますが、秒が選ばなかった方式の見積もりです。選んだ方式の秒を返します。"),
)


def collect(fn, todo) -> list[tuple[str, float]]:
    got = []
    for label, hw, n, seq_len, heads, dim, nbytes in todo:
        out = call(fn, hw, n, seq_len, heads, dim, nbytes)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            shown = f"{len(out)} 要素の {type(out).__name__}" if isinstance(out, (tuple, list)) else type(out).__name__
            raise Fail(f"{label}: (方式, 秒) の 2 つ組を返してください。{shown} が返りました。")
        method, seconds = out
        if method not in METHODS:
            raise Fail(f"{label}: 方式は \"ring\" か \"ulysses\" のはずが、{method!r} が返りました。")
        got.append((method, number(seconds, f"{label}: 秒")))
    return got


def same(got: tuple[str, float], want: tuple[str, float]) -> bool:
    return got[0] == want[0] and math.isclose(got[1], want[1], rel_tol=RTOL, abs_tol=1e-30)


@exercise("6.8b-2", "choose_sequence_parallel")
def check_choose_sequence_parallel(fn):
    todo = cases(exercise_rng(2))
    # 参照の値と誤りの答えはすべて学習者を呼ぶ前に（学習者版では、作るときに記録した値を引く）
    want = [reference(*case[1:]) for case in todo]
    alts = [[reference(*case[1:], kind=kind) for case in todo] for kind, _ in _MISTAKES]
    got = collect(fn, todo)
    if all(same(g, w) for g, w in zip(got, want)):
        wins = sum(w[0] == "ulysses" for w in want)
        return (f"隠しの {len(todo)} 場面（同点と n = 1 を含む）で方式と秒が一致しました"
                f"（Ulysses {wins} 回、リング {len(todo) - wins} 回）。")
    for (_, message), alt in zip(_MISTAKES, alts):
        if all(same(g, a) for g, a in zip(got, alt)):
            raise Fail(message)
    i = next(i for i, (g, w) in enumerate(zip(got, want)) if not same(g, w))
    label = todo[i][0]
    if got[i][0] != want[i][0]:
        raise Fail(f"{label}: \"{want[i][0]}\" を選ぶはずが \"{got[i][0]}\" でした。"
                   "計算の秒、2 つの通信の秒、重なるかどうかを順に確かめてください。")
    raise Fail(f"{label}: 方式は合っていますが、秒は {want[i][1]:.4g} のはずが {got[i][1]:.4g} でした。")
