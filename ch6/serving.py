"""生成するモデルを動かす部品（6.10 節）: KV キャッシュ、プリフィル、デコード、スロット、int8 の重み。

レッスンとチェックが同じものを使います。モデルは 6.9 節の小さなデコーダ（``ch6.lm``）で、パラメータの木も
同じです。K/V のヘッドの数は ``wk`` の形で決まり、:func:`to_gqa` でクエリより少なくできます（GQA）。

- :func:`forward`: KV キャッシュを使わず、系列全体を毎回計算し直す（正しさの基準）
- :func:`init_cache` / :func:`prefill` / :func:`decode`: KV キャッシュ付きの生成。キャッシュは
  長さ ``max_len`` で前もって確保し、``lax.dynamic_update_slice`` でその場で書き換えます
  （``jax.jit(..., donate_argnums=...)`` で譲渡すると、コピーしません）
- ``axis`` 引数: ``jax.shard_map`` の中で、ヘッドを分割したテンソル並列として動かすときのメッシュの軸名
  （アテンションと MLP の出力の部分和を ``lax.psum`` で足す）
- :func:`kv_cache_bytes`: KV キャッシュのバイト数の式、:func:`decode_step_time`: デコード 1 ステップの秒の見積もり
- :func:`attend_partial` / :func:`combine_partials`: 系列で分割した KV キャッシュのアテンション（オンラインソフトマックス）
- :func:`quantize_int8` / :func:`dequantize`: 出力チャネルごとのスケールを持つ int8 の重み
- :func:`compile_counter`: バックエンドのコンパイルの回数を数える（``jax.monitoring``）
"""
from __future__ import annotations

import contextlib
import math

# 行列の重み: 名前 -> 縮約する（入力の）軸。出力チャネルはそれ以外の軸
MATRICES = {"wq": (0,), "wk": (0,), "wv": (0,), "wo": (0, 1), "w_in": (0,), "w_out": (0,)}


def kv_cache_bytes(n_layers: int, n_kv_heads: int, head_dim: int, length: int, batch: int,
                   bytes_per_value: float) -> float:
    """KV キャッシュのバイト数: 層 × 2（K と V）× KV ヘッド × ヘッドの次元 × 長さ × バッチ × 1 値のバイト。"""
    return n_layers * 2 * n_kv_heads * head_dim * length * batch * bytes_per_value


def layers(params: dict) -> list[dict]:
    """層ごとのパラメータの dict のリスト（``ch6.lm`` の blocks は先頭が層の軸の dict。リストでもよい）。"""
    blocks = params["blocks"]
    if isinstance(blocks, (list, tuple)):
        return list(blocks)
    import jax

    n = jax.tree.leaves(blocks)[0].shape[0]
    return [jax.tree.map(lambda w, i=i: w[i], blocks) for i in range(n)]


def kv_heads(params: dict) -> int:
    """KV ヘッドの数（wk の最後から 2 番目の軸）。クエリのヘッドの数は wq の同じ軸。"""
    return layers(params)[0]["wk"].shape[1]


def to_gqa(params: dict, n_kv_heads: int) -> dict:
    """マルチヘッドのパラメータを GQA に: 連続する group = H / n_kv_heads 個のヘッドの wk, wv を平均する
    （Ainslie ほか, GQA, arXiv:2305.13245 の変換）。クエリのヘッド h は KV ヘッド h // group を使う。"""
    def pool(w):
        h, e = w.shape[-2:]
        if h % n_kv_heads:
            raise ValueError(f"heads={h} is not a multiple of n_kv_heads={n_kv_heads}")
        return w.reshape(*w.shape[:-2], n_kv_heads, h // n_kv_heads, e).mean(axis=-2)

    return _map_blocks(params, lambda b: dict(b, wk=pool(b["wk"]), wv=pool(b["wv"])))


def _map_blocks(params: dict, fn) -> dict:
    """blocks（リストでも、先頭が層の軸の dict でも）の各層に fn を当てた木（blocks の形はそのまま）。"""
    blocks = params["blocks"]
    if isinstance(blocks, (list, tuple)):
        return dict(params, blocks=[fn(b) for b in blocks])
    import jax

    return dict(params, blocks=jax.vmap(fn)(blocks))


def _norm(x, scale):
    import jax.numpy as jnp

    return x * (scale / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6))


