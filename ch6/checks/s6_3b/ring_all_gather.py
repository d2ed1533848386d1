"""6.3b-2 ring_all_gather: ppermute だけで作るリング all-gather。"""
from __future__ import annotations

import numpy as np

from ...checking import (
    PSUM_NAMES,
    Fail,
    LearnerError,
    call,
    cannot_tell,
    exercise,
    expect_close,
    expect_shape,
    f32,
    is_close,
    jaxpr_primitives,
    n_devices,
    traced_eqns,
)
from ...meshes import mesh_2d_shape
from ...show import collectives_line
from .common import (
    ALL_TO_ALL,
    AXIS,
    GATHER,
    LOOPS,
    MAXMIN,
    PERMUTE,
    SCATTER,
    collectives_of,
    exercise_rng,
    forbid,
    put,
    run_learner,
    section_mesh,
    wrap,
)

# 6.3b-2 ------------------------------------------------------------------------------
# 必須: 集団通信は ppermute だけ（all_gather も psum なども使わない）、全デバイスが全体を列の順に持つ。
# 自由: 送る向き（右隣でも左隣でも）、受け取ったブロックの置き方（dynamic_update_slice、並べ替えて concatenate …）。

@exercise("6.3b-2", "ring_all_gather")
def check_ring_all_gather(fn):
    from jax.sharding import PartitionSpec as P

    n, mesh, rng = n_devices(), section_mesh(), exercise_rng(2)
    r, c = 3, 2
    x = f32(rng.normal(size=(r, n * c)))
    g = wrap(fn, mesh, P(None, AXIS), None, stack=True)
    xs = put(mesh, x, P(None, AXIS))
    got = run_learner(g, xs)

    if n > 1 and tuple(getattr(got, "shape", ())) == (n, n, r, c):
        raise Fail(f"各デバイスの結果の形が tiled=False の {(n, r, c)} です。シャードは列（axis=1）に沿ってつないで ({r}, {n * c}) にします。")
    if n > 1 and tuple(getattr(got, "shape", ())) == (n, n * r, c):
        raise Fail(f"シャードを行（axis=0）に沿ってつないだので、結果の形が {(n * r, c)} です。列（axis=1）に沿ってつないで ({r}, {n * c}) にします。")
    expect_shape(got, (n, r, n * c), f"デバイス {n} 個分を積んだ結果",
                 f"各デバイスは列に沿ってつないだ全体 ({r}, {n * c}) を返します。")
    got = np.asarray(got)
    blocks = [x[:, j * c:(j + 1) * c] for j in range(n)]
    for d in range(n):
        if is_close(got[d], x):
            continue
        pieces = [got[d][:, j * c:(j + 1) * c] for j in range(n)]
        owners = [next((k for k, b in enumerate(blocks) if is_close(p, b)), None) for p in pieces]
        if None not in owners and sorted(owners) == list(range(n)):
            raise Fail(f"デバイス {d} の結果はシャードの並び順が違い、先頭から元のデバイス {owners} の順です。"
                       "右隣へ送るリングでは k 回目のシャードの送信元は (番号 - k) % n なので、その位置に書き込んでください。")
        expect_close(got[d], x, f"デバイス {d} の結果",
                     )

    prims = jaxpr_primitives(g, xs)
    forbid(prims, GATHER, "all_gather を使っています。ppermute で隣から受け取る手順を n - 1 回繰り返してください。")
    used = sorted(prims & (PSUM_NAMES | SCATTER | ALL_TO_ALL | MAXMIN))
    if used:
        raise Fail(f"ppermute 以外の集団通信（{', '.join(used)}）を使っています。リング all-gather は ppermute だけで作ります。")
    if n > 1 and not prims & PERMUTE:
        raise Fail("jaxpr に ppermute がありません。lax.ppermute(block, 'x', perm) で隣のデバイスへ送ります。")
    sends = [e.primitive.name for e in traced_eqns(g, xs)]
    rounds = sum(name in PERMUTE for name in sends)
    if n > 1 and not set(sends) & LOOPS and rounds > n - 1:
        raise Fail(f"デバイス {n} 個のリングは {n - 1} 回の送受信でそろうのに、ppermute を {rounds} 回使っています。"
                   "余分な回はすでにあるシャードを送るだけなので、range(1, n) で回してください。")
    counts = collectives_of(g, xs) if n > 1 else {}
    if "all-gather" in counts:
        raise Fail(f"コンパイル結果に all-gather が {counts['all-gather']} 個あります。ppermute だけで組み立ててください。")
    small = _expect_axis_size(fn, n, r, c, rng)
    detail = f"HLO の集団通信は {collectives_line(counts)} だけです" if n > 1 else "ppermute だけで組み立てています"
    if small is None:
        return (f"シャード ({r}, {c}) × デバイス {n} 個で全体がそろい、{detail}"
                f"{cannot_tell('送受信が起きず、リングの大きさ、シャードを書き込む位置、送受信の回数の誤り')}。")
    return f"シャード ({r}, {c}) × デバイス {n} 個と x 軸 {small[0]}・y 軸 {small[1]} のメッシュで全体がそろい、{detail}。"


def axis_size_mesh_shape(n: int) -> tuple[int, int, int] | None:
    """(x 軸, y 軸, 使うデバイスの数): "x" 軸がデバイスの数 n より小さい 2 次元メッシュの形。
    n が 4 以上の偶数なら全デバイスの (n/2, 2)。2 次元にできない数では一部のデバイスで作る: 奇数 n は n - 1 個
    （3 → 2 × 1、5 → 2 × 2、7 → 3 × 2）、2 は 1 × 2。1 では作れない（None）。"""
    a, b = mesh_2d_shape(n)
    if a >= 2 and b >= 2:
        return a, b, n
    if n == 1:
        return None
    if n == 2:
        return 1, 2, 2
    a, b = mesh_2d_shape(n - 1) if n - 1 >= 4 else (n - 1, 1)
    return a, b, n - 1


def _expect_axis_size(fn, n, r, c, rng) -> tuple[int, int] | None:
    """x 軸がデバイスの数より小さい 2 次元メッシュ（x × y、一部のデバイスで作ることもある）でも全体がそろうこと:
    リングの大きさは jax.device_count() ではなく lax.axis_size('x')。確かめたメッシュの (x, y) を返す
    （デバイスが 1 個では作れないので None）。"""
    import jax
    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as P

    shape = axis_size_mesh_shape(n)
    if shape is None:
        return None
    a, b, used = shape
    mesh = Mesh(np.array(jax.devices()[:used]).reshape(a, b), (AXIS, "y"))
    x = f32(rng.normal(size=(r, a * c)))
    try:
        got = np.asarray(call(wrap(fn, mesh, P(None, AXIS), None, stack=True), put(mesh, x, P(None, AXIS))))
        right = got.shape == (a, r, a * c) and all(is_close(got[d], x) for d in range(a))
    except (LearnerError, TypeError, ValueError):
        right = False
    if not right:
        raise Fail(f"x 軸 {a}・y 軸 {b} のメッシュでは全体がそろわないので、リングの大きさにデバイスの数 {n} が"
                   "使われているようです。lax.axis_size('x') を使ってください。")
    return a, b
