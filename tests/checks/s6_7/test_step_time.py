"""6.7-1 estimate_step: 参照と別の正解は通り、よくある誤り（op.bytes、hbm_bw、bytes_scale なし、all-reduce だけ、
デバイスの数を掛ける、順番が逆）はそれぞれの言葉で落ちる。"""
import jax
import pytest

from ch6.hlo import collective_ops
from tests.checkhelp import boom, expect, not_done

MULTI = jax.device_count() > 1


def _ops(c):
    return collective_ops(c.as_text())


def ref(c, hw, bytes_scale=1.0):
    return c.cost_analysis()["flops"] / hw.flops, bytes_scale * sum(op.traffic for op in _ops(c)) / hw.link_bw


def as_list(c, hw, bytes_scale=1.0):
    # 別の正解: リストで返し、掛け算の順番も違う
    t = sum(op.traffic for op in _ops(c))
    return [float(c.cost_analysis()["flops"]) / hw.flops, t / hw.link_bw * bytes_scale]


@pytest.mark.parametrize("fn", [ref, as_list])
def test_correct(fn):
    expect("6.7-1", fn, "pass", "正解", "隠しのプログラム 3 つ")


def test_wrong_answers_are_named():
    expect("6.7-1", lambda c, hw, s=1.0: ref(c, hw, s)[::-1], "fail", "順番が逆")
    expect("6.7-1", lambda c, hw, s=1.0: (c.cost_analysis()["flops"] / hw.hbm_bw, ref(c, hw, s)[1]), "fail",
           "hw.hbm_bw で割っています", "hw.flops")
    if MULTI:  # 1 デバイスでは集団通信がなく、通信の秒はどう書いても 0
        expect("6.7-1", lambda c, hw, s=1.0: (ref(c, hw, s)[0], ref(c, hw, 1.0)[1]), "fail", "bytes_scale")
        expect("6.7-1", lambda c, hw, s=1.0: (ref(c, hw)[0], s * sum(op.traffic for op in _ops(c)) / hw.hbm_bw), "fail",
               "hw.link_bw")
        expect("6.7-1", lambda c, hw, s=1.0: (ref(c, hw)[0], s * sum(op.bytes for op in _ops(c)) / hw.link_bw),
               "fail", "op.bytes", "op.traffic")
        expect("6.7-1", lambda c, hw, s=1.0: (ref(c, hw)[0],
                                              s * sum(op.traffic for op in _ops(c) if op.kind == "all-reduce") / hw.link_bw),
               "fail", "all-reduce だけ")
        n = jax.device_count()
        expect("6.7-1", lambda c, hw, s=1.0: (n * ref(c, hw)[0], ref(c, hw, s)[1]), "fail", f"{n} 倍", "1 デバイス分")
    expect("6.7-1", lambda c, hw, s=1.0: (1e-3, 1e-4), "fail", "計算の秒が違います")
    expect("6.7-1", lambda c, hw, s=1.0: ref(c, hw, s)[0], "fail", "2 つ組")
    expect("6.7-1", lambda c, hw, s=1.0: ("速い", 0.0), "fail", "数のはず")


def test_not_done_and_learner_error():
    expect("6.7-1", not_done, "not_done", "まだ解答されていません")
    expect("6.7-1", boom, "error", "ZeroDivisionError")
