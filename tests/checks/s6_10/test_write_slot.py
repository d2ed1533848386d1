"""6.10-4 make_write_slot: プロンプトの K/V をスロットに書く jit 済みの関数。"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from ch6 import Status
from tests.checkhelp import boom, expect, not_done

EX = "6.10-4"


def write(cache, kv_new, slot, length, *, clear=True, mask=True, slot_axis=1, off=0, clear_to_p=False):
    layers, _, t, kv, e = cache.shape
    keep = (jnp.arange(kv_new.shape[1]) < length + off)[None, :, None, None]
    new = jnp.where(keep, kv_new, 0) if mask else kv_new
    if clear_to_p:                       # 位置 P までだけを書き直し、P より後は前の要求のまま
        old = lax.dynamic_index_in_dim(cache, slot, axis=1, keepdims=False)
        row = lax.dynamic_update_slice(old, new.astype(cache.dtype), (0, 0, 0, 0))
    elif clear:
        row = lax.dynamic_update_slice(jnp.zeros((layers, t, kv, e), cache.dtype), new.astype(cache.dtype), (0, 0, 0, 0))
    else:
        old = lax.dynamic_index_in_dim(cache, slot, axis=1, keepdims=False)
        row = lax.dynamic_update_slice(old, jnp.where(keep, kv_new, old[:, :kv_new.shape[1]]), (0, 0, 0, 0))
    start = (0, slot, 0, 0, 0) if slot_axis == 1 else (slot, 0, 0, 0, 0)
    if slot_axis != 1:
        return lax.dynamic_update_slice(cache, row[None, :1], start)
    return lax.dynamic_update_slice(cache, row[:, None], start)


def factory(donate=True, static=False, jit=True, donate_arg=0, **kw):
    def make_write_slot():
        fn = functools.partial(write, **kw)
        if not jit:
            return fn
        opts = {"donate_argnums": donate_arg} if donate else {}
        if static:
            opts["static_argnums"] = (2, 3)
        return jax.jit(fn, **opts)
    return make_write_slot


def test_reference_and_at_set_pass():
    expect(EX, factory(), Status.PASS, "コンパイル 1 回")

    def with_at():
        def w(cache, kv_new, slot, length):
            pos = jnp.arange(cache.shape[2])
            padded = jnp.zeros(cache.shape[:1] + cache.shape[2:], cache.dtype).at[:, :kv_new.shape[1]].set(kv_new)
            row = jnp.where((pos < length)[None, :, None, None], padded, 0)
            return cache.at[:, slot].set(row)
        return jax.jit(w, donate_argnums=0)
    expect(EX, with_at, Status.PASS)


def test_named_mistakes():
    expect(EX, factory(donate=False), Status.FAIL, "譲渡していない", "donate_argnums=0")
    expect(EX, factory(static=True), Status.FAIL, "コンパイルし直して")
    expect(EX, factory(jit=False), Status.FAIL, "jax.jit で包まれていません")
    expect(EX, factory(clear=False), Status.FAIL, "前の要求の K/V が残って")
    expect(EX, factory(mask=False), Status.FAIL, "パディング")
    expect(EX, factory(slot_axis=0), Status.FAIL)


def test_fresh_mistakes_from_the_statement():
    expect(EX, factory(off=1), Status.FAIL, "位置 length = 4 にもパディング", "<= ではなく <")
    expect(EX, factory(off=-1), Status.FAIL, "位置 3（プロンプトの最後のトークン）", "< length")
    expect(EX, factory(clear_to_p=True), Status.FAIL, "前の要求の K/V が残っています")
    expect(EX, factory(donate_arg=1), Status.FAIL, "譲渡していない", "donate_argnums=0")


def test_tracer_slicing_and_other_answers():
    def python_slice():
        def w(cache, kv_new, slot, length):
            return cache.at[:, slot, :length].set(kv_new[:, :length])
        return jax.jit(w, donate_argnums=0)
    expect(EX, python_slice, Status.FAIL, "トレースされた値")
    expect(EX, lambda: "nope", Status.FAIL, "str")
    expect(EX, lambda: jax.jit(lambda c, k, s, n: c[:, 0], donate_argnums=0), Status.FAIL, "同じ形")
    expect(EX, lambda: jax.jit(lambda c, k, s, n: c * 2, donate_argnums=0), Status.FAIL, "ほかのスロット")


def test_not_done_and_learner_error():
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR, "ZeroDivisionError")


def test_wiping_the_other_slots_is_named_before_donation():
    # donate_argnums=0 はあるが、出力が入力の cache を使わない（ほかのスロットを 0 にする）: 譲渡ではなくスロットの誤り
    def wipes():
        def w(cache, kv_new, slot, length):
            return write(jnp.zeros_like(cache), kv_new, slot, length)
        return jax.jit(w, donate_argnums=0)
    msg = expect(EX, wipes, Status.FAIL, "ほかのスロットもすべて 0 になりました", "入力の cache の値のまま")
    assert "譲渡" not in msg


def test_one_position_short_is_named_whether_or_not_the_rest_is_cleared():
    # マスクが位置 < length − 1 で、前の要求の K/V を消さない答え: 位置 length − 1 は 0 ではなく前の値のまま。
    # 軸の順の誤りではなく、1 つ少ない書き込みが原因
    msg = expect(EX, factory(off=-1, clear=False), Status.FAIL, "位置 3（プロンプトの最後のトークン）", "< length")
    assert "軸" not in msg


def test_nothing_written_is_named_before_the_axis_order():
    # 入力の cache をそのまま返す答え（.at[...].set(...) の結果を捨てた）: スロットに何も書いていない
    def unchanged():
        def w(cache, kv_new, slot, length):
            cache.at[:, slot].set(0)
            return cache
        return jax.jit(w, donate_argnums=0)
    msg = expect(EX, unchanged, Status.FAIL, "何も書かれていません", "戻り値")
    assert "軸" not in msg
