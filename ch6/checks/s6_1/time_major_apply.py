"""6.1-2 time_major_apply: 時間優先 (T, B, F) の系列と (B,) の長さ（in_axes=(1, 0)、out_axes=1）。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, LearnerError, call, exercise, expect_close, expect_no_batch_loop, f32, fmt
from .common import Spy, exercise_rng, expect_used, guard, shape_of, sizes_fail

# 6.1-2 -------------------------------------------------------------------------------
# 時間優先 (T, B, F) の系列と (B,) の長さ: in_axes=(1, 0)、out_axes=1

def _fn_2(spy: Spy, t: int, f: int, b: int):
    """隠し fn: 長さまでの累積平均、それより後は 0。seq (T, F)、length () -> (T, F)。"""
    import jax.numpy as jnp

    def fn(seq, length):
        spy.calls += 1
        hint = ""
        if shape_of(seq) == (b, f):
            hint = f"seqs の 0 軸は時間（{t}）で、バッチ（{b} 本）は 1 軸目です。"
        guard("fn", "seq", seq, (t, f), hint)
        guard("fn", "length", length, (), "lengths は 0 軸がバッチです。")
        steps = jnp.arange(seq.shape[0])
        running = jnp.cumsum(seq, axis=0) / (steps + 1.0)[:, None]
        return jnp.where((steps < length)[:, None], running, 0.0)

    return fn


def _fn_2_np(seqs, lengths):
    t = seqs.shape[0]
    steps = np.arange(t)
    running = np.cumsum(seqs.astype(np.float64), axis=0) / (steps + 1.0)[:, None, None]
    return np.where((steps[:, None] < lengths[None, :])[:, :, None], running, 0.0)


@exercise("6.1-2", "time_major_apply")
def check_time_major(fn):
    rng = exercise_rng(2)
    t, b, f = 6, 4, 3
    seqs = f32(rng.normal(size=(t, b, f)))
    lengths = np.array([2, 6, 0, 4], dtype=np.int32)
    spy = Spy()
    try:
        got = call(fn, _fn_2(spy, t, f, b), seqs, lengths)
    except LearnerError as exc:
        sizes_fail(exc, lambda names: (
            "seqs のバッチは 1 軸目、lengths のバッチは 0 軸目です。"))
        raise
    expect_used("fn", spy)
    want = _fn_2_np(seqs, lengths)
    if shape_of(got) == (b, t, f):
        raise Fail(f"出力が (バッチ, 時間, 特徴) = {fmt((b, t, f))} の並びで、時間優先の {fmt((t, b, f))} ではありません。"
                   "出力でのバッチ軸の位置は out_axes で決めます。")
    expect_close(got, want, "time_major_apply(fn, seqs, lengths) の結果",
                 )
    expect_no_batch_loop(fn, lambda n: (_fn_2(Spy(), t, f, n), f32(rng.normal(size=(t, n, f))),
                                        rng.integers(0, t + 1, size=n).astype(np.int32)), sizes=(3, 5))
    return f"隠し fn と隠し入力（時間 {t}、{b} 本、特徴 {f}）で一致し、jaxpr はバッチの大きさに依存しません。"
