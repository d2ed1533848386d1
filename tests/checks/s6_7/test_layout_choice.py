"""6.7-5 choose_layout: 参照と別の正解（表にしてから 1 列ずつ絞る）は通り、学習者の試しで通ってしまった誤り
（< で収まる、タイブレークが逆、FSDP を DP のバイトで、DP の bf16 を忘れる、s = 1、TP を L 回、hbm_bw で割る、
候補の順が逆）と、許容なし、上界を見ずにメモリで決める、上界もメモリも見ずに順番で決める、見積もりを許容なしで比べる、
メモリを見ない、片方向の帯域、すべての軸の帯域、重ねずに足す、TP の活性値を 1/n・TP の状態を 16P・活性値を 2 倍で
数える、TP の通信を all-gather の秒や max で見積もる、FSDP の順伝播の all-gather を足す答えは、それぞれの言葉で落ちる。"""
import re
from pathlib import Path

import pytest

from ch6 import cost
from ch6.checks.s6_7 import layout_choice
from tests.checkhelp import boom, expect, not_done


def table(model, hw, n, *, s_one=False, fsdp_like_dp=False, dp_bytes=2, tp_count=None, bw="axis_bw", serial=False,
          tp_act_div=False, tp_state_full=False, act_bytes=1, tp_gather=False, tp_overlap=False, fsdp_fwd_serial=False,
          math_whole=False, tp_weights=False, dp_upper=False, fsdp_no_bwd=False):
    """方式 -> (メモリ, 見積もり, 重ならないときの上界)。キーワードは誤りの答えを作るため。"""
    p, d, layers, tokens, act = (model[k] for k in ("params", "width", "layers", "tokens", "act"))
    act = act * act_bytes
    w = getattr(hw, bw)
    s = 1.0 if s_one else (n - 1) / n
    share = 1 if math_whole else n
    fwd, bwd = 2 * tokens * p / share / hw.flops, 4 * tokens * p / share / hw.flops
    ag = 2 * p * s / w
    ar_dp = 2 * dp_bytes * p * s / w
    tp_bytes = 2 * p if tp_weights else 2 * tokens * d
    tp = (layers - 1 if tp_count is None else tp_count(layers)) * (1 if tp_gather else 2) * tp_bytes * s / w
    both = (lambda a, b: a + b) if serial else max
    act_split = act * tokens / n * d * layers
    if fsdp_like_dp:
        fsdp = (fwd + both(bwd, ar_dp), fwd + bwd + ar_dp)
    else:
        back = ag if fsdp_no_bwd else 2 * ag
        fsdp = ((fwd + ag if fsdp_fwd_serial else both(fwd, ag)) + both(bwd, back), fwd + bwd + ag + back)
    tp_mem = (16 * p if tp_state_full else 16 * p / n) + act * tokens * d * layers / (n if tp_act_div else 1)
    return {
        "DP": (16 * p + act_split, fwd + bwd + ar_dp if dp_upper else fwd + both(bwd, ar_dp), fwd + bwd + ar_dp),
        "FSDP": (16 * p / n + act_split, *fsdp),
        "TP": (tp_mem, max(fwd + bwd, tp) if tp_overlap else fwd + bwd + tp, fwd + bwd + tp),
    }


def make(strict=False, tie="exposed", order=("DP", "FSDP", "TP"), memory=True, tol=1e-9, tie_tol=1e-9, **kw):
    """tie: 見積もりが同じときの選び方（"exposed" が規則、"more_exposed" は逆、"memory" は上界を見ずにメモリ、
    "order" は上界もメモリも見ずに順番）。tie_tol は秒とメモリを同じとみなす幅（0 なら許容なし）。"""
    def same(a, b):
        return abs(a - b) <= tie_tol * max(a, b)

    def choose_layout(model, hw, n):
        rows = table(model, hw, n, **kw)
        best = None
        for name in order:
            mem, t, u = rows[name]
            if memory and not (mem < hw.hbm_bytes if strict and tol else mem <= hw.hbm_bytes * (1 + tol)):
                continue
            if best is None:
                best = name
                continue
            bm, bt, bu = rows[best]
            if not same(t, bt):
                better = t < bt
            elif tie == "order":
                better = False
            elif tie != "memory" and not same(u, bu):
                better = (u > bu) if tie == "more_exposed" else (u < bu)
            else:
                better = not same(mem, bm) and mem < bm
            if better:
                best = name
        return best
    return choose_layout


