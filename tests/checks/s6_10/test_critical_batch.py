"""6.10-2 decode_critical_batch: デコードが計算律速になる最小のバッチ（KV キャッシュの読み込みを含む）。差がちょうど 0 の組（< 0 で比べて 0 で割る、巨大な B を返す）も名指しする。"""
from __future__ import annotations

import math

from ch6 import Status
from tests.checkhelp import boom, expect, not_done

EX = "6.10-2"


def make(tokens_ctx=False, with_kv=True, weight=None, rounding=math.ceil, none_when_never=True, strict=False):
    def decode_critical_batch(n, w, kv, ctx, flops, bw):
        t = ctx if tokens_ctx else 1
        gain = 2 * n * t / flops - (t * ctx * kv / bw if with_kv else 0.0)
        if (gain < 0) if strict else (gain <= 0):
            return None if none_when_never else 10**6
        return max(1, int(rounding((weight or w) * n / bw / gain)))
    return decode_critical_batch


def test_reference_and_a_search_pass():
    expect(EX, make(), Status.PASS, "計算律速にならない組", "差がちょうど 0 の組")

    def search(n, w, kv, ctx, flops, bw):
        if 2 * n / flops <= ctx * kv / bw:
            return None
        lo, hi = 1, 1
        while 2 * hi * n / flops < (w * n + hi * ctx * kv) / bw:
            hi *= 2
        while lo < hi:
            mid = (lo + hi) // 2
            if 2 * mid * n / flops >= (w * n + mid * ctx * kv) / bw:
                hi = mid
            else:
                lo = mid + 1
        return lo
    expect(EX, search, Status.PASS)


def test_named_mistakes():
    expect(EX, make(tokens_ctx=True), Status.FAIL, "プリフィルと同じ数え方")
    expect(EX, make(with_kv=False), Status.FAIL, "KV キャッシュの読み込みを入れていません")
    expect(EX, make(with_kv=False, weight=2), Status.FAIL, "リッジポイント")
    expect(EX, make(rounding=math.floor), Status.FAIL, "切り上げ")
    expect(EX, make(none_when_never=False), Status.FAIL, "None を返します")
    expect(EX, make(strict=True), Status.FAIL, "ちょうど等しい組で、0 で割りました", "<= 0")


def test_a_huge_batch_at_the_tie_is_named():
    def tiny_gain(n, w, kv, ctx, flops, bw):     # 差が 0 のとき、0 の代わりに小さな数で割る
        gain = 2 * n / flops - ctx * kv / bw
        if gain < 0:
            return None
        return max(1, math.ceil(w * n / bw / max(gain, 1e-30)))
    expect(EX, tiny_gain, Status.FAIL, "ちょうど等しい組で", "None を返します")


def _search(strict=False, cap=None, at_cap=None):
    """小さい B から順に試す探索（strict は > で比べる誤り、cap は上限付きの誤り。上限で at_cap を返す）。"""
    def decode_critical_batch(n, w, kv, ctx, flops, bw):
        if 2 * n / flops <= ctx * kv / bw:
            return None
        b = 1
        while True:
            compute, memory = 2 * b * n / flops, (w * n + b * ctx * kv) / bw
            if (compute > memory) if strict else (compute >= memory):
                return b
            b += 1
            if cap is not None and b > cap:
                return at_cap
    return decode_critical_batch


def test_the_equality_boundary_is_named():
    expect(EX, _search(strict=True, cap=10**4), Status.FAIL, "ちょうど等しい組で、2049", ">=")

    def int_plus_one(n, w, kv, ctx, flops, bw):            # 切り上げを int(x) + 1 で書く
        gain = 2 * n / flops - ctx * kv / bw
        return None if gain <= 0 else int(w * n / bw / gain) + 1
    expect(EX, int_plus_one, Status.FAIL, "ちょうど等しい組で", "math.ceil")


def test_a_capped_search_is_named():
    expect(EX, _search(cap=10**5), Status.FAIL, "答えの大きい組", "上限")

    expect(EX, _search(cap=10**5, at_cap=10**5), Status.FAIL, "答えの大きい組")


def test_zero_when_one_batch_is_enough_is_named():
    def from_zero(n, w, kv, ctx, flops, bw):                 # 式の B が 1 未満なら 0 と読む
        gain = 2 * n / flops - ctx * kv / bw
        x = None if gain <= 0 else w * n / bw / gain
        return None if x is None else (math.ceil(x) if x >= 1 else 0)
    expect(EX, from_zero, Status.FAIL, "0 を返しています", "答えは 1")


def test_weight_bytes_per_value_forgotten_is_named():
    expect(EX, make(weight=1), Status.FAIL, "N（パラメータの数）のまま", "w·N")


def test_other_wrong_answers():
    expect(EX, lambda *a: None, Status.FAIL, "None を返しています")
    expect(EX, lambda *a: 7, Status.FAIL, "最小のバッチは")
    expect(EX, lambda *a: 7.5, Status.FAIL, "小数")


def test_not_done_and_learner_error():
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR, "ZeroDivisionError")


def test_an_unguarded_loop_is_stopped_and_named(monkeypatch):
    """None の組を先に調べずに B を 1 から増やすループは終わらない: チェックが打ち切り、ノートブックは止まらない。"""
    import ch6.checks.s6_10.critical_batch as cb

    monkeypatch.setattr(cb, "LIMIT_S", 0.5)

    def endless(n, w, kv, ctx, flops, bw):
        b = 1
        while 2 * b * n / flops < (w * n + b * ctx * kv) / bw:
            b += 1
        return b

    def swallowing(n, w, kv, ctx, flops, bw):  # except Exception でも打ち切りは止まらない
        try:
            return endless(n, w, kv, ctx, flops, bw)
        except Exception:
            return 1
    for fn in (endless, swallowing):
        expect(EX, fn, Status.FAIL, "秒たっても返りませんでした", "ループの前にそれを調べて None を返します")


def test_a_guarded_linear_search_passes_within_the_limit():
    """上限なしで 1 から順に試しても、None の組を先に調べれば答えの大きい組（約 300 万）も制限時間に収まる。"""
    def linear(n, w, kv, ctx, flops, bw):
        if 2 * n / flops <= ctx * kv / bw:
            return None
        b = 1
        while 2 * b * n / flops < (w * n + b * ctx * kv) / bw:
            b += 1
        return b
    expect(EX, linear, Status.PASS)
