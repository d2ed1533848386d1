"""6.10-1 max_batch: 重みと KV キャッシュが HBM に収まる最大のバッチ。"""
from __future__ import annotations

import math

import numpy as np

from ch6 import Status
from tests.checkhelp import boom, expect, not_done

EX = "6.10-1"


def make(kv_factor=2, heads="n_kv_heads", weights=True, rounding=None, clamp=True, as_type=int, layers=True,
         weight_from_params=False, extra=0):
    def max_batch(model, seq_len, bytes_per_value, weight_bytes, hbm_bytes):
        per_seq = (model["n_layers"] if layers else 1) * kv_factor * model[heads] * model["head_dim"] * (seq_len + extra)
        per_seq *= bytes_per_value
        if weight_from_params:
            weight_bytes = model["n_params"] * bytes_per_value
        free = hbm_bytes - (weight_bytes if weights else 0)
        b = (rounding or math.floor)(free / per_seq)
        return as_type(max(0, b) if clamp else b)
    return max_batch


def test_reference_and_other_correct_answers():
    expect(EX, make(), Status.PASS, "ちょうど満杯")
    expect(EX, make(as_type=np.int64), Status.PASS)

    def loop(model, seq_len, bytes_per_value, weight_bytes, hbm_bytes):
        per = 2 * model["n_layers"] * model["n_kv_heads"] * model["head_dim"] * seq_len * bytes_per_value
        b = 0
        while weight_bytes + (b + 1) * per <= hbm_bytes:
            b += 1
        return b
    expect(EX, loop, Status.PASS)


def test_named_mistakes():
    expect(EX, make(kv_factor=1), Status.FAIL, "K だけ")
    expect(EX, make(heads="n_heads"), Status.FAIL, "クエリのヘッド", "n_kv_heads")
    expect(EX, make(weights=False), Status.FAIL, "重みのバイトを引いていません")
    expect(EX, make(clamp=False), Status.FAIL, "0 を返します")
    expect(EX, make(rounding=lambda x: math.ceil(x) - 1 if x == int(x) else math.floor(x)), Status.FAIL, "<=")
    expect(EX, make(rounding=math.ceil), Status.FAIL, "端数は切り捨てます")


def test_fresh_mistakes_from_the_statement():
    expect(EX, make(layers=False), Status.FAIL, "層の数を掛けていません")
    expect(EX, make(weight_from_params=True), Status.FAIL, "n_params × bytes_per_value", "weight_bytes")
    expect(EX, make(rounding=round), Status.FAIL, "1 つ多い", "四捨五入")

    def weights_per_sequence(model, seq_len, bytes_per_value, weight_bytes, hbm_bytes):
        per_seq = 2 * model["n_layers"] * model["n_kv_heads"] * model["head_dim"] * seq_len * bytes_per_value
        return int(hbm_bytes // (weight_bytes + per_seq))
    expect(EX, weights_per_sequence, Status.FAIL, "重みを系列ごとに足しています")


def test_the_learner_slips_of_the_review_are_named():
    """学習者の試し（issue 39）: int() で 0 に向かって切り捨て、max(0, …) のない答えと、その形で K だけ・クエリのヘッド。"""
    expect(EX, make(rounding=int, clamp=False), Status.FAIL, "重みだけで HBM を超える組で -3", "max(0, …)")
    expect(EX, make(kv_factor=1, rounding=int, clamp=False), Status.FAIL, "K だけ")
    expect(EX, make(heads="n_heads", rounding=int, clamp=False), Status.FAIL, "クエリのヘッド")
    expect(EX, make(rounding=int), Status.PASS)  # max(0, …) があれば int() の切り捨ても正しい


def test_types_and_other_wrong_answers():
    expect(EX, make(as_type=float), Status.FAIL, "float")
    expect(EX, lambda *a: make()(*a) + 0.5, Status.FAIL, "小数")
    expect(EX, lambda *a: None, Status.FAIL, "NoneType")
    expect(EX, lambda *a: True, Status.FAIL, "bool")
    expect(EX, lambda *a: str(make()(*a)), Status.FAIL, "str")
    expect(EX, lambda *a: 3, Status.FAIL, "最大のバッチは")


def test_not_done_and_learner_error():
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR, "ZeroDivisionError")


def test_one_position_too_many_is_not_called_a_comparison():
    # 長さを seq_len + 1 で数える: 比較（<=）の誤りではなく、長さの誤りとして名指しする
    msg = expect(EX, make(extra=1), Status.FAIL, "seq_len + 1", "1 位置分")
    assert "<=" not in msg
