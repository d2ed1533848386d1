"""PartitionSpec を比べる・表示する道具と、デバイスの並びを決めたメッシュ。6.3a と 6.6 のチェックが共有します。"""
from __future__ import annotations


def spec_parts(spec) -> tuple:
    """PartitionSpec の各次元の指定（unreduced などがあっても iter せずに読む）。"""
    parts = getattr(spec, "partitions", None)
    return tuple(parts) if parts is not None else tuple(spec)


def norm_spec(spec) -> tuple:
    """PartitionSpec を比べやすい形に: 1 要素のタプルは名前に、末尾の None は落とす。"""
    out = []
    for e in spec_parts(spec):
        if isinstance(e, (tuple, list)):
            e = tuple(e)
            e = None if not e else (e[0] if len(e) == 1 else e)
        out.append(e)
    while out and out[-1] is None:
        out.pop()
    return tuple(out)


def show_spec(spec, ndim: int = 0) -> str:
    """表示用: 正規化して、ndim まで None で埋める（例: P('data', None)）。"""
    e = list(norm_spec(spec))
    if not e:
        return "P()"
    e += [None] * (ndim - len(e))
    return "P(" + ", ".join(repr(v) for v in e) + ")"


def mesh_in_order(shape: tuple[int, ...], names: tuple[str, ...], devices):
    """devices をこの並びのまま shape に並べたメッシュ（軸の種類は、この JAX の jax.make_mesh の既定と同じ）。

    jax.make_mesh は、複数のチップの TPU ではデバイスをチップのつながりの順に並べ直します（TPU v5e の 8 チップなど）。
    チェックが並びを入れ替えたメッシュを渡すときは、並べ直されないようにこちらで作ります。CPU と 1 チップでは
    jax.make_mesh(shape, names, devices=devices) と同じメッシュです。"""
    import jax
    import numpy as np

    devices = list(devices)[: int(np.prod(shape))]
    kinds = jax.make_mesh(shape, names, devices=devices).axis_types
    return jax.sharding.Mesh(np.array(devices, dtype=object).reshape(shape), names, axis_types=kinds)
