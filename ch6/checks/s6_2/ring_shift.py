"""6.2-3 ring_shift: 環の上で shift 個先のデバイスへ送る（lax.ppermute）。

すべての shift の結果を先に集めてから、誤りの形をすべての shift で確かめて名前を言う（1 つの shift の結果だけでは、
「shift を使っていない」と「負の shift の符号を落とした」が同じ値になることがある）。
デバイスが 1 個ではどの shift でも行が動かず、2 個の環では右回りと左回りが同じなので、そのデバイスの数では
見分けられない誤りを正解の 1 行が言う。
"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, call, cannot_tell, exercise, expect_close, expect_shape, f32, is_close, n_devices
from .common import exercise_rng, primitives

# 6.2-3 -------------------------------------------------------------------------------


def hidden_shifts(n: int) -> list[int]:
    """1 と -1、3 個以上なら 2、2 個以上なら 1 周ちょうどの n（何も動かない）と 1 周を超える n + 1。"""
    return [1, -1] + ([2] if n > 2 else []) + ([n, n + 1] if n > 1 else [])


def _order(n: int, shift: int) -> str:
    return ", ".join(f"{(i - shift) % n}→{i}" for i in range(min(n, 4))) + ("…" if n > 4 else "")


def _all(shifts, results, rule) -> bool:
    return all(is_close(results[s], rule(s)) for s in shifts)


def _named(xs, shifts, results) -> str | None:
    """すべての shift の結果が当てはまる誤りの説明（なければ None）。"""
    n = len(xs)
    wrong = [s for s in shifts if not is_close(results[s], np.roll(xs, s, axis=0))]
    s = wrong[0]
    # 1 周までの shift がすべて合っていれば、違いは 1 周を超える shift だけ（shift を使わない答えとも見分けない）
    if n > 1 and all(s_ >= n for s_ in wrong):
        return (f"shift={s}（デバイスの数 {n} 以上）の結果が違いました。"
                f"1 周を超える shift も、送信先は (i + shift) % n です（{_order(n, s)}）。")
    if _all(shifts, results, lambda t: np.roll(xs, 1, axis=0)):
        return (f"shift={s} でも shift=1 と同じ結果なので、引数 shift が使われていません。"
                f"送信元→送信先は {_order(n, s)} です。")
    if n > 2 and _all(shifts, results, lambda t: np.roll(xs, -t, axis=0)):
        return f"shift={s} で回る向きが逆です。perm の組は (送信元, 送信先) で、{_order(n, s)} の向きに送ります。"
    if n > 2 and _all(shifts, results, lambda t: np.roll(xs, abs(t), axis=0)):
        return (f"shift={s} で shift={-s} と同じ向きに回ったので、負の shift を正の向きとして扱っています。"
                f"送信先は (i + shift) % n で、{_order(n, s)} です。")
    got, want = np.asarray(results[s], np.float64), np.roll(xs, s, axis=0)
    empty = [d for d in range(n) if np.all(got[d] == 0) and not is_close(got[d], want[d])]
    rest = [d for d in range(n) if d not in empty]
    if empty and is_close(got[rest], want[rest]):
        return (f"shift={s} でデバイス {empty[0]} に何も届かず、0 のままでした。"
                "perm には、すべてのデバイスを送信元として 1 回ずつ入れます。")
    if s % n and is_close(got, xs):
        return f"shift={s} で値が動いていません。lax.ppermute の perm で送信先を指定してください（{_order(n, s)}）。"
    return None


@exercise("6.2-3", "ring_shift")
def check_ring_shift(fn):
    n = n_devices()
    rng = exercise_rng(3)
    xs = f32(rng.normal(size=(n, 3)))
    shifts = hidden_shifts(n)
    results = {}
    for shift in shifts:
        got = call(fn, xs, shift)
        expect_shape(got, xs.shape, f"ring_shift(xs, {shift}) の結果")
        results[shift] = got
    if any(not is_close(results[s], np.roll(xs, s, axis=0)) for s in shifts):
        why = _named(xs, shifts, results)
        if why:
            raise Fail(why)
        s = next(s for s in shifts if not is_close(results[s], np.roll(xs, s, axis=0)))
        expect_close(results[s], np.roll(xs, s, axis=0), f"ring_shift(xs, {s}) の結果",
                     hint=f"送信元→送信先は {_order(n, s)} です。")
    prims = primitives(lambda a: fn(a, 1), xs)
    if "ppermute" not in prims:
        how = "all_gather ですべて集めると通信が n 倍になります" if "all_gather" in prims else \
            "jnp.roll はデバイスの中の並べ替えで、送受信ではありません"
        raise Fail(f"値は合っていますが、jaxpr に ppermute がありません（{how}）。pmap の中で lax.ppermute を使ってください。")
    note = (cannot_tell("どの shift でも行が動かず、送る向きと shift の使い方") if n == 1 else
            cannot_tell("右回りと左回りが同じ環になり、送る向きの誤り") if n == 2 else "")
    return f"デバイス {n} 個の環で shift={shifts} が一致し、ppermute で送っています{note}。"
