"""6.8b のチェックで共有するもの: 軸名、隠し乱数、メッシュと配置、ppermute の組、比べる道具。"""
from __future__ import annotations

import numpy as np

from ... import meshes
from ...checking import Fail, LearnerError, call, hidden_rng, is_close, walk

AXIS = "seq"
PERMUTE = {"ppermute", "ppermute_start"}


def exercise_rng(tag: int) -> np.random.Generator:
    return hidden_rng(68_200 + tag)


def section_mesh():
    return meshes.mesh_1d(AXIS)


def put(mesh, a, spec):
    import jax
    from jax.sharding import NamedSharding

    return jax.device_put(a, NamedSharding(mesh, spec))


def same(a, b, rtol: float = 1e-4, atol: float = 1e-5) -> bool:
    """a が b と同じ形で、有限で、許容誤差の内にあるか。"""
    try:
        arr = np.asarray(a, dtype=np.float64)
    except Exception:
        return False
    return bool(np.all(np.isfinite(arr))) and is_close(arr, b, rtol=rtol, atol=atol)


def run_learner(g, *args):
    """jit + shard_map で包んだ学習者の関数を呼ぶ。shard_map がよく出すエラーは 1 行の説明に直す。"""
    try:
        return call(g, *args)
    except LearnerError as exc:
        msg = str(exc.exc)
        if "unbound axis name" in msg or (isinstance(exc.exc, AssertionError) and not msg.strip()):
            raise Fail(f"JAX の中で {type(exc.exc).__name__} が起きました。集団通信に渡した軸の名前がメッシュにない"
                       f"ときに起きるエラーです。メッシュの軸名は '{AXIS}' です。") from None
        if "ppermute" in msg and ("unique" in msg or "sources" in msg):
            raise Fail("ppermute の組 (送り元, 送り先) で、同じデバイスが 2 回送り元か送り先になっています"
                       f"（JAX のエラー: 「{msg.splitlines()[0][:80]}」）。各デバイスは 1 つずつ送り、1 つずつ受け取ります。") from None
        raise


def ppermute_pairs(g, *args) -> list[set[tuple[int, int]]] | None:
    """g の jaxpr の ppermute ごとの (送り元, 送り先) の組の集合。トレースできなければ None。"""
    import jax

    try:
        jaxpr = jax.make_jaxpr(g)(*args).jaxpr
    except Exception:
        return None
    return [{(int(a), int(b)) for a, b in eqn.params.get("perm", ())}
            for eqn in walk(jaxpr) if eqn.primitive.name in PERMUTE]


def pairs_text(pairs) -> str:
    shown = sorted(pairs)[:4]
    return "[" + ", ".join(f"({a}, {b})" for a, b in shown) + (", …" if len(pairs) > 4 else "") + "]"
