"""6.8b-2 causal_block_mask: 大きさの違うブロックの組 (i, j) の因果マスク。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, LearnerError, call, exercise, fmt

# 必須: i, j はトレースされた整数でも動く（jit の中で呼ぶ）、形 (bq, bk)、dtype bool、[r, c] は q 位置 >= k 位置。
# 自由: arange と比較でも、tril でも。


def _mask(i, j, bq, bk, op=np.greater_equal, q_len=None, k_len=None):
    q_pos = i * (bq if q_len is None else q_len) + np.arange(bq)
    k_pos = j * (bk if k_len is None else k_len) + np.arange(bk)
    return op(q_pos[:, None], k_pos[None, :])


# 隠しの組: (bq, bk, i, j)。対角をまたぐ組、全部 True、全部 False、長さが同じ組を混ぜる
_CASES = [(3, 5, 2, 1), (4, 2, 1, 2), (2, 3, 3, 2), (5, 5, 1, 1), (4, 3, 0, 2), (3, 2, 2, 0), (6, 4, 1, 1)]

_MISTAKES = [
    (dict(op=np.greater), "対角で 1 つずれています（q 位置 > k 位置）。同じ位置のキーは見てよいので、等号を含めて >= です。"),
    (dict(op=np.less_equal), "向きが逆です（q 位置 <= k 位置: 未来のキーを見ています）。クエリの位置がキーの位置以上のところが True です。"),
    (dict(op=np.less), "向きが逆で、対角も外れています。クエリの位置がキーの位置以上（>=）のところが True です。"),
]


def _explain_trace_error(exc: BaseException) -> str | None:
    name = type(exc).__name__
    if "TracerBool" in name or "ConcretizationTypeError" in name or "TracerIntegerConversion" in name:
        return (f"i, j がトレースされた値のときに {name} が起きました。Python の if や int(i) は使えません。"
                "位置の配列 i * bq + jnp.arange(bq) を作り、比較 >= で真偽値の配列にしましょう。")
    return None


@exercise("6.8b-2", "causal_block_mask")
def check_causal_block_mask(fn):
    import jax
    import jax.numpy as jnp

    if not callable(fn):
        raise Fail(f"関数を渡してください（受け取ったのは {type(fn).__name__} です）。")
    outs = []
    for bq, bk, i, j in _CASES:
        g = jax.jit(lambda i, j, bq=bq, bk=bk: fn(i, j, bq, bk))
        try:
            got = call(g, jnp.int32(i), jnp.int32(j))
        except LearnerError as exc:
            text = _explain_trace_error(exc.exc)
            if text:
                raise Fail(text) from None
            raise
        shape = tuple(getattr(got, "shape", ())) if hasattr(got, "shape") else None
        if shape is None:
            raise Fail(f"causal_block_mask は形 ({bq}, {bk}) の真偽値の配列を返すはずですが、{type(got).__name__} が返りました。")
        if shape == (bk, bq) and bq != bk:
            raise Fail(f"形が ({bk}, {bq}) で、転置しています。行がクエリ（bq = {bq}）、列がキー（bk = {bk}）の ({bq}, {bk}) です。")
        if shape != (bq, bk):
            raise Fail(f"形が違います: 期待 ({bq}, {bk})（行がクエリ、列がキー）、実際 {fmt(shape)}。")
        if got.dtype != jnp.bool_:
            raise Fail(f"dtype が {got.dtype} です。マスクは真偽値（bool）の配列で返しましょう（比較 >= の結果がそのまま bool です）。")
        outs.append(np.asarray(got))
    wants = [_mask(i, j, bq, bk) for bq, bk, i, j in _CASES]
    if all(np.array_equal(o, w) for o, w in zip(outs, wants)):
        return f"隠しのブロックの組 {len(_CASES)} 通り（長さの違う組、対角をまたぐ組）で、jit の中でマスクが一致しました。"

    def matches(make) -> bool:   # すべての組で、学習者の答えがこの形の誤りと同じか
        return all(np.array_equal(o, make(i, j, bq, bk)) for o, (bq, bk, i, j) in zip(outs, _CASES))

    k = next(n for n, (o, w) in enumerate(zip(outs, wants)) if not np.array_equal(o, w))
    bq, bk, i, j = _CASES[k]
    got, want = outs[k], wants[k]
    where = f"（ブロック i={i}（長さ {bq}）、j={j}（長さ {bk}））"
    for kw, text in _MISTAKES:
        if matches(lambda i, j, bq, bk, kw=kw: _mask(i, j, bq, bk, **kw)):
            raise Fail(text + where)
    if matches(lambda i, j, bq, bk: _mask(i, j, bq, bk, k_len=bq)):
        raise Fail(f"キーの位置を j * bq で数えています{where}。K/V のブロックの長さは bk なので、キーの位置は j * bk + 列 です。")
    if matches(lambda i, j, bq, bk: _mask(i, j, bq, bk, q_len=bk)):
        raise Fail(f"クエリの位置を i * bk で数えています{where}。クエリのブロックの長さは bq なので、位置は i * bq + 行 です。")
    if matches(lambda i, j, bq, bk: _mask(j, i, bq, bk)):
        raise Fail(f"i と j を入れ替えています{where}。i がクエリのブロック、j が K/V のブロックの番号です。")
    if matches(lambda i, j, bq, bk: np.tril(np.ones((bq, bk), bool))):
        raise Fail(f"ブロックの中の下三角をそのまま返しています{where}。大きさが違うブロックや対角でない組では、"
                   "グローバルな位置 i * bq + 行 と j * bk + 列 を比べます。")
    bad = np.argwhere(got != want)[0]
    raise Fail(f"マスクが違います{where}: 位置 ({bad[0]}, {bad[1]}) で期待 {bool(want[tuple(bad)])}、"
               f"実際 {bool(got[tuple(bad)])}（{int((got != want).sum())}/{got.size} 要素が違う）。"
               "[r, c] は i * bq + r >= j * bk + c のとき True です。")