def ref(model, hw, n):
    """解答と同じ: ch6.cost の関数で表を作り、(見積もり, 上界, メモリ) を丸めて比べる。"""
    p, d, layers, tokens, act = (model[k] for k in ("params", "width", "layers", "tokens", "act"))
    w = hw.axis_bw
    fwd, bwd = 2 * tokens * p / n / hw.flops, 4 * tokens * p / n / hw.flops
    ag = cost.all_gather_time(2 * p, n, w)
    rs = cost.reduce_scatter_time(2 * p, n, w)
    ar = cost.all_reduce_time(2 * p, n, w)
    tp = (layers - 1) * cost.all_reduce_time(2 * tokens * d, n, w)
    rows = {
        "DP": (cost.zero_memory_bytes(p, n, 0) + act * tokens / n * d * layers,
               fwd + cost.step_time(bwd, ar).overlapped, fwd + bwd + ar),
        "FSDP": (cost.zero_memory_bytes(p, n, 3) + act * tokens / n * d * layers,
                 cost.step_time(fwd, ag).overlapped + cost.step_time(bwd, ag + rs).overlapped, fwd + bwd + 2 * ag + rs),
        "TP": (16 * p / n + act * tokens * d * layers, cost.step_time(fwd + bwd, tp).serial, fwd + bwd + tp),
    }
    fits = [k for k in rows if rows[k][0] <= hw.hbm_bytes * (1 + 1e-9)]
    if not fits:
        return None
    return min(fits, key=lambda k: (float(f"{rows[k][1]:.9e}"), float(f"{rows[k][2]:.9e}"), float(f"{rows[k][0]:.9e}")))


def sorted_rows(model, hw, n):
    # 別の正解: 表にしてから、(見積もり, 上界, メモリ, 順番) を許容つきで 1 つずつ比べる
    rows = table(model, hw, n)
    fits = [k for k in ("DP", "FSDP", "TP") if rows[k][0] <= hw.hbm_bytes * (1 + 1e-9)]
    for col in (1, 2, 0):
        if fits:
            low = min(rows[k][col] for k in fits)
            fits = [k for k in fits if rows[k][col] <= low * (1 + 1e-9)]
    return fits[0] if fits else None


@pytest.mark.parametrize("fn", [ref, make(), sorted_rows], ids=["cost-api", "by-hand", "sorted"])
def test_correct(fn):
    expect("6.7-5", fn, "pass", "n = 1", "容量ちょうど")


