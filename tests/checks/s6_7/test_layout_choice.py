"""6.7-5 choose_layout: 参照と別の正解は通り、メモリを見ない、FSDP の通信を DP と同じにする、TP の活性化を分ける、
文字列の "None"、時間でなくメモリで選ぶ答えはそれぞれの言葉で落ちる。"""
import pytest

from tests.checkhelp import boom, expect, not_done


def _table(m, hw, n, fsdp=3, tp_split=False):
    p, w, lyr, b, a = m["params"], m["width"], m["layers"], m["batch"], m["act"]
    s = (n - 1) / n
    comp = 6 * b * p / n / hw.flops
    return {
        "DP": (16 * p + a * b / n * w * lyr, comp + 4 * s * p / hw.link_bw),
        "FSDP": (16 * p / n + a * b / n * w * lyr, comp + 2 * fsdp * s * p / hw.link_bw),
        "TP": (16 * p / n + a * (b / n if tp_split else b) * w * lyr, comp + 4 * s * b * w * (lyr - 1) / hw.link_bw),
    }


def make(fsdp=3, tp_split=False, memory=True, by="time", none=None):
    def fn(model, hw, n):
        rows = _table(model, hw, n, fsdp, tp_split)
        fits = {k: v for k, v in rows.items() if not memory or v[0] <= hw.hbm_bytes}
        if not fits:
            return none
        key = (lambda k: (fits[k][1], fits[k][0])) if by == "time" else (lambda k: fits[k][0])
        return min(fits, key=key)
    return fn


def sorted_rows(model, hw, n):
    # 別の正解: 表にしてから並べ替える
    rows = sorted((t, m, k) for k, (m, t) in _table(model, hw, n).items() if m <= hw.hbm_bytes)
    return rows[0][2] if rows else None


@pytest.mark.parametrize("fn", [make(), sorted_rows])
def test_correct(fn):
    expect("6.7-5", fn, "pass", "正解", "DP・FSDP・TP・None")


def test_wrong_answers_are_named():
    expect("6.7-5", make(memory=False), "fail", "メモリを見ずに", "hbm_bytes 以下")
    expect("6.7-5", make(fsdp=2), "fail", "DP と同じ", "2·3·s·P / W")
    expect("6.7-5", make(tp_split=True), "fail", "バッチ全体")
    expect("6.7-5", make(none="None"), "fail", "文字列ではなく None")
    expect("6.7-5", make(none="DP"), "fail", "収まらなければ None")
    expect("6.7-5", make(by="memory"), "fail", "メモリのいちばん少ない")
    expect("6.7-5", lambda m, hw, n: "FSDP", "fail", "より遅いです")
    expect("6.7-5", lambda m, hw, n: "DP", "fail", "収まりません")
    expect("6.7-5", lambda m, hw, n: None, "fail", "None が返りました")
    expect("6.7-5", lambda m, hw, n: "dp", "fail", "方式の名前ではありません")
    expect("6.7-5", lambda m, hw, n: 3, "fail", "実際は int")


def test_not_done_and_learner_error():
    expect("6.7-5", not_done, "not_done", "まだ解答されていません")
    expect("6.7-5", boom, "error", "ZeroDivisionError")
