"""講座で使うメッシュと形の決め方（ノートブックとチェックで 1 か所だけ）。

デバイスの数は 8 とは限らず、2 のべき乗とも限りません（3 台の GPU、6 個の模擬デバイスなど）。
ここの関数は ``jax.device_count()`` を読んで、どの数でも存在するメッシュと形を作ります。
"""
from __future__ import annotations


def device_count() -> int:
    """今の JAX が見ているデバイスの数。"""
    import jax

    return jax.device_count()


def mesh_2d_shape(n: int | None = None) -> tuple[int, int]:
    """(data, model) の形。偶数なら model=2（8 → 4×2、6 → 3×2）、奇数なら model=1（3 → 3×1、1 → 1×1）。"""
    n = device_count() if n is None else n
    model = 2 if n % 2 == 0 else 1
    return n // model, model


def mesh_1d(axis: str = "data", axis_type=None):
    """全デバイスを 1 本の軸に並べたメッシュ（既定は Explicit）。"""
    import jax

    kw = {} if axis_type is None else {"axis_types": (axis_type,)}
    return jax.make_mesh((device_count(),), (axis,), **kw)


def mesh_2d(axes: tuple[str, str] = ("data", "model"), axis_type=None):
    """:func:`mesh_2d_shape` の形の 2 次元メッシュ（既定は Explicit）。"""
    import jax

    kw = {} if axis_type is None else {"axis_types": (axis_type,) * 2}
    return jax.make_mesh(mesh_2d_shape(), axes, **kw)


def multiple_of(n: int, at_least: int) -> int:
    """at_least 以上で n の倍数のうち最小のもの（行数をデバイス数で割り切れるようにする）。"""
    return -(-at_least // n) * n
