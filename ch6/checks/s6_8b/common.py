"""6.8b のチェックで共有するもの: 軸名、隠し乱数、メッシュ（1 次元と 2 次元）と配置、比べる道具。"""
from __future__ import annotations

import os

import numpy as np

from ... import meshes
from ...checking import Fail, LearnerError, call, hidden_rng, is_close

AXIS = "seq"
PERMUTE = {"ppermute", "ppermute_start"}


def exercise_rng(tag: int) -> np.random.Generator:
    return hidden_rng(68_200 + tag)


def section_mesh():
    """軸 "seq" だけの 1 次元メッシュ（すべてのデバイス）。"""
    return meshes.mesh_1d(AXIS)


def section_meshes():
    """1 次元のメッシュと、("data", "seq") の 2 次元のメッシュ。2 デバイス以上では、2 次元のメッシュの seq 軸は
    デバイスの数より小さい（4 以上の偶数なら 2、2 と奇数なら 1）ので、軸の大きさを jax.device_count() で読む誤りが
    値か形に出る。1 デバイスでは両方とも大きさ 1 で、その誤りは見分けられない。"""
    import jax

    n = meshes.device_count()
    shape = (n // 2, 2) if n % 2 == 0 and n > 2 else (n, 1)
    return [section_mesh(), jax.make_mesh(shape, ("data", AXIS))]


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


def raised_in_jax(exc: BaseException) -> bool:
    """例外を最後に出したのが JAX の中か（学習者の関数の assert ではなく）。"""
    tb, last = exc.__traceback__, None
    while tb is not None:
        last, tb = tb.tb_frame.f_code.co_filename, tb.tb_next
    return last is not None and f"{os.sep}jax{os.sep}" in last


def run_learner(g, *args):
    """jit + shard_map で包んだ学習者の関数を呼ぶ。軸の名前の誤りは 1 行の説明に直す。"""
    try:
        return call(g, *args)
    except LearnerError as exc:
        msg = str(exc.exc)
        if "unbound axis name" in msg or (isinstance(exc.exc, AssertionError) and not msg.strip()
                                          and raised_in_jax(exc.exc)):
            raise Fail(f"集団通信に渡した軸の名前がメッシュにないので、JAX が {type(exc.exc).__name__} を出しました。"
                       f"軸の名前は '{AXIS}' です。") from None
        raise
