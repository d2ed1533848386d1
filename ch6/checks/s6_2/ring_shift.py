"""6.2-3 ring_shift: 環の上で shift 個先のデバイスへ送る（lax.ppermute）。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, call, exercise, expect_close, expect_shape, f32, is_close, n_devices
from .common import exercise_rng, primitives

# 6.2-3 -------------------------------------------------------------------------------

@exercise("6.2-3", "ring_shift")
def check_ring_shift(fn):
    n = n_devices()
    rng = exercise_rng(3)
    xs = f32(rng.normal(size=(n, 3)))
    shifts = [1, -1] + ([2] if n > 2 else [])
    for shift in shifts:
        want = np.roll(xs, shift, axis=0)
        got = call(fn, xs, shift)
        expect_shape(got, xs.shape, f"ring_shift(xs, {shift}) の結果")
        if is_close(got, want):
            continue
        order = ", ".join(f"{(i - shift) % n}→{i}" for i in range(min(n, 4))) + ("…" if n > 4 else "")
        if shift != 1 and n > 2 and is_close(got, np.roll(xs, 1, axis=0)):
            raise Fail(f"shift={shift} でも shift=1 と同じ結果です。引数 shift を使って perm を作りましょう"
                       f"（期待する並び 送信元→受信先: {order}）。")
        if n > 2 and is_close(got, np.roll(xs, -shift, axis=0)):
            raise Fail(f"shift={shift} で回る向きが逆です。デバイス i の値はデバイス (i + shift) % n へ送ります"
                       f"（期待する並び 送信元→受信先: {order}）。perm の組は (送信元, 送信先) です。")
        if n > 1 and is_close(got, xs):
            raise Fail(f"shift={shift} で値が動いていません（期待する並び 送信元→受信先: {order}）。"
                       "lax.ppermute(x, axis_name, perm) で送り先を指定しましょう。")
        expect_close(got, want, f"ring_shift(xs, {shift}) の結果",
                     hint=f"{n} デバイスの環で、期待する並び 送信元→受信先 は {order} です。")
    prims = primitives(lambda a: fn(a, 1), xs)
    if "ppermute" not in prims:
        how = "all_gather で全部集めてから選ぶと通信が n 倍です。" if "all_gather" in prims else \
            "jnp.roll は 1 つのデバイスの中での並べ替えで、デバイス間の送受信ではありません。"
        raise Fail(f"値は合っていますが、jaxpr に ppermute が見つかりません。{how}"
                   "pmap の中で lax.ppermute を使いましょう。")
    return f"{n} デバイスの環で shift={shifts} がすべて一致し、ppermute で送っています。"
