"""6.7 の演習チェックで共有する道具: 隠し乱数、隠しのチップの行、返り値の確かめ、小さなモデル。"""
from __future__ import annotations

import contextlib

import numpy as np

from ...checking import Fail, f32, hidden_rng, is_close
from ..chips import hidden_chip, number, with_values  # noqa: F401  (6.7 の各チェックが使う名前を残す)


def rng(tag: int) -> np.random.Generator:
    return hidden_rng(67_000 + tag)


def show(x) -> str:
    """学習者が返した値の短い表示（数なら有効数字 5 桁、そうでなければ型の名前）。"""
    try:
        v = float(np.asarray(x))
    except Exception:
        return type(x).__name__
    return f"{v:.5g}"


def pair(out, what: str, names: str):
    """2 つ組（タプルかリスト）を確かめて返す。"""
    if not isinstance(out, (tuple, list)):
        raise Fail(f"{what} は 2 つ組{names}のタプルかリストのはずが、{type(out).__name__} が返りました。")
    if len(out) != 2:
        raise Fail(f"{what} は 2 つ組{names}のはずが、{type(out).__name__}（要素 {len(out)} 個）が返りました。")
    return out[0], out[1]


def close(a: float, b: float, rtol: float = 1e-6) -> bool:
    return is_close(a, b, rtol=rtol, atol=1e-30)


@contextlib.contextmanager
def compile_events():
    """``with compile_events() as seen:`` の間に JAX がトレースした回数 seen["trace"] と XLA がコンパイルした回数
    seen["compile"]（トレースはキャッシュに当たってもコンパイルし直すことがあるので、両方を数える）。"""
    import jax.monitoring

    seen = {"trace": 0, "compile": 0}
    kinds = {"/jax/core/compile/jaxpr_trace_duration": "trace", "/jax/core/compile/backend_compile_duration": "compile"}

    def listener(event, duration, **kwargs):
        if event in kinds:
            seen[kinds[event]] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield seen
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


# ---------------------------------------------------------------- 6.7-2（grad_accum）と 6.7-3（microbatch_budget）の小さなモデル

def tanh_model(r: np.random.Generator, batch: int, d: int, h: int):
    """入れ子の params、辞書のバッチ、バッチ平均の損失。"""
    params = {"enc": {"W": f32(r.normal(size=(d, h)) / np.sqrt(d)), "b": f32(r.normal(size=(h,)) * 0.1)},
              "out": f32(r.normal(size=(h,)) / np.sqrt(h))}
    data = {"x": f32(r.normal(size=(batch, d))), "y": f32(r.normal(size=(batch,)))}

    def loss_fn(p, b):
        import jax.numpy as jnp

        hidden = jnp.tanh(b["x"] @ p["enc"]["W"] + p["enc"]["b"])
        return jnp.mean((hidden @ p["out"] - b["y"]) ** 2) + 0.01 * jnp.sum(p["out"] ** 2)

    return params, data, loss_fn


def lesson_accumulate(loss_fn, params, batch, k):
    """6.7-3 で学習者に渡す関数: 本編 4.4 節の accumulated_grad と同じく、k 個のマイクロバッチの勾配を lax.scan で
    平均する。バッチは {"x", "y"} の辞書だけを受け取り、損失は返さない（6.7-2 の答えではない: 学習者版に 6.7-2 の
    答えを置かないため。tests/tools/test_learner_answers.py）。"""
    import jax
    import jax.numpy as jnp
    from jax import lax

    xs = batch["x"].reshape(k, -1, *batch["x"].shape[1:])
    ys = batch["y"].reshape(k, -1, *batch["y"].shape[1:])

    def step(acc, xy):
        g = jax.grad(loss_fn)(params, {"x": xy[0], "y": xy[1]})
        return jax.tree.map(jnp.add, acc, g), None

    acc, _ = lax.scan(step, jax.tree.map(jnp.zeros_like, params), (xs, ys))
    return jax.tree.map(lambda a: a / k, acc)
