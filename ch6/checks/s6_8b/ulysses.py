"""6.8b-4 ulysses_attention: 並びが (ヘッド, 系列, 次元) のときの all-to-all 方式（Ulysses）。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, LearnerError, call, exercise, expect_close, f32, fmt, n_devices, walk
from .common import AXIS, PERMUTE, exercise_rng, put, run_learner, same, section_mesh

# 必須: データを動かすのは all_to_all（tiled=True）だけ、軸はこの並び（ヘッドが 0 軸、系列が 1 軸）に合わせる。
# 自由: q, k, v を別々に送っても、stack して 1 回で送っても。

ALL_TO_ALL = {"all_to_all", "all_to_all_start"}
GATHER = {"all_gather", "all_gather_invariant", "all_gather_start"}
PSUM = {"psum", "psum_invariant", "psum_scatter", "reduce_scatter"}


def _attention_np(q, k, v):
    s = np.einsum("hqd,hkd->hqk", q, k) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("hqk,hkd->hqd", p / p.sum(-1, keepdims=True), v)


def _collectives(g, *args):
    import jax

    try:
        jaxpr = jax.make_jaxpr(g)(*args).jaxpr
    except Exception as exc:  # 呼び出しは通ったのでここで落ちることはまずない
        raise LearnerError(exc) from exc
    return [e for e in walk(jaxpr) if e.primitive.name in ALL_TO_ALL | GATHER | PERMUTE | PSUM]


@exercise("6.8b-4", "ulysses_attention")
def check_ulysses_attention(fn):
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    n, mesh, rng = n_devices(), section_mesh(), exercise_rng(4)
    h, b, d = 2 * n, 2 * n, 3          # ブロックの長さもデバイスの数の倍数（軸を取り違えてもエラーにならず、値で分かる）
    q, k, v = (f32(rng.normal(size=(h, n * b, d))) for _ in range(3))
    spec = P(None, AXIS)

    def body(q, k, v):
        out = call(fn, q, k, v)
        shape = tuple(getattr(out, "shape", ())) if hasattr(out, "shape") else None
        if shape == (h // n, n * b, d) and n > 1:
            raise Fail(f"1 デバイス分の出力の形が {fmt(shape)}（ヘッド / n, 系列全体, 次元）のままです。"
                       "attention_hsd の後に逆向きの all_to_all（split_axis=1, concat_axis=0）で (ヘッド, ブロック, 次元) に戻しましょう。")
        if shape != (h, b, d):
            raise Fail(f"1 デバイス分の出力の形が違います: 期待 {fmt((h, b, d))}（ヘッド, ブロック, 次元）、"
                       f"実際 {fmt(shape) if shape is not None else type(out).__name__}。"
                       "all_to_all の軸を確かめましょう: 入れ替えは split_axis=0, concat_axis=1、戻すときは split_axis=1, concat_axis=0 です。")
        return jnp.asarray(out, jnp.float32)

    g = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(spec,) * 3, out_specs=spec))
    args = tuple(put(mesh, x, spec) for x in (q, k, v))
    try:
        got = run_learner(g, *args)
    except LearnerError as exc:
        text = str(exc.exc)
        if "all_to_all" in text and "divisible" in text:
            raise Fail("all_to_all で切る軸（split_axis）の大きさが、デバイスの数で割り切れません"
                       f"（JAX のエラー: 「{text.splitlines()[0][:90]}」）。入れ替えでは 0 軸（ヘッド）を切り、"
                       "戻すときは 1 軸（系列）を切ります。") from None
        raise

    eqns = _collectives(g, *args)
    names = {e.primitive.name for e in eqns}
    if names & GATHER:
        raise Fail("all_gather を使っています。この問題では K/V を集めず、all_to_all で系列の分割をヘッドの分割に入れ替えます。")
    if names & PERMUTE:
        raise Fail("ppermute を使っています（リングの方式）。この問題は all_to_all で系列の分割とヘッドの分割を入れ替える方式です。")
    if names & PSUM:
        raise Fail(f"{', '.join(sorted(names & PSUM))} を使っています。all-to-all 方式では足し合わせる通信は要りません。"
                   "all_to_all で入れ替えて、ヘッドごとに計算して戻すだけです。")
    a2a = [e for e in eqns if e.primitive.name in ALL_TO_ALL]
    if not a2a:
        raise Fail("jaxpr に all_to_all が見つかりません。lax.all_to_all(x, 'seq', split_axis=0, concat_axis=1, tiled=True) で"
                   "系列の分割をヘッドの分割に入れ替えます。")
    if any(not e.params.get("tiled", False) for e in a2a):
        raise Fail("all_to_all を tiled=False で使っています。tiled=True なら、切った軸はそのまま小さくなり、"
                   "受け取った分はつなぐ軸に連結されます（新しい軸が増えません）。")
    axes = [(int(e.params["split_axis"]), int(e.params["concat_axis"])) for e in a2a]
    if all(len(e.invars[0].aval.shape) == 3 for e in a2a):   # q, k, v を別々に送った場合: 軸の番号を直接確かめる（1 デバイスでも）
        if axes[0] == (1, 0):
            raise Fail("最初の all_to_all が split_axis=1, concat_axis=0 です。それは教材の (系列, ヘッド, 次元) の並びの軸です。"
                       "ここではヘッドが 0 軸、系列が 1 軸なので、split_axis=0（ヘッドを分割）、concat_axis=1（系列をつなぐ）です。")
        if set(axes) - {(0, 1), (1, 0)} or (0, 1) not in axes or (1, 0) not in axes:
            shown = ", ".join(f"(split_axis={s}, concat_axis={c})" for s, c in axes)
            raise Fail(f"all_to_all の軸が {shown} です。入れ替えは split_axis=0, concat_axis=1、"
                       "戻すときは split_axis=1, concat_axis=0 です。")
    want = _attention_np(q, k, v)      # ヘッドごとに独立: 1 デバイスで全ヘッドを計算したもの
    if not same(got, want, rtol=1e-4, atol=1e-5):
        expect_close(got, want, "出力", rtol=1e-4, atol=1e-5,
                     hint="入れ替え（split_axis=0, concat_axis=1）→ attention_hsd → 戻す（split_axis=1, concat_axis=0）の順です。")
    shown = ", ".join(sorted({f"({s}→{c})" for s, c in axes}))
    return (f"隠し入力（ヘッド {h} × 系列 {n * b} × 次元 {d}、{n} デバイス）で 1 デバイスのアテンションと一致し、"
            f"all_to_all は {len(a2a)} 回（軸 {shown}）です。")
