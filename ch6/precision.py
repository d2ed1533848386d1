"""float32 の計算がどの精度で行われるか（バックエンドごと）と、それに合わせた比較。

TPU は float32 の行列積を、既定では入力を bf16（仮数 8 ビット、相対の丸め誤差は最大 2^-8 ≈ 0.4%）に丸めて計算します
（``jax.default_matmul_precision`` の既定値。https://docs.jax.dev/en/latest/_autosummary/jax.default_matmul_precision.html ）。
GPU も TF32 を使う機種では同じように入力を丸めます。CPU は float32 のまま計算します。そのため、
「vmap の結果とループの結果は同じ」のような比較は、CPU で通る許容誤差（1e-5 など）では TPU で通りません。

- :func:`matmul_rounds_inputs`: 既定のデバイスで float32 の行列積の入力が丸められるかを、実際に計算して調べる
- :func:`rtol_floor`: このバックエンドの既定の精度で、float32 の結果が持ちうる相対誤差の目安
- :func:`assert_close`: ``np.testing.assert_allclose`` と同じ比較を、許容誤差をこの目安まで広げて行う
- :func:`full`: ``with precision.full():`` の中では行列積を float32 のまま計算する（チェックが学習者の関数を呼ぶとき）
"""
from __future__ import annotations

import contextlib
import functools

import numpy as np

REDUCED_RTOL = 2e-2  # 入力が bf16 に丸められるとき（丸め 0.4% が層を重ねて数倍になっても収まる幅）
ACCELERATOR_RTOL = 1e-4  # 行列積は float32 のままでも、tanh・exp などの近似が CPU と違うバックエンド


@functools.cache
def _rounds(backend: str, precision: str | None) -> bool:
    import jax
    import jax.numpy as jnp

    # 行列積の演算器（TPU の MXU など）を通る大きさで。1×1 の積はベクトル演算になり、丸めが見えない
    x = jnp.zeros((128, 128), dtype=jnp.float32).at[:, 0].set(1.0 + 2.0 ** -12)  # bf16 にも TF32 にも表せない
    y = jnp.ones((128, 128), dtype=jnp.float32)
    return float(jax.device_get(x @ y)[0, 0]) != 1.0 + 2.0 ** -12


def matmul_rounds_inputs() -> bool:
    """既定のデバイスで float32 の行列積が入力を丸めるか（TPU の既定なら True、CPU なら False）。"""
    import jax

    return _rounds(jax.default_backend(), jax.config.jax_default_matmul_precision)


def rtol_floor() -> float:
    """このバックエンドの既定の精度で、float32 の結果に見込む相対誤差（CPU では 0）。"""
    import jax

    if jax.default_backend() == "cpu":
        return 0.0
    return REDUCED_RTOL if matmul_rounds_inputs() else ACCELERATOR_RTOL


def widened(rtol: float, atol: float, scale: float) -> tuple[float, float]:
    """(rtol, atol) をこのバックエンドの目安まで広げる。atol は値の大きさ scale に比例させる
    （打ち消し合って 0 に近い要素でも、誤差は足した項の大きさで決まるため）。"""
    floor = rtol_floor()
    return max(rtol, floor), max(atol, floor * scale)


def assert_close(actual, desired, rtol: float = 1e-7, atol: float = 0.0, err_msg: str = "") -> None:
    """``np.testing.assert_allclose(actual, desired, rtol, atol)`` と同じ。ただし CPU 以外では、許容誤差を
    このバックエンドの既定の精度まで広げます（:func:`widened`。CPU では渡した値のまま）。"""
    want = np.asarray(desired)
    scale = float(np.max(np.abs(want.astype(np.float64)))) if want.size else 0.0
    rtol, atol = widened(rtol, atol, scale)
    np.testing.assert_allclose(np.asarray(actual), want, rtol=rtol, atol=atol, err_msg=err_msg)


def describe() -> str:
    """既定のデバイスでの float32 の行列積の精度を 1 文で。"""
    import jax

    backend = jax.default_backend().upper()
    if matmul_rounds_inputs():
        return (f"{backend} の既定の精度では、float32 の行列積の入力は丸められます（TPU は bf16）。"
                "比べるときの許容誤差はそれに合わせます。")
    return f"{backend} では、float32 の行列積は float32 のまま計算されます。"


@contextlib.contextmanager
def full():
    """この中では float32 の行列積を float32 のまま計算する（``jax.default_matmul_precision("highest")``）。
    CPU では float32 のまま計算されるので、何もしません（jit のキャッシュは精度ごとに別なので、精度を変えると外で作った
    jit 関数がこの中で作り直され、チェックのたびにコンパイルし直すことになるため）。"""
    import jax

    if jax.default_backend() == "cpu":
        yield
        return
    with jax.default_matmul_precision("highest"):
        yield
