"""6.8b-4 ulysses_attention: 並びが (ヘッド, 系列, 次元) のときの all-to-all 方式（Ulysses）。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, LearnerError, call, cannot_tell, exercise, f32, fmt, walk
from .common import AXIS, PERMUTE, exercise_rng, put, run_learner, same, section_meshes

# 必須: データを動かすのは all_to_all（tiled=True）だけ、軸はこの並び（ヘッドが 0 軸、系列が 1 軸）に合わせる。
#       軸の大きさは lax.axis_size("seq")（2 次元のメッシュでも確かめる）。
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
    except Exception as exc:  # 呼び出しは通ったので、ここで失敗することはまずない
        raise LearnerError(exc) from exc
    return [e for e in walk(jaxpr) if e.primitive.name in ALL_TO_ALL | GATHER | PERMUTE | PSUM]


def _run(fn, mesh, rng, after_1d: bool):
    """mesh の上で学習者の関数を shard_map + jit で呼び、(出力, jaxpr の集団通信, 形の情報) を返す。"""
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    n = mesh.shape[AXIS]
    h, b, d = 2 * n, 2 * n, 3          # ブロックの長さも軸の大きさの倍数（軸を取り違えてもエラーにならず、値で分かる）
    q, k, v = (f32(rng.normal(size=(h, n * b, d))) for _ in range(3))
    spec = P(None, AXIS)

    def body(q, k, v):
        out = call(fn, q, k, v)
        shape = tuple(getattr(out, "shape", ())) if hasattr(out, "shape") else None
        if shape == (h // n, n * b, d) and n > 1:
            raise Fail(f"出力の形が {fmt(shape)}（ヘッド / n, 系列全体, 次元）のままで、戻していません。"
                       "attention_hsd の後に逆向きの all_to_all で (ヘッド, ブロック, 次元) に戻します。")
        if shape is None:
            raise Fail(f"戻り値は形 {fmt((h, b, d))}（ヘッド, ブロック, 次元）の配列のはずが、{type(out).__name__} でした。")
        if shape != (h, b, d):
            raise Fail(f"1 デバイス分の出力の形は {fmt((h, b, d))}（ヘッド, ブロック, 次元）のはずが {fmt(shape)} でした。"
                       "入れ替えと戻しの all_to_all の軸を確かめてください。")
        return jnp.asarray(out, jnp.float32)

    g = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(spec,) * 3, out_specs=spec))
    args = tuple(put(mesh, x, spec) for x in (q, k, v))
    try:
        got = run_learner(g, *args)
    except LearnerError as exc:
        text = str(exc.exc)
        if "all_to_all" in text and "divisible" in text:
            raise Fail("all_to_all で分割する配列の軸の長さが、軸 seq の大きさで割り切れず、JAX がエラーを出しました。"
                       "入れ替えでは 0 軸（ヘッド）、戻すときは 1 軸（系列）を分割します。") from None
        if "all_to_all requires the size of the mapped axis" in text:
            raise Fail("tiled=False の all_to_all は、分割する配列の軸の長さが軸 seq の大きさと同じでないと使えません。"
                       "tiled=True にすると、その軸を n 等分して送ります。") from None
        if after_1d:
            raise Fail(f"data × seq の 2 次元のメッシュでだけ {type(exc.exc).__name__} が出ました。"
                       "軸 seq の大きさは jax.device_count() ではなく lax.axis_size('seq') で読みます。") from None
        raise
    return got, _collectives(g, *args), (q, k, v, h, b, d, n)


@exercise("6.8b-4", "ulysses_attention")
def check_ulysses_attention(fn):
    rng = exercise_rng(4)
    results = []
    for mesh in section_meshes():
        got, eqns, (q, k, v, h, b, d, n) = _run(fn, mesh, rng, after_1d=bool(results))
        names = {e.primitive.name for e in eqns}
        if names & GATHER:
            raise Fail("all_gather で K/V を集めています。この問題では all_to_all で系列の分割をヘッドの分割に入れ替えます。")
        if names & PERMUTE:
            raise Fail("ppermute で回しています（リングの方式）。この問題は all_to_all で分割を入れ替える方式です。")
        if names & PSUM:
            raise Fail(f"{', '.join(sorted(names & PSUM))} で足し合わせています。all-to-all 方式では入れ替えて計算し、戻すだけです。")
        a2a = [e for e in eqns if e.primitive.name in ALL_TO_ALL]
        if not a2a:
            raise Fail("jaxpr に all_to_all がありません。lax.all_to_all で系列の分割をヘッドの分割に入れ替えます。")
        if any(not e.params.get("tiled", False) for e in a2a):
            raise Fail("all_to_all が tiled=False なので、新しい軸が増えます。tiled=True で、受け取った分をつなぐ軸に連結します。")
        # 負の軸の番号（split_axis=-3 など）も正解: 配列の次元の数で 0 以上の番号にそろえる
        axes = [(int(e.params["split_axis"]) % max(1, len(e.invars[0].aval.shape)),
                 int(e.params["concat_axis"]) % max(1, len(e.invars[0].aval.shape))) for e in a2a]
        if all(len(e.invars[0].aval.shape) == 3 for e in a2a):   # q, k, v を別々に送った場合: 軸の番号を直接確かめる
            if axes[0] == (1, 0):
                raise Fail("最初の all_to_all が split_axis=1, concat_axis=0 で、本編の (系列, ヘッド, 次元) の並びの軸です。"
                           "ここではヘッドが 0 軸、系列が 1 軸です。")
            if set(axes) == {(0, 1)}:
                raise Fail("どの all_to_all も split_axis=0, concat_axis=1（入れ替え）で、戻す all_to_all がありません。"
                           "reshape ではほかのデバイスの系列は戻らないので、split_axis=1, concat_axis=0 で戻します。")
            if set(axes) - {(0, 1), (1, 0)} or (0, 1) not in axes or (1, 0) not in axes:
                shown = ", ".join(f"({s}, {c})" for s, c in axes)
                raise Fail(f"all_to_all の (split_axis, concat_axis) が {shown} です。"
                           "入れ替えと戻しで、ヘッドの軸と系列の軸を逆の役割にします。")
        want = _attention_np(q, k, v)      # ヘッドごとに独立: 1 デバイスで全ヘッドを計算したもの
        if not same(got, want, rtol=1e-4, atol=1e-5):
            if results:
                raise Fail("1 次元のメッシュでは一致し、data × seq の 2 次元のメッシュでは一致しません。"
                           "軸 seq の大きさを jax.device_count() で読んでいないか確かめてください。")
            raise Fail("出力が 1 デバイスのアテンションと一致しません。入れ替え、attention_hsd、戻しの順と軸を確かめてください。")
        results.append((n, len(a2a)))
    shown = "、".join(f"seq = {n}" for n, _ in results)
    note = cannot_tell("all_to_all の軸と順番や、軸 seq の大きさの取り違え") if results[0][0] == 1 else ""
    return (f"1 次元と 2 次元のメッシュ（{shown}）で 1 デバイスのアテンションと一致し、all_to_all は {results[0][1]} 回です。"
            f"{note}")
