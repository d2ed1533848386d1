"""6.7-5 choose_layout: 参照と別の正解（表にしてから並べ替える）は通り、学習者の試しで通ってしまった誤り
（< で収まる、タイブレークが逆、FSDP を DP のバイトで、DP の bf16 を忘れる、s = 1、TP を L 層で、hbm_bw で割る、
候補の順が逆）と、メモリを見ない、片方向の帯域、すべての軸の帯域、重ねずに足す答えは、それぞれの言葉で落ちる。"""
import pytest

from ch6 import cost
from tests.checkhelp import boom, expect, not_done


def table(model, hw, n, *, s_one=False, fsdp_like_dp=False, dp_bytes=2, tp_pairs=None, bw="axis_bw", serial=False):
    p, d, layers, tokens, act = (model[k] for k in ("params", "width", "layers", "tokens", "act"))
    w = getattr(hw, bw)
    s = 1.0 if s_one else (n - 1) / n
    fwd, bwd = 2 * tokens * p / n / hw.flops, 4 * tokens * p / n / hw.flops
    ag = 2 * p * s / w
    ar_dp = 2 * dp_bytes * p * s / w
    pairs = layers - 1 if tp_pairs is None else tp_pairs(layers)
    tp = 2 * pairs * 2 * (2 * tokens * d) * s / w
    both = (lambda a, b: a + b) if serial else max
    act_split = act * tokens / n * d * layers
    fsdp = fwd + both(bwd, ar_dp) if fsdp_like_dp else both(fwd, ag) + both(bwd, 2 * ag)
    return {
        "DP": (16 * p + act_split, fwd + both(bwd, ar_dp)),
        "FSDP": (16 * p / n + act_split, fsdp),
        "TP": (16 * p / n + act * tokens * d * layers, fwd + bwd + tp),
    }


def make(strict=False, more_memory=False, order=("DP", "FSDP", "TP"), memory=True, tol=1e-9, **kw):
    def choose_layout(model, hw, n):
        rows = table(model, hw, n, **kw)
        best = None
        for name in order:
            mem, t = rows[name]
            if memory and not (mem < hw.hbm_bytes if strict and tol else mem <= hw.hbm_bytes * (1 + tol)):
                continue
            if best is None:
                best = name
                continue
            bm, bt = rows[best]
            if abs(t - bt) <= 1e-9 * bt:
                if (mem > bm * (1 + 1e-9)) if more_memory else (mem < bm * (1 - 1e-9)):
                    best = name
            elif t < bt:
                best = name
        return best
    return choose_layout


def ref(model, hw, n):
    """解答と同じ: ch6.cost の関数で表を作り、規則どおりに選ぶ。"""
    p, d, layers, tokens, act = (model[k] for k in ("params", "width", "layers", "tokens", "act"))
    w = hw.axis_bw
    fwd, bwd = 2 * tokens * p / n / hw.flops, 4 * tokens * p / n / hw.flops
    ag = cost.all_gather_time(2 * p, n, w)
    rows = {
        "DP": (cost.zero_memory_bytes(p, n, 0) + act * tokens / n * d * layers,
               fwd + cost.step_time(bwd, cost.all_reduce_time(2 * p, n, w)).overlapped),
        "FSDP": (cost.zero_memory_bytes(p, n, 3) + act * tokens / n * d * layers,
                 cost.step_time(fwd, ag).overlapped
                 + cost.step_time(bwd, ag + cost.reduce_scatter_time(2 * p, n, w)).overlapped),
        "TP": (16 * p / n + act * tokens * d * layers,
               cost.step_time(fwd + bwd, 2 * (layers - 1) * cost.all_reduce_time(2 * tokens * d, n, w)).serial),
    }
    fits = [k for k in rows if rows[k][0] <= hw.hbm_bytes * (1 + 1e-9)]
    if not fits:
        return None
    fastest = min(rows[k][1] for k in fits)
    tied = [k for k in fits if rows[k][1] <= fastest * (1 + 1e-9)]
    return min(tied, key=lambda k: (round(rows[k][0] / rows[tied[0]][0], 9), tied.index(k)))


def sorted_rows(model, hw, n):
    # 別の正解: (秒, メモリ, 順番) を丸めて並べ替える
    rows = table(model, hw, n)
    keyed = sorted((float(f"{t:.9e}"), float(f"{m:.9e}"), i, k) for i, (k, (m, t)) in enumerate(rows.items())
                   if m <= hw.hbm_bytes * (1 + 1e-9))
    return keyed[0][3] if keyed else None


@pytest.mark.parametrize("fn", [ref, make(), sorted_rows], ids=["cost-api", "by-hand", "sorted"])
def test_correct(fn):
    expect("6.7-5", fn, "pass", "正解", "n = 1", "容量ちょうど")


@pytest.mark.parametrize(("fn", "words"), [
    (make(strict=True), ("容量ちょうど（相対 1e-9 以内）", "収まらない")),
    (make(strict=True, tol=0.0), ("容量ちょうど（相対 1e-9 以内）",)),  # <= でも許容なしなら同じ誤り
    (make(more_memory=True), ("メモリの多いほう",)),
    (make(fsdp_like_dp=True), ("FSDP の通信を DP と同じ", "順伝播でも")),
    (make(dp_bytes=4), ("4 バイト", "bf16")),
    (make(s_one=True), ("(n − 1)/n を 1", "n = 1 なら通信はありません")),
    (make(tp_pairs=lambda layers: layers), ("L 層で", "L − 1")),
    (make(bw="hbm_bw"), ("hbm_bw", "axis_bw")),
    (make(order=("TP", "FSDP", "DP")), ("TP・FSDP・DP の順",)),
    (make(memory=False), ("メモリを見ずに",)),
    (make(bw="link_oneway"), ("片方向 link_oneway",)),
    (make(bw="all_axes_bw"), ("all_axes_bw",)),
    (make(serial=True), ("計算に足して", "max")),
], ids=["strict", "no-tolerance", "tie-break-reversed", "fsdp-dp-bytes", "dp-f32", "s-one", "tp-L", "hbm", "order-reversed",
        "no-memory", "oneway", "all-axes", "serial"])
def test_named_slips(fn, words):
    expect("6.7-5", fn, "fail", *words)


def test_other_wrong_answers():
    expect("6.7-5", lambda m, hw, n: "None" if ref(m, hw, n) is None else ref(m, hw, n), "fail", "文字列ではなく None")
    expect("6.7-5", lambda m, hw, n: ref(m, hw, n) or "DP", "fail", "収まらないので、None のはずが DP")
    expect("6.7-5", lambda m, hw, n: "FSDP", "fail", "のはずが FSDP でした")
    expect("6.7-5", lambda m, hw, n: "DP", "fail", "同じ", "メモリは FSDP のほうが少ない")
    expect("6.7-5", lambda m, hw, n: "TP", "fail", "見積もりは TP が")
    expect("6.7-5", lambda m, hw, n: "DP" if n == 16 and ref(m, hw, n) == "FSDP" else ref(m, hw, n), "fail",
           "を超えるので")
    expect("6.7-5", lambda m, hw, n: None, "fail", "None ではなく")
    expect("6.7-5", lambda m, hw, n: "dp", "fail", "方式の名前のはずが 'dp'")
    expect("6.7-5", lambda m, hw, n: 3, "fail", "int でした")


def test_not_done_and_learner_error():
    expect("6.7-5", not_done, "not_done", "まだ解答されていません")
    expect("6.7-5", boom, "error", "ZeroDivisionError")
