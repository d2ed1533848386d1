"""6.2-1 normalize_across_devices: 全デバイスの合計で割る（lax.psum）。"""
from __future__ import annotations

from ...checking import PSUM_NAMES, Fail, call, exercise, expect_close, f32, is_close, n_devices
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
            raise Fail(f"出力の形が {(k, n)} で、期待 {(n, k)} の転置です。デバイスの軸は 0 軸目のまま返します"
                       "（in_axes / out_axes は既定の 0 で十分です）。")
        local = xs / xs.sum(axis=1, keepdims=True)
        if n > 1 and is_close(got, local):
            raise Fail("各行（各デバイス）の中だけで合計が 1 になっています。全デバイスの合計で割るには "
                       "lax.psum(x.sum(), axis_name) を使います（pmap に axis_name を付けましょう）。")
        if is_close(got, xs / xs.sum(axis=0, keepdims=True)):
            raise Fail("期待は全要素の合計が 1 ですが、列ごと（0 軸方向）に合計が 1 になっています。x / lax.psum(x, axis_name) のように、ベクトル x をそのまま psum していませんか。"
                       "psum は形を保つので、デバイスをまたいだ要素ごとの和（形 (k,)）になります。"
                       "先にデバイスの中で jnp.sum(x) してから psum すると、全要素の合計になります。")
        if n > 1 and is_close(got, want * n):
            raise Fail(f"値が違います: 全要素の合計が 1 ではなく {n}（デバイスの数）になっています。lax.pmean で割っていませんか。"
                       "全デバイスの平均ではなく合計で割るので、lax.psum です。")
        expect_close(got, want, f"normalize_across_devices(xs) の結果（xs の形 {(n, k)}）",
                     hint="全要素の合計が 1 になるように、全デバイスの合計で割ります。")
    prims = primitives(fn, xs)
    if not prims & PSUM_NAMES:
        raise Fail("値は合っていますが、jaxpr にデバイス間の psum が見つかりません。"
                   "pmap の中で lax.psum を使って全デバイスの合計を取りましょう。")
    return f"隠し入力 ({n}, {ks[0]}) と ({n}, {ks[1]}) で一致し、デバイス間の psum を使っています。"
