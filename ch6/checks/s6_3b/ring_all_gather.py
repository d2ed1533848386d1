"""6.3b-2 ring_all_gather: ppermute だけで作るリング all-gather。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, exercise, expect_close, expect_shape, f32, jaxpr_primitives, n_devices, traced_eqns
from ...show import collectives_line
from .common import (
    ALL_TO_ALL,
    AXIS,
    GATHER,
    LOOPS,
    MAXMIN,
    PERMUTE,
    PSUM,
    SCATTER,
    close_enough,
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
        raise Fail(f"各デバイスの結果の形が {(n, r, c)} です（tiled=False の形）。受け取ったブロックは "
                   f"列方向（axis=1）につないで ({r}, {n * c}) にします。")
    if n > 1 and tuple(getattr(got, "shape", ())) == (n, n * r, c):
        raise Fail(f"各デバイスの結果の形が {(n * r, c)} です。ブロックを行方向（axis=0）につないでいます。"
                   f"この問題のブロックは列の塊なので、列方向（axis=1）につないで ({r}, {n * c}) にします。")
    expect_shape(got, (n, r, n * c), f"全デバイスの結果を積んだもの（{n} デバイス分）",
                 f"各デバイスは自分のブロック ({r}, {c}) から、列方向につないだ全体 ({r}, {n * c}) を返します。")
    got = np.asarray(got)
    blocks = [x[:, j * c:(j + 1) * c] for j in range(n)]
    for d in range(n):
        if close_enough(got[d], x):
            continue
        pieces = [got[d][:, j * c:(j + 1) * c] for j in range(n)]
        owners = [next((k for k, b in enumerate(blocks) if close_enough(p, b)), None) for p in pieces]
        if None not in owners and sorted(owners) == list(range(n)):
            raise Fail(f"デバイス {d} の結果は、ブロックはそろっていますが並び順が違います（位置 0.. に "
                       f"デバイス {owners} のブロック）。右隣へ送るリングなら、k 回目に受け取るブロックの持ち主は "
                       "(自分の番号 - k) % n です。その持ち主の番号 × c の列に置きましょう。")
        expect_close(got[d], x, f"デバイス {d} の結果",
                     hint="all_gather(block, 'x', axis=1, tiled=True) と同じものを ppermute だけで作ります。")

    prims = jaxpr_primitives(g, xs)
    forbid(prims, GATHER, "all_gather を使っています。この問題では ppermute で隣から受け取る手順を n-1 回繰り返します。")
    used = sorted(prims & (PSUM | SCATTER | ALL_TO_ALL | MAXMIN))
    if used:
        raise Fail(f"ppermute 以外の集団通信（{', '.join(used)}）を使っています。"
                   "リング all-gather は隣への送受信 (ppermute) だけで作ります。")
    if n > 1 and not prims & PERMUTE:
        raise Fail("jaxpr に ppermute が見つかりません。lax.ppermute(block, 'x', perm) で隣のデバイスへ送ります。")
    sends = [e.primitive.name for e in traced_eqns(g, xs)]
    rounds = sum(name in PERMUTE for name in sends)
    if n > 1 and not set(sends) & LOOPS and rounds > n - 1:
        raise Fail(f"ppermute を {rounds} 回使っています。{n} デバイスのリングでは、隣から受け取る手順を {n - 1} 回"
                   "（n - 1 回）繰り返せば全ブロックがそろいます。それより後の送受信は、持っているブロックがまた届くだけの"
                   "余分な通信です（range(1, n) で回しましょう）。")
    counts = collectives_of(g, xs) if n > 1 else {}
    if "all-gather" in counts:
        raise Fail(f"コンパイル結果に all-gather が {counts['all-gather']} 個あります。ppermute だけで組み立てましょう。")
    detail = f"HLO の集団通信は {collectives_line(counts)} だけです" if n > 1 else "ppermute だけで組み立てています"
    return f"隠し入力（ブロック ({r}, {c}) × {n} デバイス）で全デバイスが全体を持ち、{detail}。"
