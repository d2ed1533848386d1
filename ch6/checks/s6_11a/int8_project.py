"""6.11a-2 int8_project: 出力チャネルごとのスケールを縮約の後に掛ける int8 の射影 einsum("bsd,fd->bsf", x, q × scale)。"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ...checking import Fail, LearnerError, call, exercise, expect_close, fmt, traced_eqns
from ..lesson_calls import lesson_calls
from .common import exercise_rng

# 必須: x (B, S, D)、q int8 (F, D)、scale float32 (F, 1) → (B, S, F)、dtype は x と同じ。値は x · (q × scale)ᵀ。
# 構造（x が bf16 のとき）: 重みの大きさ（F × D 要素）の浮動小数の配列は、q を x の型に変えたものだけ。
# 重みの大きさの掛け算・割り算はない。


def cases():
    """隠し入力: (x, q, scale)。1 つ目は S ≠ F（スケールの長さ 1 の軸を残すと形の誤り）、2 つ目は S = F
    （残すと誤ったブロードキャストで形は合う）、3 つ目は float32 の x。"""
    r = exercise_rng(2)
    out = []
    for b, s, d, f, dtype in [(2, 3, 64, 40, jnp.bfloat16), (3, 24, 48, 24, jnp.bfloat16), (2, 5, 32, 16, jnp.float32)]:
        w = r.normal(size=(f, d)) * r.uniform(0.05, 2.0, size=(f, 1))
        scale = (np.abs(w).max(axis=1, keepdims=True) / 127).astype(np.float32)
        q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
        x = jnp.asarray(r.normal(size=(b, s, d)), dtype)
        out.append((x, jnp.asarray(q), jnp.asarray(scale)))
    return out


def reference(x, q, scale):
    w = np.asarray(q, np.float64) * np.asarray(scale, np.float64)
    return np.einsum("bsd,fd->bsf", np.asarray(x, np.float64), w)


def _structure(fn, x, q) -> None:
    """x が bf16 のとき: 重みの大きさの掛け算・割り算と、float32 の重みがないこと。"""
    try:
        eqns = traced_eqns(fn, x, q, cases_scale(q))
    except LearnerError as err:
        if type(err.exc).__name__ == "TracerArrayConversionError":
            raise Fail("NumPy（np.einsum や np.asarray など）で計算しています。int8_project は jit の中で呼ばれるので "
                       "jnp を使います。") from None
        raise
    size = int(np.prod(q.shape))
    weight_sized = []
    for e in eqns:
        for v in e.outvars:
            aval = getattr(v, "aval", None)
            shape = getattr(aval, "shape", None)
            if shape is not None and int(np.prod(shape)) == size and jnp.issubdtype(aval.dtype, jnp.floating):
                weight_sized.append((e.primitive.name, tuple(shape), aval.dtype))
    for name, shape, _ in weight_sized:
        if name in ("mul", "div"):
            raise Fail(f"重みの大きさ {fmt(shape)} の配列にスケールを掛けています（{name}）。重みを先に戻すと、"
                       "チップでは戻した重みを HBM に書いて読み直します。縮約の後の出力に掛けます。")
    for _, shape, dtype in weight_sized:
        if dtype == jnp.float32:
            raise Fail(f"q を float32 の重み {fmt(shape)} に変えているので、重みの 4 倍のバイトになります。"
                       "q は x の型（bf16）に変えて縮約し、float32 は縮約の結果（preferred_element_type）にだけ使ってください。")


def _mistakes(x, q, scale):
    """値の誤りの形（float64 で求めた出力）と、そのメッセージ。"""
    xs, qs = np.asarray(x, np.float64), np.asarray(q, np.float64)
    s = np.asarray(scale, np.float64)[:, 0]
    raw = np.einsum("bsd,fd->bsf", xs, qs)
    as_int8 = np.einsum("bsd,fd->bsf", np.trunc(xs), qs) * s
    return [
        (raw, "scale を掛けていません。q は量子化した整数の値なので、縮約の後の出力に出力チャネルごとの scale を掛けます。"),
        (raw / s, "scale で割っています。q × scale が元の重みなので、縮約の後の出力に scale を掛けます。"),
        (as_int8, "x を int8 に変えて縮約しています。x の小数が切り捨てられるので、q のほうを x の型に変えて縮約します。"),
    ]


def cases_scale(q):
    return jnp.ones((q.shape[0], 1), jnp.float32)


@exercise("6.11a-2", "int8_project")
def check_int8_project(fn):
    for k, (x, q, scale) in enumerate(cases()):
        b, s, _ = x.shape
        f = q.shape[0]
        try:
            with lesson_calls(fn, "ch6.serving", "project") as called:
                got = call(fn, x, q, scale)
        except LearnerError as err:
            if "broadcast" in str(err.exc).lower() or "incompatible shapes" in str(err.exc).lower():
                raise Fail(f"形 {fmt(tuple(scale.shape))} の scale を、長さ 1 の軸を残したまま出力に掛けています。"
                           "scale[:, 0] などで形 (F,) にしてから掛けます。") from None
            raise
        if called:
            raise Fail("本編の serving.project を呼んでいます。q を x の型に変えた縮約と、その後のスケールの掛け算を、"
                       "この関数の中で自分で書いてください。")
        if not hasattr(got, "shape") or not hasattr(got, "dtype"):
            raise Fail(f"戻り値は配列のはずが、{type(got).__name__} でした。")
        if tuple(got.shape) != (b, s, f):
            raise Fail(f"出力の形は (B, S, F) = {fmt((b, s, f))} のはずが、{fmt(tuple(got.shape))} でした。"
                       "scale の長さ 1 の軸を除いて、形 (F,) にしてから掛けます。")
        want = reference(x, q, scale)
        wrong_broadcast = np.einsum("bsd,fd->bsf", np.asarray(x, np.float64), np.asarray(q, np.float64)) \
            * np.asarray(scale, np.float64)[None, :, 0:1] if s == f else None
        g = np.asarray(jnp.asarray(got, jnp.float32), np.float64)
        tol = 2e-2 * np.abs(want).max()
        for alt, text in _mistakes(x, q, scale):
            if np.abs(g - alt).max() <= 2e-2 * np.abs(alt).max() and np.abs(g - want).max() > tol:
                raise Fail(text)
        if wrong_broadcast is not None and np.abs(g - wrong_broadcast).max() <= tol < np.abs(g - want).max():
            raise Fail(f"scale（形 {fmt(tuple(scale.shape))}）を長さ 1 の軸を残したまま掛けたので、系列の軸に沿って"
                       "ブロードキャストされました。scale[:, 0] で形 (F,) にして、出力チャネルの軸に掛けます。")
        expect_close(g, want, "int8_project の出力", rtol=1e-2, atol=tol,
                     hint="値は x · (q × scale)ᵀ です。scale は出力チャネル f ごとです。")
        if got.dtype != x.dtype:
            raise Fail(f"出力の dtype は x と同じ {x.dtype} のはずが、{got.dtype} でした。"
                       "縮約の結果に scale を掛けた後、.astype(x.dtype) で戻します。")
        if k == 0:
            _structure(fn, x, q)
    return ("隠しの 3 通り（bf16 と float32、系列の長さと出力チャネルの数が等しい組を含む）で値と dtype が合いました。"
            "jaxpr には、スケールを重みに掛ける演算も float32 の重みもありません。")
