"""6.7 の演習チェックで共有する道具: 隠し乱数、隠しのチップの行、返り値の確かめ、小さなモデル。"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...checking import Fail, f32, hidden_rng, is_close


def rng(tag: int) -> np.random.Generator:
    return hidden_rng(67_000 + tag)


class HiddenChip(NamedTuple):
    """ch6.hardware.Chip と同じ名前の属性を持つ、実在しない数字のチップの行。"""

    name: str
    flops: float
    hbm_bw: float
    link_bw: float
    hbm_bytes: float


def hidden_chip(r: np.random.Generator, name: str = "隠しチップ") -> HiddenChip:
    return HiddenChip(name, float(r.uniform(1e14, 2e15)), float(r.uniform(5e11, 8e12)),
                      float(r.uniform(5e10, 2e12)), float(r.uniform(8e9, 2e11)))


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


def tree_bytes(tree) -> int:
    import jax

    return sum(int(np.prod(np.shape(a))) * np.dtype(a.dtype).itemsize for a in jax.tree.leaves(tree))


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
