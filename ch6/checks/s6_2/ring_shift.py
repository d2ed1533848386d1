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
    shifts = [1, -1] + ([2] if n > 2 else []) + ([n + 1] if n > 1 else [])  # n + 1: 1 周を超える（% n の境目）
    for shift in shifts:
        want = np.roll(xs, shift, axis=0)
        got = call(fn, xs, shift)
        expect_shape(got, xs.shape, f"ring_shift(xs, {shift}) の結果")
        if is_close(got, want):
            continue
        order = ", ".join(f"{(i - shift) % n}→{i}" for i in range(min(n, 4))) + ("…" if n > 4 else "")
        if shift % n != 1 and n > 2 and is_close(got, np.roll(xs, 1, axis=0)):
            raise Fail(f"shift={shift} でも shift=1 と同じ結果なので、引数 shift が使われていません。"
                       f"送信元→送信先は {order} です。")
        if n > 2 and is_close(got, np.roll(xs, -shift, axis=0)):
            raise Fail(f"shift={shift} で回る向きが逆です。perm の組は (送信元, 送信先) で、{order} の向きに送ります。")
        if n > 1 and shift % n and is_close(got, xs):
            raise Fail(f"shift={shift} で値が動いていません。lax.ppermute の perm で送信先を指定しましょう（{order}）。")
        if shift > n - 1:
            expect_close(got, want, f"shift={shift}（デバイスの数 {n} 以上）の結果",
                         hint="1 周を超える shift も、送信先は (i + shift) % n です。")
        expect_close(got, want, f"ring_shift(xs, {shift}) の結果", hint=f"送信元→送信先は {order} です。")
    prims = primitives(lambda a: fn(a, 1), xs)
    if "ppermute" not in prims:
        how = "all_gather ですべて集めると通信が n 倍になります" if "all_gather" in prims else \
            "jnp.roll はデバイスの中の並べ替えで、送受信ではありません"
        raise Fail(f"値は合っていますが、jaxpr に ppermute がありません（{how}）。pmap の中で lax.ppermute を使いましょう。")
    return f"{n} デバイスの環で shift={shifts} が一致し、ppermute で送っています。"
