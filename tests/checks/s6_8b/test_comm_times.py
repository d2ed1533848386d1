"""6.8b-1 attention_comm_times: 正しい書き方が通り、名指しする誤りがそれぞれの言葉で落ちること。
本編の 7 節の「半分ずつ逆向きに送る」両方向のリングの秒や、b を系列全体で計算する答えも落ちる。"""
from __future__ import annotations

import math

import pytest

import ch6.cost
from ch6 import Status
from tests.checkhelp import boom, expect, not_done

EX = "6.8b-1"


def make(*, link="oneway", steps="n-1", kv=2, a2a=4, network="auto", per_device=True, inf=True, key_ring="ring",
         a2a_bw="axis", full_b=False):
    def attention_comm_times(chip, n, seq_len, heads, head_dim, bytes_per_value):
        b = seq_len / (1 if full_b else n) * heads * head_dim * bytes_per_value
        bw = {"oneway": chip.link_oneway, "axis": chip.axis_bw, "hbm": chip.hbm_bw}[link]
        k = n - 1 if steps == "n-1" else n
        ring = k * ch6.cost.ppermute_time(kv * b, bw)
        net = {"auto": "torus" if chip.kind == "TPU" else "switch", "torus": "torus", "switch": "switch",
               "swap": "switch" if chip.kind == "TPU" else "torus"}[network]
        bw_a2a = chip.hbm_bw if link == "hbm" else {"axis": chip.axis_bw, "oneway": chip.link_oneway,
                                                      "all_axes": chip.all_axes_bw}[a2a_bw]
        uly = a2a * ch6.cost.all_to_all_time(b if per_device else b * n, n, bw_a2a, network=net)
        if inf and heads % n:
            uly = math.inf
        return {key_ring: ring, "ulysses": uly}
    return attention_comm_times


def test_reference_passes():
    expect(EX, make(), Status.PASS, "一致しました")


def test_other_correct_forms_pass():
    def by_hand_network(chip, n, seq_len, heads, head_dim, bytes_per_value):
        out = make()(chip, n, seq_len, heads, head_dim, bytes_per_value)
        return {"ulysses": out["ulysses"], "ring": float(out["ring"])}    # 順番も型も自由
    expect(EX, by_hand_network, Status.PASS)

    def gather_one_direction(chip, n, seq_len, heads, head_dim, bytes_per_value):
        # 同じ向きのリング = all-gather 2 回を片方向の帯域で（式は違っても同じ秒）
        out = make()(chip, n, seq_len, heads, head_dim, bytes_per_value)
        b = seq_len / n * heads * head_dim * bytes_per_value
        out["ring"] = 2 * ch6.cost.all_gather_time(n * b, n, chip.link_oneway)
        return out
    expect(EX, gather_one_direction, Status.PASS)


@pytest.mark.parametrize("kw, words", [
    (dict(link="axis"), ("axis_bw", "link_oneway")),
    (dict(steps="n"), ("n − 1 回",)),
    (dict(kv=1), ("b バイトを片方向で送る値", "2b バイト")),
    (dict(full_b=True), ("系列全体の長さ", "seq_len / n")),
    (dict(a2a=2), ("2 回",)),
    (dict(a2a=3), ("3 回", "出力を戻す")),
    (dict(a2a_bw="oneway"), ("link_oneway", "axis_bw")),
    (dict(a2a_bw="all_axes"), ("all_axes_bw", "1 軸")),
    (dict(network="swap"), ("ネットワークの構成",)),
    (dict(per_device=False), ("系列全体のバイト",)),
    (dict(link="hbm"), ("hbm_bw",)),
    (dict(inf=False), ("math.inf",)),
])
def test_named_mistakes(kw, words):
    expect(EX, make(**kw), Status.FAIL, *words)


def test_the_lessons_two_way_ring_is_not_this_ring():
    # 本編 7 節の両方向のリング: K/V を半分（b バイト）ずつ逆向きに、片方向の帯域で（同時に送るので 1 ステップは b）
    def two_way(chip, n, seq_len, heads, head_dim, bytes_per_value):
        out = make()(chip, n, seq_len, heads, head_dim, bytes_per_value)
        b = seq_len / n * heads * head_dim * bytes_per_value
        out["ring"] = (n - 1) * ch6.cost.ppermute_time(b, chip.link_oneway)
        return out
    expect(EX, two_way, Status.FAIL, "半分ずつ逆向きに送る書き方", "同じ向き")


def test_one_network_for_every_chip_is_a_mistake():
    expect(EX, make(network="torus"), Status.FAIL, "GPU の行もトーラス", "\"switch\"")
    expect(EX, make(network="switch"), Status.FAIL, "TPU の行もスイッチ", "\"torus\"")


def test_wrong_return_values():
    expect(EX, lambda *a: (1.0, 2.0), Status.FAIL, "辞書")
    expect(EX, make(key_ring="rings"), Status.FAIL, "キー \"ring\"")
    expect(EX, lambda *a: {"ring": "fast", "ulysses": 1.0}, Status.FAIL, "str")
    expect(EX, lambda *a: {"ring": -1.0, "ulysses": 1.0}, Status.FAIL, "0 以上")

    def nonzero_at_one(chip, n, *rest):
        out = make()(chip, n, *rest)
        return {"ring": out["ring"] + (1e-3 if n == 1 else 0.0), "ulysses": out["ulysses"]}
    expect(EX, nonzero_at_one, Status.FAIL, "n = 1", "0 秒")

    def other_error(chip, n, *rest):
        out = make()(chip, n, *rest)
        return {"ring": out["ring"] * (1.5 if n == 6 else 1.0), "ulysses": out["ulysses"]}
    expect(EX, other_error, Status.FAIL, "n = 6", "\"ring\"")


def test_not_done_and_learner_error():
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR, "ZeroDivisionError")
