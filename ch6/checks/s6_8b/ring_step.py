"""6.8b-1 ring_step: 逆向きのリングアテンションの 1 ステップ（オンラインソフトマックス + ppermute で左隣へ）。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, call, exercise, expect_close, f32, fmt, n_devices
from .common import AXIS, exercise_rng, pairs_text, ppermute_pairs, put, run_learner, same, section_mesh

# 必須: ppermute の組は (i, (i - 1) % n)、最大値が上がったら ell と acc を exp(m - m') で測り直す。
# 自由: einsum か @ か、k と v を別々に送るかタプルで 1 回で送るか。

_NAMES = ("m", "ell", "acc", "k_next", "v_next")


def _update(q, k, v, m, ell, acc, *, scale=True, rescale_l=True, rescale_acc=True, keep_old_max=True):
    """NumPy の参照（と、よくある誤りの形）。q, k, v: (b, h, d)、m, ell: (h, b)、acc: (h, b, d)。"""
    s = np.einsum("qhd,khd->hqk", q, k)
    if scale:
        s = s / np.sqrt(q.shape[-1])
    m_new = np.maximum(m, s.max(-1)) if keep_old_max else s.max(-1)
    p = np.exp(s - m_new[..., None])
    r = np.exp(m - m_new)
    l_new = (r if rescale_l else 1.0) * ell + p.sum(-1)
    acc_new = (r[..., None] if rescale_acc else 1.0) * acc + np.einsum("hqk,khd->hqd", p, v)
    return m_new, l_new, acc_new


def _blocks(a, n, axis):
    return np.split(a, n, axis=axis)


def _global(fn, q, k, v, m, ell, acc, n, **kw):
    """全デバイス分の参照を、デバイスの順に並べた大域の配列で返す。"""
    parts = [fn(qi, ki, vi, mi, li, ai, **kw) for qi, ki, vi, mi, li, ai in
             zip(_blocks(q, n, 0), _blocks(k, n, 0), _blocks(v, n, 0), _blocks(m, n, 1), _blocks(ell, n, 1),
                 _blocks(acc, n, 1))]
    return tuple(np.concatenate([p[t] for p in parts], axis=1) for t in range(3))


def _rolled(a, n, shift):
    """デバイス i がデバイス (i + shift) % n のブロックを持つ並び。"""
    blocks = _blocks(a, n, 0)
    return np.concatenate([blocks[(i + shift) % n] for i in range(n)], axis=0)


@exercise("6.8b-1", "ring_step")
def check_ring_step(fn):
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    n, mesh, rng = n_devices(), section_mesh(), exercise_rng(1)
    b, h, d = 5, 3, 4
    q, k, v, k_prev, v_prev = (f32(rng.normal(size=(n * b, h, d))) for _ in range(5))
    k = f32(1.6 * k)  # 新しいブロックのほうが大きなスコアを持つ行が多い（最大値が上がる）
    # 前のステップの続きの状態: 前のブロック 1 つ分を足し込んだもの（m は有限）
    h_first = np.full((h, n * b), -np.inf)
    m0, l0, acc0 = _global(_update, q, k_prev, v_prev, h_first, np.zeros((h, n * b)), np.zeros((h, n * b, d)), n)
    m0, l0, acc0 = f32(m0), f32(l0), f32(acc0)

    def body(q, k, v, m, ell, acc):
        out = call(fn, q, k, v, m, ell, acc)
        if not isinstance(out, (tuple, list)) or len(out) != 5:
            got = f"{len(out)} 要素の {type(out).__name__}" if isinstance(out, (tuple, list)) else type(out).__name__
            raise Fail(f"ring_step は 5 つ組 (m, ell, acc, k_next, v_next) を返してください。実際は {got} です。")
        want = {"m": m.shape, "ell": ell.shape, "acc": acc.shape, "k_next": k.shape, "v_next": v.shape}
        arrays = []
        for name, x in zip(_NAMES, out):
            shape = tuple(getattr(x, "shape", ())) if hasattr(x, "shape") else None
            if shape != tuple(want[name]):
                raise Fail(f"返り値の {name} の形が違います: 1 デバイス分の期待 {fmt(tuple(want[name]))}、"
                           f"実際 {fmt(shape) if shape is not None else type(x).__name__}。"
                           "m と ell は (ヘッド, ブロック)、acc は (ヘッド, ブロック, 次元)、k_next と v_next は k, v と同じ形です。")
            arrays.append(jnp.asarray(x, jnp.float32))
        return tuple(arrays)

    st, kv = P(None, AXIS), P(AXIS)
    g = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(kv, kv, kv, st, st, st), out_specs=(st, st, st, kv, kv)))
    args = (put(mesh, q, kv), put(mesh, k, kv), put(mesh, v, kv), put(mesh, m0, st), put(mesh, l0, st),
            put(mesh, acc0, st))
    got = [np.asarray(x, np.float64) for x in run_learner(g, *args)]
    m, ell, acc, k_next, v_next = got

    # 送り方: ppermute の組を jaxpr から読む
    pairs = ppermute_pairs(g, *args) or []
    want_pairs = {(i, (i - 1) % n) for i in range(n)}
    if not pairs:
        raise Fail("jaxpr に ppermute が見つかりません。k と v は lax.ppermute(x, 'seq', perm) で左隣へ送ります"
                   "（all_gather で全部集めたり、値を返すだけにしたりしない）。")
    for used in pairs:
        if used == want_pairs:
            continue
        if n > 2 and used == {(i, (i + 1) % n) for i in range(n)}:
            raise Fail(f"ppermute の組が {pairs_text(used)} で、右隣へ送っています（教材のリングの向き）。"
                       "この問題は左隣へ送るリングです: perm = [(i, (i - 1) % n) for i in range(n)]。")
        if len(used) == n - 1 and used < want_pairs:
            raise Fail(f"ppermute の組が {len(used)} 個しかありません（期待は {n} 個）。デバイス 0 から最後のデバイス"
                       f"（{n - 1}）へ戻る組がないと、デバイス {n - 1} には何も届きません。% n で折り返しましょう。")
        raise Fail(f"ppermute の組が {pairs_text(used)} です。期待は左隣へ送る {pairs_text(want_pairs)}"
                   "（各デバイス i から (i - 1) % n へ）です。")

    # 届いたブロック: デバイス i はデバイス i + 1 のブロックを受け取る
    for name, got_x, sent in (("k_next", k_next, k), ("v_next", v_next, v)):
        if n > 1 and same(got_x, sent):
            raise Fail(f"{name} が手元の {name[0]} のままです。ppermute で送った結果（右隣から届いたブロック）を返しましょう。")
        if n > 1 and same(got_x, _rolled(v if name[0] == "k" else k, n, 1)):
            raise Fail(f"{name} に {'v' if name[0] == 'k' else 'k'} のブロックが入っています。k_next と v_next の順番を確かめましょう。")
        expect_close(got_x, _rolled(sent, n, 1), f"{name}（デバイス i には i + 1 のブロックが届くはず）",
                     hint="ppermute は (送り元, 送り先) の組で、送った値を受け取った側に返します。")

    # オンラインソフトマックスの状態
    want = _global(_update, q, k, v, m0, l0, acc0, n)
    if not same(m, want[0]):
        if same(m, m0):
            raise Fail("m が前の値のままです。新しいブロックのスコアの最大値と比べて、大きいほうを返しましょう"
                       "（m' = max(m, max_k s)）。")
        if same(m, _global(_update, q, k, v, m0, l0, acc0, n, keep_old_max=False)[0]):
            raise Fail("m が新しいブロックのスコアの最大値だけになっています。前の最大値 m とも比べます: "
                       "m' = jnp.maximum(m, s.max(axis=-1))。")
        if same(m, _global(_update, q, k, v, m0, l0, acc0, n, scale=False)[0]):
            raise Fail("スコアを √次元 で割っていません。s = q k^T / sqrt(d)（d は q.shape[-1]）です。")
        expect_close(m, want[0], "m（実行中の最大値）", rtol=1e-4, atol=1e-4,
                     hint="m' = max(m, max_k s)、s = q k^T / sqrt(d) です。")
    if not (same(ell, want[1]) and same(acc, want[2])):
        for kw, text in (
            (dict(rescale_l=False, rescale_acc=False), "ell と acc の両方"),
            (dict(rescale_l=False), "ell"),
            (dict(rescale_acc=False), "acc"),
        ):
            cand = _global(_update, q, k, v, m0, l0, acc0, n, **kw)
            if same(ell, cand[1]) and same(acc, cand[2]):
                raise Fail(f"{text}を測り直していません。最大値が m から m' に上がったら、古い値に exp(m - m') を掛けてから"
                           "新しいブロックの分を足します。")
        if same(acc, want[2] / want[1][..., None]):
            raise Fail("acc を ell で割って正規化しています。ステップの途中では割らずに足し込み、割るのは最後のステップの後だけです。")
        if same(ell, _global(_update, q, k, v, m0, l0, acc0, n, scale=False)[1]):
            raise Fail("スコアを √次元 で割っていません。s = q k^T / sqrt(d)（d は q.shape[-1]）です。")
        expect_close(ell, want[1], "ell（exp(s - m) の和）", rtol=1e-4, atol=1e-5,
                     hint="ell' = exp(m - m')·ell + Σ exp(s - m') です。")
        expect_close(acc, want[2], "acc（exp(s - m)·v の和）", rtol=1e-4, atol=1e-5,
                     hint="acc' = exp(m - m')·acc + Σ exp(s - m')·v です。")
    raised = int((want[0] > m0 + 1e-6).sum())
    return (f"隠し入力（ブロック {b} × ヘッド {h} × 次元 {d}、{n} デバイス、最大値が上がる行 {raised} 個）で状態が一致し、"
            f"ppermute は左隣へ送る {n} 組です。")