@pytest.mark.parametrize(("fn", "words"), [
    (make(strict=True), ("許容がない", "容量ちょうど（相対 1e-9 以内）", "収まらない", "(1 + 1e-9)")),
    # 問題文どおり「以下」（<=）と書いても、許容がなければ同じ誤り。メッセージは < を責めず、許容の欠けを言う
    (make(strict=True, tol=0.0), ("容量との比較に相対 1e-9 の許容がない", "mem <= hbm_bytes * (1 + 1e-9)")),
    (make(tie="more_exposed"), ("上界が長い方式",)),
    (make(tie="memory"), ("上界を比べずにメモリの少ない方式",)),
    (make(tie="order"), ("上界もメモリも比べずに DP・FSDP・TP の順",)),
    (make(tie_tol=0.0), ("相対 1e-9 以内の方式を、違う値として",)),
    (make(tp_act_div=True), ("TP の活性値を 1/n",)),
    (make(tp_state_full=True), ("16P のまま",)),
    (make(act_bytes=2), ("活性値のメモリを 2 倍",)),
    (make(tp_gather=True), ("all_gather_time", "all_reduce_time")),
    (make(tp_overlap=True), ("TP の通信を計算と重ねて",)),
    (make(fsdp_fwd_serial=True), ("FSDP の順伝播の all-gather を順伝播の計算に足して",)),
    (make(fsdp_like_dp=True), ("FSDP の通信を DP と同じ", "順伝播でも")),
    (make(dp_bytes=4), ("4 バイト", "bf16")),
    (make(s_one=True), ("(n − 1)/n を 1", "n = 1 なら通信はありません")),
    (make(tp_count=lambda layers: layers), ("L 回と数えて", "L − 1 回")),
    (make(bw="hbm_bw"), ("hbm_bw", "axis_bw")),
    (make(math_whole=True), ("計算の秒を n で", "分担した秒")),
    (make(order=("TP", "FSDP", "DP")), ("TP・FSDP・DP の順",)),
    (make(memory=False), ("メモリを見ずに",)),
    (make(bw="link_oneway"), ("片方向 link_oneway",)),
    (make(bw="all_axes_bw"), ("all_axes_bw",)),
    (make(serial=True), ("計算に足して", "max")),
    # 学習者の試しで別の原因を言われた誤り: TP の通信を重みの 2P バイトで（hbm_bw や ÷n ではない）、DP の見積もりに
    # 上界（4 バイトの勾配ではない）、FSDP の逆伝播の all-gather を数えない
    (make(tp_weights=True), ("重みの 2P バイト", "活性値の 2BD バイト")),
    (make(dp_upper=True), ("DP の見積もりに、重ならないときの上界", "max")),
    (make(fsdp_no_bwd=True), ("FSDP の逆伝播の all-gather を数えていません", "AG + RS")),
], ids=["strict", "no-tolerance", "tie-break-reversed", "tie-by-memory", "tie-by-order", "tie-no-tolerance", "tp-act-split",
        "tp-state-full", "act-doubled", "tp-gather", "tp-overlap", "fsdp-forward-serial", "fsdp-dp-bytes", "dp-f32", "s-one",
        "tp-L", "hbm", "math-whole", "order-reversed", "no-memory", "oneway", "all-axes", "serial", "tp-weights",
        "dp-upper", "fsdp-no-backward-gather"])
def test_named_slips(fn, words):
    expect("6.7-5", fn, "fail", *words)


def test_other_wrong_answers():
    expect("6.7-5", lambda m, hw, n: "None" if ref(m, hw, n) is None else ref(m, hw, n), "fail", "文字列ではなく None")
    expect("6.7-5", lambda m, hw, n: ref(m, hw, n) or "DP", "fail", "収まらないので、None のはずが DP")
    expect("6.7-5", lambda m, hw, n: "FSDP", "fail", "重ならないときの上界が DP のほうが短い")
    expect("6.7-5", lambda m, hw, n: "TP", "fail", "見積もりは TP が")
    expect("6.7-5", lambda m, hw, n: "DP" if ref(m, hw, n) == "FSDP" else ref(m, hw, n), "fail", "を超えるので")
    expect("6.7-5", lambda m, hw, n: None, "fail", "None ではなく")
    expect("6.7-5", lambda m, hw, n: "dp", "fail", "方式の名前のはずが 'dp'")
    expect("6.7-5", lambda m, hw, n: 3, "fail", "int でした")


def test_not_done_and_learner_error():
    expect("6.7-5", not_done, "not_done", "関数の本体に答えを書いてから")
    expect("6.7-5", boom, "error", "ZeroDivisionError")


def test_statement_states_the_capacity_tolerance_the_check_uses():
    # 問題文・チェック・メッセージが同じ約束を言う: 容量との比較も相対 TOL の許容つき
    text = (Path(__file__).resolve().parents[3] / "solutions" / "6_7_cost_memory.md").read_text(encoding="utf-8")
    statement = text[text.index("`choose_layout(model, hw, n)` を書いてください"):text.index("def choose_layout")]
    assert layout_choice.TOL == 1e-9
    assert "mem <= hw.hbm_bytes * (1 + 1e-9)" in statement
    assert re.search(r"容量との比較も、?相対 1e-9 の許容", statement), statement
