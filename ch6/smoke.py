"""授業の前の動作確認（スモークテスト）: ``python -m ch6.smoke``（数十秒。ノートブックは開きません）。

学習者のノートパソコン・Colab・Kaggle で、講座が動くのに要るものを順に確かめ、1 行ずつ ✅ / ❌ で表示します。
どれかが ❌ なら終了コード 1 です。確かめること:

1. Python と JAX の版（講座が動くことを確かめた最も古い JAX、``ch6.env.MIN_JAX`` 以上か）
2. デバイス（CPU なら ``JAX_NUM_CPU_DEVICES`` の模擬デバイス。既定 8 個。``ch6.setup()`` と同じ決め方）
3. vmap・jit + NamedSharding（全デバイスのメッシュ）・shard_map の psum が正しい値を返すこと
4. 講座のチェック（``ch6.run_check``）が動くこと（未解答の関数を ⏳ と判定する）
5. 日本語のラベルの図が描けること（matplotlib と同梱の日本語フォント）
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from .env import DEFAULT_DEVICES, MIN_JAX


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".")[:3] if p.isdigit())


def _python() -> str:
    if sys.version_info < (3, 12):
        raise RuntimeError(f"Python {sys.version.split()[0]} です。講座は Python 3.12 以上で動きます。")
    return f"Python {sys.version.split()[0]}"


def _jax() -> str:
    import jax

    if _version(jax.__version__) < _version(MIN_JAX):
        raise RuntimeError(f"JAX {jax.__version__} は古すぎます（{MIN_JAX} 以上が要ります）。"
                           "講座のフォルダで make setup をやり直すか、Colab では最初のセルを実行してください。")
    return f"JAX {jax.__version__}（{MIN_JAX} 以上）"


def _devices() -> str:
    import jax

    n, backend = jax.device_count(), jax.default_backend()
    return f"{backend} のデバイス {n} 個" + ("（CPU の模擬デバイス）" if backend == "cpu" and n > 1 else "")


def _parallel() -> str:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    n = jax.device_count()
    x = jnp.arange(n * 4, dtype=jnp.float32).reshape(n, 4)
    rows = jax.vmap(jnp.sum)(x)
    np.testing.assert_allclose(np.asarray(rows), np.asarray(x).sum(axis=1))
    mesh = jax.make_mesh((n,), ("data",))
    xs = jax.device_put(x, NamedSharding(mesh, P("data")))
    total = jax.jit(lambda a: (a * 2).sum())(xs)
    np.testing.assert_allclose(float(total), float(np.asarray(x).sum() * 2))
    summed = jax.jit(jax.shard_map(lambda b: jax.lax.psum(b, "data"), mesh=mesh, in_specs=P("data"),
                                   out_specs=P()))(xs)
    np.testing.assert_allclose(np.asarray(summed)[0], np.asarray(x).sum(axis=0))
    return f"vmap・jit + NamedSharding・shard_map の psum（{n} デバイスのメッシュ）"


def _check() -> str:
    from ._core import Status, run_check

    def not_yet(*args, **kwargs):
        raise NotImplementedError

    res = run_check("6.1-1", not_yet)
    if res.status is not Status.NOT_DONE:
        raise RuntimeError(f"チェックが未解答を ⏳ と判定しませんでした: {res.line}")
    return "講座のチェック（未解答を ⏳ と判定）"


def _figure() -> str:
    import io

    import matplotlib_fontja  # noqa: F401  日本語フォント（IPAex ゴシック）
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 1))
    fig.add_subplot().set_title("日本語のラベル")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return f"日本語のラベルの図（PNG {len(buf.getvalue()):,} バイト）"


STEPS: list[tuple[str, Callable[[], str]]] = [
    ("Python", _python), ("JAX", _jax), ("デバイス", _devices), ("並列の計算", _parallel),
    ("チェック", _check), ("図", _figure)]


def run(out=print) -> bool:
    """すべての項目を確かめ、1 行ずつ表示する。すべて通れば True。"""
    os.environ.setdefault("JAX_NUM_CPU_DEVICES", str(DEFAULT_DEVICES))  # ch6.setup() と同じ（JAX を読む前に）
    start, ok = time.perf_counter(), True
    for name, step in STEPS:
        t = time.perf_counter()
        try:
            what = step()
        except Exception as exc:  # 何が足りないかを 1 行で（トレースバックは見せない）
            ok = False
            out(f"❌ {name}: {exc if isinstance(exc, RuntimeError) else f'{type(exc).__name__}: {exc}'}")
            continue
        out(f"✅ {name}: {what}（{time.perf_counter() - t:.1f} 秒）")
    total = time.perf_counter() - start
    out(f"{'✅ 準備ができています' if ok else '❌ 直すところがあります'}（合計 {total:.1f} 秒）。")
    return ok


if __name__ == "__main__":
    sys.exit(0 if run() else 1)
