"""6.8b-2 choose_sequence_parallel: 正しい選び方が通り、名指しする誤りがそれぞれの言葉で落ちること。"""
from __future__ import annotations

import math

import pytest

import ch6.cost
from ch6 import Status
from tests.checkhelp import boom, expect, not_done

EX = "6.8b-2"


def comm(chip, n, seq_len, heads, head_dim, nbytes, *, check_heads=True):
    b = seq_len / n * heads * head_dim * nbytes
    network = "torus" if chip.kind == "TPU" else "switch"
    ring = (n - 1) * ch6.cost.ppermute_time(2 * b, chip.link_oneway)
    if check_heads and heads % n:
        return ring, math.inf
    return ring, 4 * ch6.cost.all_to_all_time(b, n, chip.axis_bw, network=network)


def make(*, ring_est="overlapped", uly_est="serial", tie="ring", tol=1e-9, flops=4, per_n=True, check_heads=True,
         only_comm=False, seconds="chosen", as_list=False, twice=False, zero_at_one=False):
    def choose_sequence_parallel(chip, n, seq_len, heads, head_dim, bytes_per_value):
        if zero_at_one and n == 1:  # 通信がないので 0 秒と考えた
            return ("ring", 0.0)
        t_math = flops * seq_len**2 * heads * head_dim / (n if per_n else 1) / (n if twice else 1) / chip.flops
        ring_c, uly_c = comm(chip, n, seq_len, heads, head_dim, bytes_per_value, check_heads=check_heads)
        ring = getattr(ch6.cost.step_time(t_math, ring_c), ring_est)
        uly = getattr(ch6.cost.step_time(t_math, uly_c), uly_est)
        if only_comm:
            ring, uly = ring_c, uly_c
        pick = uly <= ring * (1 + tol) if tie == "ulysses" else (ring - uly > tol * ring if tol else uly < ring)
        out = ("ulysses", uly) if pick else ("ring", ring)
        if seconds == "math":
            out = (out[0], t_math)
        if seconds == "other":  # 選ばなかった方式の秒（使えない Ulysses のときは選んだ方式の秒）
            other = ring if pick else uly
            out = (out[0], other if math.isfinite(other) else ring)
        return list(out) if as_list else out
    return choose_sequence_parallel


def test_reference_passes():
    expect(EX, make(), Status.PASS, "一致しました")


def test_other_correct_forms_pass():
    expect(EX, make(as_list=True), Status.PASS)
    expect(EX, make(tol=5e-10), Status.PASS)     # 相対 1e-9 の内側なら同じ答え


@pytest.mark.parametrize("kw, words", [
    (dict(ring_est="serial"), ("リングも和",)),
    (dict(uly_est="overlapped"), ("Ulysses も max",)),
    (dict(ring_est="serial", uly_est="overlapped"), ("逆です",)),
    (dict(only_comm=True), ("通信の秒だけ",)),
    (dict(tie="ulysses"), ("同点で \"ulysses\"",)),
    (dict(tol=0), ("許容なし",)),
    (dict(tol=1e-6), ("同点の幅が広すぎ", "1e-9 倍以下")),
    (dict(flops=2), ("半分",)),
    (dict(per_n=False), ("n で割っていません",)),
    (dict(check_heads=False), ("割り切れない",)),
    (dict(seconds="math"), ("計算の秒だけ",)),
    (dict(seconds="other"), ("選ばなかった方式",)),
    (dict(twice=True), ("n で 2 回割って",)),                  # 1 デバイスのヘッド H/n で数え、さらに n で割る
    (dict(zero_at_one=True), ("n = 1", "のはずが 0 でした")),     # n = 1 を 0 秒とした（計算の秒がある）
])
def test_named_mistakes(kw, words):
    expect(EX, make(**kw), Status.FAIL, *words)


def test_wrong_return_values():
    expect(EX, lambda *a: "ring", Status.FAIL, "2 つ組")
    expect(EX, lambda *a: ("Ring", 1.0), Status.FAIL, "'Ring'")
    expect(EX, lambda *a: ("ring", None), Status.FAIL, "NoneType")
    expect(EX, lambda *a: ("ring", 1.0), Status.FAIL)

    def off_seconds(*args):
        method, sec = make()(*args)
        return method, sec * (1.01 if args[1] == 8 else 1.0)
    expect(EX, off_seconds, Status.FAIL, "方式は合っています")


def test_not_done_and_learner_error():
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR, "ZeroDivisionError")
