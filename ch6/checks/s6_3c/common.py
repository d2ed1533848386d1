"""6.3c の演習チェックで共有する道具: メッシュの軸の名前、隠し乱数、jaxpr の式、2 つ組の取り出し。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, LearnerError, hidden_rng, traced_eqns

MESH_AXIS = "data"  # どちらの演習もメッシュの軸の名前は "data"（問題文に書いてある）


def exercise_rng(tag: int) -> np.random.Generator:
    """6.3c-k の隠し入力の乱数（seed は 63_300 + k）。"""
    return hidden_rng(63_300 + tag)


def learner_eqns(fn, *args):
    """traced_eqns と同じ。ただし関数の中の jax.set_mesh は、何が違うかを言って不合格にする。"""
    try:
        return traced_eqns(fn, *args)
    except LearnerError as err:
        exc = err.exc
        if isinstance(exc, ValueError) and "set_mesh" in str(exc) and "outside of" in str(exc):
            raise Fail("関数の中で jax.set_mesh を使っていますが、jax.set_mesh はトレースの外でしか使えません。"
                       "メッシュは呼ぶ側の with jax.set_mesh(mesh) で与えます。") from None
        raise


def shard_map_axes(eqns) -> list[tuple[str, ...]]:
    """jaxpr の shard_map の式ごとに、そのメッシュの軸の名前。"""
    return [tuple(e.params["mesh"].axis_names) for e in eqns if e.primitive.name == "shard_map"]


def pair(out, what: str):
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        got = f"長さ {len(out)} の {type(out).__name__}" if isinstance(out, (tuple, list)) else type(out).__name__
        raise Fail(f"{what}の 2 つ組のはずが、{got} でした。タプルかリストで返してください。")
    return out
