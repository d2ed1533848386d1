"""6.10-5 quantize: 出力チャネルごとのスケールを持つ対称な int8 の量子化。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, call, exercise
from .common import exercise_rng

# 必須: w (入力, 出力) の float32 -> (q int8 (入力, 出力), scale float32 (出力,))。scale[j] = max|w[:, j]| / 127、
# q = round(w / scale)（最も近い整数）、|q| <= 127。すべて 0 の列は q = 0、scale は正の有限の数。


def _inputs():
    r = exercise_rng(5)
    out = []
    for rows, cols in [(9, 7), (16, 5)]:
        w = r.normal(size=(rows, cols)).astype(np.float32) * r.uniform(0.01, 3.0, size=cols).astype(np.float32)
        w[:, 1] *= 40.0              # 外れ値の列
        w[:, -1] = 0.0               # すべて 0 の列
        out.append(w)
    return out


def _arrays(result, w):
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise Fail(f"quantize は (q, scale) の 2 つ組を返すはずが、{type(result).__name__} が返りました。")
    q, scale = (np.asarray(x) if hasattr(x, "shape") else x for x in result)
    if not hasattr(q, "shape") or not hasattr(scale, "shape"):
        raise Fail("q と scale は配列で返します。")
    if q.shape != w.shape:
        raise Fail(f"q の形は w と同じ {w.shape} のはずが、{q.shape} でした。")
    if q.dtype != np.int8:
        raise Fail(f"q の dtype は int8 のはずが、{q.dtype} でした。丸めた後に .astype(jnp.int8) で 1 バイトにします。")
    return q, scale


@exercise("6.10-5", "quantize")
def check_quantize(fn):
    for w in _inputs():
        q, scale = _arrays(call(fn, w.copy()), w)
        cols = w.shape[1]
        if scale.shape == ():
            raise Fail("scale がスカラー（行列全体で 1 つ）です。外れ値の列があるとほかの列の精度が落ちるので、"
                       f"出力チャネルごと（形 ({cols},)）に求めます。")
        if scale.shape == (w.shape[0],):
            raise Fail(f"scale の形が入力の軸の ({w.shape[0]},) です。出力チャネル（列）ごとなので、"
                       f"max は axis=0 で取り、形は ({cols},) です。")
        if scale.shape != (cols,):
            raise Fail(f"scale の形は出力チャネルごとの ({cols},) のはずが、{scale.shape} でした。")
        scale = scale.astype(np.float64)
        if not np.all(np.isfinite(scale)):
            raise Fail("scale に NaN か inf があります。すべて 0 の列で max|w| = 0 で割ったためなので、"
                       "その列の scale は 1 などの正の数にします。")
        if np.any(scale <= 0):
            raise Fail("scale に 0 以下の値があります。すべて 0 の列で max|w| / 127 = 0 のままだと w / scale が 0 で割る"
                       "計算になるので、scale は正の数（その列ではたとえば 1）にします。")
        nonzero = np.abs(w).max(axis=0) > 0
        amax = np.abs(q.astype(np.int64)).max(axis=0)
        by_128 = np.allclose(scale[nonzero], np.abs(w).max(axis=0)[nonzero] / 128, rtol=1e-5)
        if by_128 or np.any(q == -128) or np.any(amax > 127):
            raise Fail("q が -127..127 の範囲を超えます（128 で割ったか、クリップしていない）。対称な int8 は -127..127 なので、"
                       "scale = max|w| / 127 にします。")
        err = np.abs(q.astype(np.float64) * scale - w.astype(np.float64))
        if np.any(err > scale / 2 * (1 + 1e-5) + 1e-12):
            raise Fail("q·scale と w の差が scale/2 を超える要素があります。切り捨て（floor や astype だけ）ではなく、"
                       "jnp.round で最も近い整数に丸めます。")
        if np.any(amax[nonzero] < 127):
            j = int(np.flatnonzero(nonzero & (amax < 127))[0])
            raise Fail(f"列 {j} の |q| の最大が {int(amax[j])} で、int8 の範囲を使い切っていません。"
                       "scale = max|w[:, j]| / 127 にすると、最大の値が 127 になります。")
    return "隠しの行列 2 つ（外れ値の列、すべて 0 の列を含む）で、列ごとのスケールと丸めの誤差が範囲内でした。"
