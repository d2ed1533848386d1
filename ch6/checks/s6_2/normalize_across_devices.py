"""6.2-1 normalize_across_devices: 全デバイスの合計で割る（lax.psum）。"""
from __future__ import annotations

from ...checking import PSUM_NAMES, Fail, call, cannot_tell, exercise, expect_close, f32, is_close, n_devices
from .common import exercise_rng, primitives

# 6.2-1 -------------------------------------------------------------------------------

@exercise("6.2-1", "normalize_across_devices")
def check_normalize(fn):
    n = n_devices()
    rng = exercise_rng(1)
    ks = [k for k in (5, 3, 4) if k != n][:2]  # 形を変えて 2 回（形の決め打ちを防ぐ）。k != n で転置と区別できる
    for k in ks:
        xs = f32(rng.uniform(0.5, 2.0, size=(n, k)))
        want = xs / xs.sum()
        got = call(fn, xs)
        if getattr(got, "shape", None) == (k, n) and k != n:
            raise Fail(f"出力の形は {(n, k)} のはずが、転置の {(k, n)} でした。デバイスの軸は 0 軸目のまま返します（in_axes / out_axes は既定の 0）。")
        local = xs / xs.sum(axis=1, keepdims=True)
        if n > 1 and is_close(got, local):
            raise Fail("各デバイスの中だけで合計が 1 になっています。全デバイスの合計は lax.psum(x.sum(), axis_name) で求めます。")
        if is_close(got, xs / xs.sum(axis=0, keepdims=True)):
            raise Fail("ベクトル x をそのまま psum したので、列ごとに合計が 1 になっています（psum は形を保ちます）。"
                       "先にデバイスの中で jnp.sum(x) してから psum してください。")
        if n > 1 and is_close(got, xs / xs.sum(axis=1).max()):
            raise Fail("全デバイスの合計ではなく、デバイスごとの合計の最大（lax.pmax）で割っています。"
                       "全要素の合計は lax.psum(jnp.sum(x), axis_name) で求めます。")
        if n > 1 and is_close(got, want * n):
            raise Fail(f"全要素の合計が 1 ではなく {n}（デバイスの数）なので、平均（lax.pmean）で割っています。合計で割るので lax.psum です。")
        expect_close(got, want, f"xs の形 {(n, k)} での結果")
    prims = primitives(fn, xs)
    if not prims & PSUM_NAMES:
        raise Fail("値は合っていますが、jaxpr にデバイス間の psum がありません。pmap の中で lax.psum を使ってください。")
    one = cannot_tell("lax.pmean で割る誤りと、デバイスの中だけで割る誤り") if n == 1 else ""
    return f"形 ({n}, {ks[0]}) と ({n}, {ks[1]}) で一致し、psum を使っています{one}。"
