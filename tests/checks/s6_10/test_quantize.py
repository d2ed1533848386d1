"""6.10-5 quantize: 出力チャネルごとの対称な int8 の量子化。"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ch6 import Status, serving
from tests.checkhelp import boom, expect, not_done

EX = "6.10-5"


def make(axis=0, levels=127.0, rounding=jnp.round, zero_guard=True, clip=True, dtype=jnp.int8, keepdims=False):
    def quantize(w):
        amax = jnp.max(jnp.abs(w), axis=axis, keepdims=keepdims)
        scale = jnp.where(amax > 0, amax / levels, 1.0) if zero_guard else amax / levels
        x = rounding(w / scale)
        if clip:
            x = jnp.clip(x, -127, 127)
        return x.astype(dtype), scale
    return quantize


def test_reference_and_numpy_pass():
    expect(EX, make(), Status.PASS, "外れ値の列")

    def with_numpy(w):
        amax = np.abs(w).max(axis=0)
        scale = np.where(amax > 0, amax / 127, 1.0).astype(np.float32)
        return np.rint(w / scale).astype(np.int8), scale
    expect(EX, with_numpy, Status.PASS)


def test_calling_the_lessons_library_function_is_named():
    """監査（issue 47）: 本編の serving.quantize_int8 を呼んでスケールの形を直すだけの答えが通っていた。"""
    def one_line(w):
        q, scale = serving.quantize_int8(w, (0,))
        return q, scale.reshape(-1)

    expect(EX, one_line, Status.FAIL, "serving.quantize_int8 を呼んでいます", "自分で計算してください")


def test_named_mistakes():
    expect(EX, make(axis=None), Status.FAIL, "スカラー")
    def per_input(w):
        scale = jnp.max(jnp.abs(w), axis=1) / 127.0
        return jnp.round(w / scale[:, None]).astype(jnp.int8), scale
    expect(EX, per_input, Status.FAIL, "入力の軸")
    expect(EX, make(keepdims=True), Status.FAIL, "出力チャネルごとの")
    expect(EX, make(zero_guard=False), Status.FAIL, "0 で割る")
    expect(EX, make(levels=128.0, clip=False), Status.FAIL, "128 で割った")
    expect(EX, lambda w: (jnp.full(w.shape, -128, jnp.int8), make()(w)[1]), Status.FAIL, "範囲を超えます")
    expect(EX, make(levels=100.0), Status.FAIL, "使い切っていません")
    expect(EX, make(rounding=jnp.floor), Status.FAIL, "jnp.round")
    expect(EX, make(dtype=jnp.float32), Status.FAIL, "int8")


def test_a_wrong_scale_is_named_not_the_rounding():
    expect(EX, make(levels=254.0), Status.FAIL, "列 0 の scale は max|w[:, 0]| / 127", "絶対値の最大")

    def signed_max(w):                           # 絶対値ではなく max(w) で割る（負の外れ値の列で小さすぎる）
        amax = jnp.max(w, axis=0)
        scale = jnp.where(amax > 0, amax / 127.0, 1.0)
        return jnp.clip(jnp.round(w / scale), -127, 127).astype(jnp.int8), scale
    expect(EX, signed_max, Status.FAIL, "scale は max|w[:, ", "絶対値の最大")

    def inverse(w):                              # 127 / max|w| を返し、q = round(w * scale)
        amax = jnp.max(jnp.abs(w), axis=0)
        inv = jnp.where(amax > 0, 127.0 / amax, 1.0)
        return jnp.clip(jnp.round(w * inv), -127, 127).astype(jnp.int8), inv
    expect(EX, inverse, Status.FAIL, "逆数")
    expect(EX, lambda w: (make()(w)[0], make()(w)[1].astype(jnp.bfloat16)), Status.FAIL, "float32", "bfloat16")


def test_other_wrong_answers():
    expect(EX, lambda w: make()(w)[0], Status.FAIL, "2 つ組")
    expect(EX, lambda w: (make()(w)[0][:2], make()(w)[1]), Status.FAIL, "q の形")
    expect(EX, lambda w: (make()(w)[0], -make()(w)[1]), Status.FAIL, "列 0 の scale が 0 以下")

    def nan_scale(w):
        q, scale = make()(w)
        return q, scale.at[0].set(jnp.nan)
    expect(EX, nan_scale, Status.FAIL, "列 0 の scale が NaN")
    expect(EX, lambda w: (make()(w)[0], 3), Status.FAIL, "配列で返します")


def test_not_done_and_learner_error():
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR, "ZeroDivisionError")


def test_dividing_zero_by_zero_then_repairing_is_named():
    """学習者の試し（issue 39）: 0 で割って NaN を作り、int8 にしてから scale だけ直す答え（CPU では NaN → 0 で値は合う）と、
    nan_to_num で消す答え、jnp.where で NaN を後から捨てる答え（NaN は int8 に届かないが、0 で割る計算はする）。
    jit しても、NumPy で書いても見つける。"""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def repaired(w):
        amax = jnp.max(jnp.abs(w), axis=0)
        q = jnp.clip(jnp.round(w / (amax / 127)), -127, 127).astype(jnp.int8)
        return q, jnp.where(amax > 0, amax / 127, 1.0).astype(jnp.float32)

    def numpy_nan_to_num(w):
        amax = np.abs(w).max(axis=0)
        q = np.nan_to_num(np.round(w / (amax / 127)))  # NumPy は警告だけで進む
        return np.clip(q, -127, 127).astype(np.int8), np.where(amax > 0, amax / 127, 1).astype(np.float32)
    def where_guard(w):
        amax = jnp.max(jnp.abs(w), axis=0)
        q = jnp.where(amax > 0, jnp.round(w / (amax / 127)), 0)
        return q.astype(jnp.int8), jnp.where(amax > 0, amax / 127, 1.0).astype(jnp.float32)
    def inverse_guard(w, xp=jnp):  # 127 / 0 = inf を jnp.where で捨てる（0/0 ではないが 0 で割る）
        amax = xp.max(xp.abs(w), axis=0)
        inv = xp.where(amax > 0, 127 / amax, 0)
        return xp.round(w * inv).astype(xp.int8), xp.where(amax > 0, amax / 127, 1.0).astype(xp.float32)
    for fn in (repaired, jax.jit(repaired), numpy_nan_to_num, where_guard, jax.jit(where_guard), inverse_guard,
               lambda w: inverse_guard(w, np)):
        expect(EX, fn, Status.FAIL, "0 で割っています（NaN か inf）", "jnp.where で後から選んでも割り算はする")
