"""6.10-3 decode_attention_tp: KV キャッシュをヘッドで分割したデコードのアテンション（shard_map の中、軸 "model"）。"""
from __future__ import annotations

import numpy as np

from ... import meshes
from ...checking import PSUM_NAMES, Fail, LearnerError, call, cannot_tell, exercise, n_devices, traced_eqns
from ..lesson_calls import lesson_calls
from .common import AXIS, exercise_rng

# 必須: 受け持つヘッドだけでアテンションと wo の射影を計算し、lax.psum で 1 回だけ足す。K/V は集めない。
# クエリのヘッド h は KV ヘッド h // G（G = ヘッド / KV ヘッド）。位置 t <= pos[b] だけを見る。スケールは 1/sqrt(E)。


def _reference(q, k, v, pos, wo, *, group="repeat", strict=False, scale=True, mask=True, n=1):
    """1 デバイスの参照。group="tile" は各デバイスの中で h % KV ヘッド を使った誤り（n はデバイスの数）、
    mask=False はまだ書いていない位置も見た誤り。"""
    b, h, e = q.shape
    kv = k.shape[2]
    g = h // kv
    hl, kl = h // n, kv // n
    heads = np.arange(h)
    idx = heads // g if group == "repeat" else (heads // hl) * kl + (heads % hl) % kl
    s = np.einsum("bhe,bthe->bht", q, k[:, :, idx]) / (np.sqrt(e) if scale else 1.0)
    t = np.arange(k.shape[1])
    ok = (t[None, :] < pos[:, None]) if strict else (t[None, :] <= pos[:, None])
    ok = ok if mask else np.ones_like(ok)
    s = np.where(ok[:, None, :], s, -np.inf)
    with np.errstate(invalid="ignore"):          # 見えるキーがない行（誤ったマスク）は NaN のまま
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
    out = np.einsum("bht,bthe->bhe", p, v[:, :, idx])
    return np.einsum("bhe,hed->bd", out, wo)


def _inputs():
    r = exercise_rng(3)
    n = n_devices()
    kl, g = 1 + int(r.integers(0, 2)), int(r.choice([2, 3]))
    b, t, e, d = 3, 11, 8, 12
    kv, h = n * kl, n * kl * g
    q = r.normal(size=(b, h, e)).astype(np.float32)
    k, v = r.normal(size=(2, b, t, kv, e)).astype(np.float32)
    pos = np.array([0, 6, t - 1], np.int32)
    wo = (r.normal(size=(h, e, d)) / np.sqrt(h * e)).astype(np.float32)
    return q, k, v, pos, wo


_GATHER = ("all_gather で値を集めています。キャッシュはヘッドで分割したまま使い、各デバイスの部分和（wo を掛けた後）を "
           "lax.psum で 1 回だけ足します。")
# 部分和そのものを集めてから足す答え（値は合う）: 原因は「psum の代わりに all_gather + 和」
_GATHER_SUM = ("各デバイスの部分和（wo を掛けた後）を all_gather で集めてから足しています。値は同じですが、"
               "集めると n 倍のバイトを送ります。lax.psum で 1 回だけ足してください。")


def _gather_message(eqns, out_shape) -> str:
    """all_gather が集めているのが出力と同じ形の部分和なら _GATHER_SUM、キャッシュや q なら _GATHER。"""
    for e in eqns:
        if e.primitive.name == "all_gather" and tuple(e.invars[0].aval.shape) == tuple(out_shape):
            return _GATHER_SUM
    return _GATHER


def _gathers(fn, mesh, specs, args, out_shape) -> str | None:
    """out_specs の検査を外してトレースし直し、all_gather があればその誤りの言葉（なければ、トレースできなければ None）。"""
    import jax
    from jax.sharding import PartitionSpec as P

    try:
        loose = jax.shard_map(fn, mesh=mesh, in_specs=specs, out_specs=P(), check_vma=False)
        eqns = traced_eqns(loose, *args)
    except Exception:
        return None
    return _gather_message(eqns, out_shape) if any(e.primitive.name == "all_gather" for e in eqns) else None


