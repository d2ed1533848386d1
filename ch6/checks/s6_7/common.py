"""6.7 の演習チェックで共有する道具: 隠し乱数、隠しのチップの行、返り値の確かめ、小さなモデル。"""
from __future__ import annotations

import contextlib

import numpy as np

from ...checking import Fail, f32, hidden_rng, is_close


def rng(tag: int) -> np.random.Generator:
    return hidden_rng(67_000 + tag)


def hidden_chip(r: np.random.Generator, kind: str, name: str, *, torus_axes: int = 3):
    """実在しない数値のチップの行（ch6.hardware.Chip そのもの: 導いた量 axis_bw・all_axes_bw・link_oneway も同じ式）。

    値はおよそ 1 桁の範囲で揺らすので、公表値の表を書き込んだ答えは通りません。"""
    from ...hardware import Chip

    base = dict(name=name, kind=kind, flops=float(r.uniform(2e14, 2e15)), hbm_bw=float(r.uniform(8e11, 8e12)),
                hbm_bytes=float(r.uniform(16e9, 192e9)), source="隠しの行", url="", link_source="隠しの行", link_url="")
    if kind == "TPU":
        return Chip(**base, ici_link_oneway=float(r.uniform(3e10, 2e11)), torus_axes=torus_axes,
                    dcn_bw_per_host=float(r.uniform(1e10, 5e10)), chips_per_host=4)
    return Chip(**base, nvlink_oneway=float(r.uniform(2e11, 1e12)), nvlink_domain=8, ib_bw=float(r.uniform(2e10, 1e11)))


def with_values(hw, **values):
    """チップの行の一部の値だけを変えた行（導いた量もその値から）。"""
    import dataclasses

    return dataclasses.replace(hw, **values)


def number(x, what: str) -> float:
    """学習者が返した値を有限の実数に（数でなければ、何が返ったかを言って不合格）。"""
    if isinstance(x, bool) or x is None:
        raise Fail(f"{what}は数のはずですが、{type(x).__name__} が返りました。")
    try:
        v = float(np.asarray(x))
    except Exception:
        raise Fail(f"{what}は数のはずですが、{type(x).__name__} が返りました。") from None
    if not np.isfinite(v):
        raise Fail(f"{what}が {v} です（有限の数のはずです）。")
    return v


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
        raise Fail(f"{what}は 2 つ組{names}をタプルかリストで返してください。実際は {type(out).__name__} です。")
    if len(out) != 2:
        raise Fail(f"{what}は 2 つ組{names}を返してください。実際は {len(out)} 要素です。")
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


# ---------------------------------------------------------------- 問題 2・3 の小さなモデル

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


def reference_accumulate(loss_fn, params, batch, k):
    """問題 3 で学習者に渡す、問題 2 と同じ働きの関数（前から順に k 個に切る）。"""
    import jax
    import jax.numpy as jnp
    from jax import lax

    micro = jax.tree.map(lambda a: a.reshape(k, a.shape[0] // k, *a.shape[1:]), batch)

    def body(total, mb):
        value = jax.value_and_grad(loss_fn)(params, mb)
        return jax.tree.map(jnp.add, total, value), None

    zero = (jnp.zeros(()), jax.tree.map(jnp.zeros_like, params))
    total, _ = lax.scan(body, zero, micro)
    return jax.tree.map(lambda a: a / k, total)
