"""6.10-4 make_write_slot: 連続バッチ処理で、プロンプトの K/V をキャッシュのスロットに書く jit 済みの関数。"""
from __future__ import annotations

import numpy as np

from ... import serving
from ...checking import Fail, LearnerError, call, exercise, n_devices
from .common import exercise_rng

# 必須: make_write_slot() は jax.jit(…, donate_argnums=0) した関数を返す。write(cache, kv_new, slot, length) は
# cache[:, slot, :length] = kv_new[:, :length]、cache[:, slot, length:] = 0、ほかのスロットはそのまま。
# slot と length は値として扱う（どの要求でもコンパイルは 1 回）。


def _reference(cache, kv_new, slot, length):
    out = cache.copy()
    out[:, slot] = 0
    out[:, slot, :length] = kv_new[:, :length]
    return out


def _inputs():
    r = exercise_rng(4)
    slots = n_devices() + 2
    layers, t, p, kv, e = 2, 13, 7, 2, 3
    cache = r.normal(size=(layers, slots, t, kv, e)).astype(np.float32)      # 前の要求の K/V（0 でない）
    news = [r.normal(size=(layers, p, kv, e)).astype(np.float32) for _ in range(4)]
    calls = [(1, 4), (0, p), (slots - 1, 1), (1, 2)]
    return cache, news, calls


def _explain(exc: BaseException) -> str | None:
    name = type(exc).__name__
    static_slice = isinstance(exc, IndexError) and "static" in str(exc)
    if static_slice or "Concretization" in name or "TracerIntegerConversion" in name or "TracerBool" in name:
        return (f"slot か length がトレースされた値なので、Python のスライス [:length] や int(slot) で {name} が"
                "起きました。lax.dynamic_update_slice と、位置 < length のマスク（jnp.where）で書いてください。")
    return None


def _row_mistake(row, old, new, slot: int, length: int) -> str:
    """スロット slot の行（層, 位置, KV ヘッド, E）の誤りの言葉。old は書く前の行、new は kv_new。"""
    p = new.shape[1]

    def same(a, b) -> bool:
        return np.allclose(a, b, atol=1e-6)

    # 原因の狭いものから: 何も書いていない行、位置 < length は合っている行、1 つ少ない行、それ以外
    if same(row, old):
        return (f"戻り値が入力の cache のままで、スロット {slot} に何も書かれていません。"
                "書き換えた配列（.at[...].set(...) や dynamic_update_slice の結果）を返してください。")
    if same(row[:, :length], new[:, :length]):
        if length < p and same(row[:, length:p], new[:, length:p]):
            return (f"length = {length} より後の位置にも kv_new のパディングを書いています。"
                    "位置 < length だけを書き、残りは 0 にします。")
        if length < p and same(row[:, length], new[:, length]) and same(row[:, length + 1:], 0):
            return (f"位置 length = {length} にもパディングの値を書いています（1 つ多い）。"
                    "書くのは位置 < length だけなので、マスクは <= ではなく < で比べます。")
        stale = [t for t in range(length, row.shape[1]) if not same(row[:, t], 0) and same(row[:, t], old[:, t])]
        if stale:
            return (f"位置 {stale[0]} など、length = {length} より後の位置に前の要求の K/V が残っています。"
                    "新しい要求のスロットは、位置 length 以降を 0 にします。")
        return f"length = {length} より後の位置が 0 ではありません。新しい要求のスロットは、位置 length 以降を 0 にします。"
    last = row[:, length - 1]
    if length > 1 and same(row[:, :length - 1], new[:, :length - 1]) and (same(last, 0) or same(last, old[:, length - 1])):
        return (f"位置 {length - 1}（プロンプトの最後のトークン）に kv_new の K/V を書いていません（1 つ少ない）。"
                "位置 0..length − 1 を書くので、マスクは位置 < length です。")
    return (f"スロット {slot} の位置 0..{length - 1} が kv_new[:, :{length}] と一致しません。"
            "書き込む軸（層, スロット, 位置, …）の順を確かめてください。")


@exercise("6.10-4", "make_write_slot")
def check_make_write_slot(fn):
    import jax

    write = call(fn)
    if not callable(write):
        raise Fail(f"make_write_slot は関数を返すはずが、{type(write).__name__} が返りました。")
    if not hasattr(write, "lower"):
        raise Fail("返した関数が jax.jit で包まれていません。要求ごとに Python で配列を作り直さないよう、"
                   "jax.jit(…, donate_argnums=0) した関数を返します。")
    cache_np, news, calls = _inputs()
    cache = jax.device_put(cache_np)
    want = cache_np
    for k, (slot, length) in enumerate(calls):
        before = cache
        try:
            if k == 0:
                cache = call(write, cache, news[k], slot, length)
            else:
                with serving.compile_counter() as compiles:
                    cache = call(write, cache, news[k], slot, length)
                if compiles.count:
                    raise Fail("要求ごとにコンパイルし直しています（slot か length が静的な引数です）。"
                               "値として渡し、lax.dynamic_update_slice とマスクで書けば、コンパイルは 1 回です。")
        except LearnerError as exc:
            text = _explain(exc.exc)
            if text:
                raise Fail(text) from None
            raise
        shape = tuple(getattr(cache, "shape", ())) if hasattr(cache, "shape") else None
        if shape != want.shape:
            raise Fail(f"戻り値はキャッシュと同じ形 {want.shape} のはずが、"
                       f"{shape if shape is not None else type(cache).__name__} でした。")
        # 値を先に確かめる: ほかのスロットを消す答えは、出力が入力のキャッシュを使わないので、donate_argnums=0 と
        # 書いてあっても XLA が譲渡を使えない。原因はスロットの誤りのほうなので、そちらを言う
        got = np.array(cache, copy=True)   # コピー（NumPy の参照が残ると、次の呼び出しで譲渡できない）
        new_want = _reference(want, news[k], slot, length)
        if not np.allclose(got, new_want, atol=1e-6):
            others = [s for s in range(want.shape[1]) if s != slot]
            if not np.allclose(got[:, others], want[:, others], atol=1e-6):
                wiped = np.allclose(got[:, others], 0, atol=1e-6)
                raise Fail(f"スロット {slot} に書いたとき、ほかのスロットも"
                           f"{'すべて 0 になりました' if wiped else '変わりました'}。書き換えるのは cache[:, slot] だけで、"
                           "ほかのスロットは入力の cache の値のままにします（スロットは軸 1）。")
            raise Fail(_row_mistake(got[:, slot], want[:, slot], news[k], slot, length))
        if not before.is_deleted():
            raise Fail("キャッシュを譲渡していないので、XLA は呼ぶたびにキャッシュ全体をコピーします。"
                       "jax.jit(…, donate_argnums=0) で第 1 引数を譲渡します。")
        want = new_want
        del got, before
    return (f"隠しのスロット {want.shape[1]} 個に {len(calls)} 件を書き、値、譲渡、"
            "コンパイル 1 回（2 件目からはコンパイルなし）を確かめました。")
