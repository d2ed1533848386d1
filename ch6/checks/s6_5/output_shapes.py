"""6.5 の問 5〜7: vmap と shard_map の出力の形、out_specs=P() のエラーの直し方。"""
from __future__ import annotations

import functools

from ...checking import exercise, fmt, n_devices
from .common import Outcome, auto_mesh, grade, outcome_of, quiz_mesh

# 6.5-5 -------------------------------------------------------------------------------
# vmap の出力の形（in_axes=2, out_axes=1）

Q5_SHAPES = {"a": (6, 2, 3), "b": (2, 6, 3), "c": (2, 3, 6)}  # "d" は「エラーになる」


@functools.cache
def q5_truth() -> frozenset:
    import jax
    import jax.numpy as jnp

    def f(x, w):  # x: (2, 5), w: (5, 3) -> (2, 3)
        return x @ w

    X = jax.ShapeDtypeStruct((2, 5, 6), jnp.float32)
    w = jax.ShapeDtypeStruct((5, 3), jnp.float32)
    try:
        shape = tuple(jax.eval_shape(jax.vmap(f, in_axes=(2, None), out_axes=1), X, w).shape)
    except Exception:
        return frozenset({"d"})
    return frozenset(k for k, s in Q5_SHAPES.items() if s == shape)


@exercise("6.5-5", "q5")
def check_q5(fn):
    why = {
        "a": "(6, 2, 3) はバッチ軸が先頭のとき（out_axes=0、既定）の形なので、out_axes が何を指定しているか見直してください。",
        "b": "1 サンプル分の出力の形と、バッチ軸が入る位置をもう一度確かめてください。",
        "c": "(2, 3, 6) はバッチ軸が最後のとき（out_axes=2 または -1）の形です。",
        "d": "in_axes=2 は X の 2 軸目（長さ 6）を指し、X は 3 次元なので有効で、エラーにはなりません。",
    }
    return grade(fn, set(q5_truth()), why, "1 サンプルの出力 (2, 3) の 1 軸目に長さ 6 のバッチ軸が入ります。")


# 6.5-6 -------------------------------------------------------------------------------
# shard_map の出力の形（keepdims=True の平均を out_specs でつなぐ）

def _q6_shapes(n: int) -> dict[str, tuple]:
    return {"a": (1, 6), "b": (n, 6), "c": (2 * n, 6), "d": (6,)}


@functools.cache
def q6_truth(n: int) -> frozenset:
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = quiz_mesh()
    x = jax.device_put(jnp.ones((2 * n, 6)), NamedSharding(mesh, P("data", None)))
    f = jax.shard_map(lambda b: b.mean(axis=0, keepdims=True), mesh=mesh,
                      in_specs=P("data", None), out_specs=P("data", None))
    shape = tuple(f(x).shape)
    return frozenset(k for k, s in _q6_shapes(n).items() if s == shape)


@exercise("6.5-6", "q6")
def check_q6(fn):
    n = n_devices()
    why = {
        "a": "(1, 6) は 1 デバイスの関数が返す形で、全体は out_specs=P('data', None) がそれを data 軸に沿ってつないだ形です。",
        "b": "1 デバイスが返す形と、out_specs が何をつなぐかを確かめてください。",
        "c": "(2*n_devices, 6) は入力 x6 全体の形ですが、各デバイスは平均を取って 1 行にしています。",
        "d": "shard_map は次元の数を保つ（keepdims=True で 1 デバイスの結果は 2 次元）ので、(6,) にはなりません。",
    }
    return grade(fn, set(q6_truth(n)), why,
                  f"各デバイスの (1, 6) が out_specs に従って {n} 個つながり、全体は ({n}, 6) です。")


# 6.5-7 -------------------------------------------------------------------------------
# out_specs=P() のエラーの直し方（Auto のメッシュ）

Q7_OPTIONS = {  # 問題文に載せる変更（表示用）
    "a": "jax.shard_map(..., check_vma=False)",
    "b": "jax.jit(total)",
    "c": 'return lax.psum(x_block.sum(), "data")',
    "d": "x_block.mean()",
}


@functools.cache
def q7_outcomes(n: int) -> dict[str, Outcome]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax
    from jax.sharding import PartitionSpec as P

    mesh = auto_mesh()
    x = jnp.arange(4.0 * n)
    want = float(np.arange(4.0 * n).sum())

    def total(body, **kw):
        return jax.shard_map(body, mesh=mesh, in_specs=P("data"), out_specs=P(), **kw)

    def local_sum(x_block):
        return x_block.sum()

    runs = {
        "a": lambda: total(local_sum, check_vma=False)(x),
        "b": lambda: jax.jit(total(local_sum))(x),
        "c": lambda: total(lambda x_block: lax.psum(x_block.sum(), "data"))(x),
        "d": lambda: total(lambda x_block: x_block.mean())(x),
    }

    def judge(r):
        got = float(np.asarray(r))
        if abs(got - want) <= 1e-4 * max(1.0, abs(want)):
            return Outcome(True, f"全体の合計 {fmt(want)} が返ります")
        return Outcome(False, f"エラーは出ず、全体の合計 {fmt(want)} ではなく {fmt(got)} が返ります")

    return {k: outcome_of(run, judge) for k, run in runs.items()}


@exercise("6.5-7", "q7")
def check_q7(fn):
    out = q7_outcomes(n_devices())
    why = {
        "a": "check_vma=False は検査を止めるだけなので、1 つのデバイスの部分和が「全デバイスで同じ値」として返ります。",
        "c": "各デバイスの値がどうなれば P() で返せるかを見直してください。",
        "b": "jit で包んでも、shard_map の中の値がデバイスごとに違うことは変わりません。",
        "d": "mean に変えても、各デバイスが見ているのはそのシャードだけで、値はデバイスごとに違います。",
    }
    return grade(fn, {k for k, o in out.items() if o.ok}, why,
                  "デバイスごとに違う部分和を全デバイスで足し合わせると、全デバイスで同じ値になり P() で返せます。", out)
