"""6.1-1 rbf_features: 1 点と K 個の中心から K 個の特徴（in_axes=(None, 0, 0)）。"""
from __future__ import annotations

import numpy as np

from ...checking import LearnerError, call, exercise, expect_close, expect_no_batch_loop, f32
from .common import Spy, exercise_rng, expect_used, guard, sizes_fail

# 6.1-1 -------------------------------------------------------------------------------
# 1 つの点 x と K 個の中心（centers と、中心ごとの幅 gammas）から K 個の特徴: in_axes=(None, 0, 0)

def _kernel_1(spy: Spy, d: int):
    """隠し kernel（ラプラス核）: x (d,)、c (d,)、g () -> スカラー。"""
    import jax.numpy as jnp

    hint = "x は全中心で共通（None）、centers と gammas は中心ごと（0）です。"

    def kernel(x, c, g):
        spy.calls += 1
        guard("kernel", "x", x, (d,), hint)
        guard("kernel", "c", c, (d,), hint)
        guard("kernel", "g", g, (), hint)
        return jnp.exp(-g * jnp.sum(jnp.abs(x - c)))

    return kernel


@exercise("6.1-1", "rbf_features")
def check_rbf_features(fn):
    rng = exercise_rng(1)
    d, k = 3, 7

    def data(n):
        return f32(rng.normal(size=(d,))), f32(rng.normal(size=(n, d))), f32(rng.uniform(0.2, 1.5, size=(n,)))

    x, centers, gammas = data(k)
    spy = Spy()
    try:
        got = call(fn, _kernel_1(spy, d), x, centers, gammas)
    except LearnerError as exc:
        sizes_fail(exc, lambda names: (
            "x は全中心で共通の 1 点なので、x の in_axes は None です。"
            if "x" in names else "共通の引数の in_axes は None、中心ごとの引数は 0 です。"))
        raise
    expect_used("kernel", spy)
    want = np.exp(-gammas * np.abs(x - centers).sum(1))
    expect_close(got, want, "rbf_features(kernel, x, centers, gammas) の結果",
                 )
    expect_no_batch_loop(fn, lambda n: (_kernel_1(Spy(), d), *data(n)), what="中心の数")
    return f"別の kernel と中心 {k} 個で一致し、jaxpr は中心の数に依存しません。"