@exercise("6.10-3", "decode_attention_tp")
def check_decode_attention_tp(fn):
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    if not callable(fn):
        raise Fail(f"関数を渡してください（受け取ったのは {type(fn).__name__} です）。")
    q, k, v, pos, wo = _inputs()
    n = n_devices()
    mesh = meshes.mesh_1d(AXIS)
    specs = (P(None, AXIS), P(None, None, AXIS), P(None, None, AXIS), P(), P(AXIS))
    g = jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=specs, out_specs=P()))
    args = [jax.device_put(a, NamedSharding(mesh, s)) for a, s in zip((q, k, v, pos, wo), specs)]
    try:
        with lesson_calls(fn, "ch6.serving", "attend", "attend_partial") as called:
            got = call(g, *args)
    except LearnerError as exc:
        msg = str(exc.exc)
        if "unbound axis name" in msg or (isinstance(exc.exc, AssertionError) and not msg.strip()):
            raise Fail(f"集団通信に渡した軸の名前がメッシュにありません。メッシュの軸の名前は '{AXIS}' です。") from None
        if "out_specs" in msg or "vma" in msg.lower():
            gathered = _gathers(fn, mesh, specs, args, (q.shape[0], wo.shape[-1]))
            if gathered:
                raise Fail(gathered) from None
            raise Fail("戻り値がデバイスごとに違うまま（varying）です。各デバイスの値は受け持つヘッドの部分和なので、"
                       f"wo を掛けた後に lax.psum(…, '{AXIS}') で足します。") from None
        raise
    if called:
        raise Fail(f"本編の serving.{called[0]} を呼んでいます。受け持つヘッドのスコア、マスク、ソフトマックスを、"
                   "この関数の中で自分で書いてください。")
    shape = tuple(getattr(got, "shape", ())) if hasattr(got, "shape") else None
    want = _reference(q, k, v, pos, wo)
    if shape is not None and len(shape) == 3 and shape[0] == want.shape[0] and shape[2] == q.shape[2]:
        raise Fail(f"戻り値の形が (バッチ, ヘッド, ヘッドの次元) = {shape} で、wo を掛けていません。"
                   f"ヘッドとヘッドの次元を wo で d_model に射影して、(バッチ, d_model) = {want.shape} を返してください。")
    if shape != want.shape:
        raise Fail(f"戻り値は (バッチ, d_model) = {want.shape} のはずが、{shape if shape is not None else type(got).__name__}"
                   " でした。アテンションの出力に wo を掛けて d_model に戻してください。")
    eqns = traced_eqns(g, *args)
    names = [e.primitive.name for e in eqns]
    if "all_gather" in names:
        raise Fail(_gather_message(eqns, want.shape))
    psums = sum(nm in PSUM_NAMES for nm in names)
    if psums == 0:
        raise Fail("lax.psum がありません。各デバイスの値は受け持つヘッドの部分和なので、"
                   f"wo を掛けた後に lax.psum(…, '{AXIS}') で 1 回足します。")
    got = np.asarray(got, dtype=np.float64)
    if np.allclose(got, want, rtol=1e-4, atol=1e-5):
        if psums > 1:
            raise Fail(f"値は合っていますが、psum が {psums} 回あります。足した結果をもう一度足して割るか、途中の値も足しています。"
                       "1 トークンの通信は、wo を掛けた後の部分和を足す 1 回で足ります。")
        one = cannot_tell("psum と pmean のように部分和の足し方の違い") if n == 1 else ""
        return (f"デバイス {n} 個でヘッド {q.shape[1]}（KV ヘッド {k.shape[2]}）を分割したアテンションが、"
                f"1 デバイスの値と一致し、通信は psum 1 回でした。{one}")
    if n > 1 and np.allclose(got * n, want, rtol=1e-4, atol=1e-5):
        raise Fail(f"出力が 1 デバイスの値のちょうど 1/{n}（デバイス {n} 個の平均）でした。各デバイスの値は受け持つヘッドの"
                   "部分和なので、lax.pmean ではなく lax.psum で足してください。")
    variants = [
        (dict(group="tile"), "クエリのヘッドと KV ヘッドの対応が違います。ヘッド h が使うのは KV ヘッド h // G"
                             "（G = ヘッド ÷ KV ヘッド、jnp.repeat の並び）で、h % KV ヘッドではありません。"),
        (dict(strict=True), "位置 pos[b] のキーを隠しています。新しいトークンはその位置のキーも見るので、"
                            "マスクは t <= pos[b] です。"),
        (dict(scale=False), "スコアを sqrt(ヘッドの次元) で割っていません。q·k / sqrt(E) にしてからソフトマックスを取ります。"),
        (dict(mask=False), "位置 pos[b] より後のキー（まだ書いていない位置）も見ています。"
                           "t <= pos[b] のキーだけを残すマスクを適用してから、ソフトマックスを取ります。"),
    ]
    for kw, text in variants:
        if np.allclose(got, _reference(q, k, v, pos, wo, n=n, **kw), rtol=1e-4, atol=1e-5, equal_nan=True):
            raise Fail(text)
    err = float(np.abs(got - want).max())
    raise Fail(f"アテンションの出力が 1 デバイスの値と合わず、最大の差は {err:.3g} でした。"
               "スコア、マスク、ソフトマックス、wo の射影の順に確かめてください。")
