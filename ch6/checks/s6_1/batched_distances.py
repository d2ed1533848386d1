"""6.1-3 batched_distances: B 組の点群と共通の点集合の距離（vmap を 3 段重ねる）。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, LearnerError, call, exercise, expect_close, expect_no_batch_loop, f32, fmt
from .common import Spy, exercise_rng, expect_used, guard, shape_of, sizes_fail

# 6.1-3 -------------------------------------------------------------------------------
# B 組の点群 Xs (B, n, d) と共通の点集合 Y (m, d): 距離 (B, n, m)。vmap を 3 段重ねる

def _pair_3(spy: Spy, d: int):
    """隠し pair_fn（コサイン距離）: x (d,)、y (d,) -> スカラー。"""
    import jax.numpy as jnp

    hint = "vmap を 3 段重ね、組・組の中の点・Y の点をそれぞれバッチにしてください。"

    def pair_fn(x, y):
        spy.calls += 1
        guard("pair_fn", "x", x, (d,), hint)
        guard("pair_fn", "y", y, (d,), hint)
        return 1.0 - jnp.dot(x, y) / jnp.sqrt(jnp.dot(x, x) * jnp.dot(y, y))

    return pair_fn


def _pair_3_np(xs, y):
    xs, y = xs.astype(np.float64), y.astype(np.float64)
    dots = np.einsum("bnd,md->bnm", xs, y)
    return 1.0 - dots / np.sqrt((xs ** 2).sum(-1)[:, :, None] * (y ** 2).sum(-1)[None, None, :])


@exercise("6.1-3", "batched_distances")
def check_batched_distances(fn):
    rng = exercise_rng(3)
    b, n, m, d = 3, 5, 4, 6

    def data(b_, n_, m_):
        return f32(rng.normal(size=(b_, n_, d))), f32(rng.normal(size=(m_, d)))

    xs, y = data(b, n, m)
    spy = Spy()
    try:
        got = call(fn, _pair_3(spy, d), xs, y)
    except LearnerError as exc:
        sizes_fail(exc, lambda names: (
            "Y は共通の集合なので、外側の 2 段では Y の in_axes は None です。"))
        raise
    expect_used("pair_fn", spy)
    want = _pair_3_np(xs, y)
    shape = shape_of(got)
    if shape is not None and shape != want.shape and sorted(shape) == sorted(want.shape):
        raise Fail(f"出力の軸の順番が違い、(組, 点, Y の点) = {fmt(want.shape)} のはずが {fmt(shape)} でした。"
                   "外側の段から組、組の中の点、Y の点の順にバッチにします。")
    expect_close(got, want, "batched_distances(pair_fn, Xs, Y) の結果", rtol=1e-4, atol=1e-4,
                 )
    for what, make in (("点群の組の数", lambda k: (_pair_3(Spy(), d), *data(k, n, m))),
                       ("点群の中の点の数", lambda k: (_pair_3(Spy(), d), *data(b, k, m))),
                       ("Y の点の数", lambda k: (_pair_3(Spy(), d), *data(b, n, k)))):
        expect_no_batch_loop(fn, make, sizes=(2, 3), what=what)
    return f"別の pair_fn と Xs {fmt(xs.shape)}、Y {fmt(y.shape)} で一致し、jaxpr は 3 つの大きさに依存しません。"