def attend(q, k, v, mask):
    """GQA のアテンション。q: (B, S, H, E)、k, v: (B, T, K, E)、mask: (B, S, T) の真偽値 -> (B, S, H, E)。
    クエリのヘッド h は KV ヘッド h // (H // K) を使う（K = H ならふつうのマルチヘッド）。"""
    import jax
    import jax.numpy as jnp

    b, s, h, e = q.shape
    kv = k.shape[2]
    qg = q.reshape(b, s, kv, h // kv, e)
    scores = jnp.einsum("bskge,btke->bkgst", qg, k) / math.sqrt(e)
    scores = jnp.where(mask[:, None, None], scores, -jnp.inf)
    out = jnp.einsum("bkgst,btke->bskge", jax.nn.softmax(scores, axis=-1), v)
    return out.reshape(b, s, h, e)


def project(spec: str, x, w):
    """重みの行列積 ``einsum(spec, x, w)``。w が :func:`quantize_params` の {"q", "scale"} なら、int8 の q を
    x の型に変えて縮約し、出力チャネルごとのスケールを縮約の後で掛ける（スケールは縮約する軸によらないので、
    ``einsum(spec, x, q × scale)`` と同じ値）。戻す演算が行列積の入力側の型変換だけになり、XLA はそれを行列積と
    同じ融合に入れられる: HBM からは int8 を 1 回読むだけ。出力チャネルは spec の出力の最後の軸（MATRICES の順）。"""
    import jax.numpy as jnp

    if not isinstance(w, dict):
        return jnp.einsum(spec, x, w)
    inputs, output = spec.split("->")
    w_axes = inputs.split(",")[1]
    kept = [i for i, a in enumerate(w_axes) if a in output]       # 出力チャネルの軸（縮約しない軸）
    if "".join(w_axes[i] for i in kept) != output[-len(kept):]:
        raise ValueError(f"the weight's output channels must be the last output axes: {spec}")
    out = jnp.einsum(spec, x, w["q"].astype(x.dtype), preferred_element_type=jnp.float32)
    scale = w["scale"].reshape([w["scale"].shape[i] for i in kept])
    return (out * scale).astype(x.dtype)


def _kv(p, x):
    h = _norm(x, p["ln1"])
    return project("bsd,dke->bske", h, p["wk"]), project("bsd,dke->bske", h, p["wv"])


def _layer(p, x, k_all, v_all, mask, axis):
    """1 層のアテンションと MLP（残差付き）。axis があれば出力の部分和を psum する（テンソル並列）。"""
    import jax
    from jax import lax

    q = project("bsd,dhe->bshe", _norm(x, p["ln1"]), p["wq"])
    att = project("bshe,hed->bsd", attend(q, k_all.astype(q.dtype), v_all.astype(q.dtype), mask), p["wo"])
    x = x + (lax.psum(att, axis) if axis else att)
    mlp = project("bsf,fd->bsd", jax.nn.gelu(project("bsd,df->bsf", _norm(x, p["ln2"]), p["w_in"])), p["w_out"])
    return x + (lax.psum(mlp, axis) if axis else mlp)


def _logits(params, x):
    return _norm(x, params["ln_f"]) @ params["unembed"]


def _causal(b, s):
    import jax.numpy as jnp

    return jnp.broadcast_to(jnp.tril(jnp.ones((s, s), bool)), (b, s, s))


def forward(params: dict, tokens, axis: str | None = None):
    """キャッシュなし: tokens (B, S) の全位置のロジット (B, S, V)。毎回、系列全体のアテンションを計算し直す
    （GQA のパラメータも受け取る ``ch6.lm.forward``）。"""
    b, s = tokens.shape
    x = params["embed"][tokens] + params["pos"][:s]
    for p in layers(params):
        k, v = _kv(p, x)
        x = _layer(p, x, k, v, _causal(b, s), axis)
    return _logits(params, x)


def init_cache(params: dict, batch: int, length: int, dtype=None) -> dict:
    """前もって確保する KV キャッシュ {"k", "v"}: どちらも (層, バッチ, 長さ, KV ヘッド, ヘッドの次元) の 0。"""
    import jax.numpy as jnp

    ls = layers(params)
    _, kv, e = ls[0]["wk"].shape
    shape = (len(ls), batch, length, kv, e)
    return {"k": jnp.zeros(shape, dtype or jnp.float32), "v": jnp.zeros(shape, dtype or jnp.float32)}


def prefill(params: dict, tokens, cache: dict, axis: str | None = None):
    """プロンプト tokens (B, S) を 1 度に処理し、位置 0..S-1 の K/V をキャッシュに書く。
    戻り値: (全位置のロジット (B, S, V), 書き込んだキャッシュ)。"""
    from jax import lax

    b, s = tokens.shape
    x = params["embed"][tokens] + params["pos"][:s]
    ck, cv = cache["k"], cache["v"]
    for i, p in enumerate(layers(params)):
        k, v = _kv(p, x)
        ck = lax.dynamic_update_slice(ck, k[None].astype(ck.dtype), (i, 0, 0, 0, 0))
        cv = lax.dynamic_update_slice(cv, v[None].astype(cv.dtype), (i, 0, 0, 0, 0))
        x = _layer(p, x, k, v, _causal(b, s), axis)
    return _logits(params, x), {"k": ck, "v": cv}


def write_at(cache_layer, new, pos):
    """cache_layer (B, T, K, E) の各行 b の位置 pos[b] に new (B, K, E) を書く（行ごとに位置が違ってよい）。"""
    import jax
    from jax import lax

    def one(c, n, p):
        return lax.dynamic_update_slice(c, n[None].astype(c.dtype), (p, 0, 0))

    return jax.vmap(one)(cache_layer, new, pos)


def decode(params: dict, cache: dict, tokens, pos, axis: str | None = None, write: str = "token"):
    """1 トークンずつの生成の 1 ステップ。tokens, pos: (B,)。各行のトークンを位置 pos[b] に置き、
    その K/V をキャッシュに書いて、位置 0..pos[b] の K/V に注意する。戻り値: (ロジット (B, V), キャッシュ)。

    write="token"（既定）: 新しいトークンの K/V だけを、層 i・行 b・位置 pos[b] に書く（scatter）。
    write="layer": 層 i のキャッシュ全体を取り出して書き換え、層ごと書き戻す（6.10 節の最初の書き方。
    値は同じだが、チップでは 1 層ごとにキャッシュの層全体を読み書きする。6.11 節がトレースで比べる）。"""
    import jax.numpy as jnp

    b, t = tokens.shape[0], cache["k"].shape[2]
    x = (params["embed"][tokens] + params["pos"][pos])[:, None]          # (B, 1, D)
    mask = (jnp.arange(t)[None, :] <= pos[:, None])[:, None]             # (B, 1, T)
    rows = jnp.arange(b)
    ck, cv = cache["k"], cache["v"]
    for i, p in enumerate(layers(params)):
        k, v = _kv(p, x)
        if write == "layer":
            ck = ck.at[i].set(write_at(ck[i], k[:, 0], pos))
            cv = cv.at[i].set(write_at(cv[i], v[:, 0], pos))
        else:
            ck = ck.at[i, rows, pos].set(k[:, 0].astype(ck.dtype))
            cv = cv.at[i, rows, pos].set(v[:, 0].astype(cv.dtype))
        x = _layer(p, x, ck[i], cv[i], mask, axis)
    return _logits(params, x)[:, 0], {"k": ck, "v": cv}


def decode_step_time(param_bytes: float, kv_bytes_per_seq: float, batch: int, n_params: float,
                     flops: float, hbm_bw: float):
    """デコード 1 ステップの秒の見積もり（スケーリングブック "All About Transformer Inference" の式）:
    (アテンション: batch × KV のバイト ÷ 帯域) + max(2 × batch × パラメータの数 ÷ 最大性能, 重みのバイト ÷ 帯域)。
    batch が小さいうちは (重み + batch × KV) ÷ 帯域 が下限になる。"""
    return batch * kv_bytes_per_seq / hbm_bw + max(2 * batch * n_params / flops, param_bytes / hbm_bw)


# ---------------------------------------------------------------- 系列で分割した KV キャッシュ

def attend_partial(q, k, v, valid):
    """そのデバイスの K/V のブロックだけのアテンションの途中結果（オンラインソフトマックスの状態）。
    q: (B, H, E)、k, v: (B, T, K, E)、valid: (B, T) -> (m (B, H), ell (B, H), acc (B, H, E))。"""
    import jax.numpy as jnp

    b, h, e = q.shape
    kv = k.shape[2]
    s = jnp.einsum("bkge,btke->bkgt", q.reshape(b, kv, h // kv, e), k).reshape(b, h, -1) / math.sqrt(e)
    s = jnp.where(valid[:, None], s, -jnp.inf)
    m = jnp.max(s, axis=-1)
    m_safe = jnp.where(jnp.isfinite(m), m, 0.0)          # ブロックがすべて無効でも NaN にしない
    p = jnp.exp(s - m_safe[..., None])
    acc = jnp.einsum("bkgt,btke->bkge", p.reshape(b, kv, h // kv, -1), v).reshape(b, h, e)
    return m, p.sum(-1), acc


def combine_partials(m, ell, acc, axis: str):
    """デバイスごとの途中結果をまとめる: 全体の最大値 pmax で測り直して psum し、acc / ell を返す (B, H, E)。"""
    import jax.numpy as jnp
    from jax import lax

    m_all = lax.pmax(m, axis)
    r = jnp.where(jnp.isfinite(m), jnp.exp(m - m_all), 0.0)
    return lax.psum(r[..., None] * acc, axis) / lax.psum(r * ell, axis)[..., None]


# ---------------------------------------------------------------- int8 の重み

def quantize_int8(w, reduce_axes):
    """出力チャネルごとの対称な int8: scale = max|w|（reduce_axes で）/ 127、q = round(w / scale)。
    すべて 0 のチャネルは scale = 1（q = 0）。戻り値: (q int8, scale float32、reduce_axes は長さ 1 で残す)。"""
    import jax.numpy as jnp

    w = jnp.asarray(w, jnp.float32)
    amax = jnp.max(jnp.abs(w), axis=reduce_axes, keepdims=True)
    scale = jnp.where(amax > 0, amax / 127.0, 1.0)
    return jnp.clip(jnp.round(w / scale), -127, 127).astype(jnp.int8), scale


def dequantize(q, scale, dtype=None):
    import jax.numpy as jnp

    return (q.astype(jnp.float32) * scale).astype(dtype or jnp.float32)


def quantize_params(params: dict) -> dict:
    """各層の :data:`MATRICES` の重みを {"q": int8, "scale": float32} に置き換えた木（ほかはそのまま）。"""
    def block(b):
        return {k: dict(zip(("q", "scale"), quantize_int8(w, MATRICES[k]))) if k in MATRICES else w
                for k, w in b.items()}

    return _map_blocks(params, block)


def dequantize_params(qparams: dict, dtype=None) -> dict:
    """:func:`quantize_params` の木を、計算に使う浮動小数の重みに戻す（jit の中で呼ぶと、XLA が行列積と融合できる）。"""
    def block(b):
        return {k: dequantize(w["q"], w["scale"], dtype) if isinstance(w, dict) else w for k, w in b.items()}

    return _map_blocks(qparams, block)


def tree_bytes(tree) -> int:
    """木のすべての配列のバイト数の合計。"""
    import jax

    return int(sum(x.nbytes for x in jax.tree.leaves(tree)))


# ---------------------------------------------------------------- コンパイルの回数

class _Counter:
    count = 0


_LISTENING: list[_Counter] = []
_REGISTERED = False


def _on_event(name, *args, **kwargs):
    if name == "/jax/core/compile/backend_compile_duration":
        for c in _LISTENING:
            c.count += 1


@contextlib.contextmanager
def compile_counter():
    """with の中で起きた、XLA のバックエンドのコンパイルの回数を数える（``jax.monitoring`` のイベント）::

        with compile_counter() as c:
            ...
        c.count
    """
    global _REGISTERED
    import jax

    if not _REGISTERED:
        jax.monitoring.register_event_duration_secs_listener(_on_event)
        _REGISTERED = True
    c = _Counter()
    _LISTENING.append(c)
    try:
        yield c
    finally:
        _LISTENING.remove(c)
