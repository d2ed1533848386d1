"""6.10-5 quantize: 出力チャネルごとのスケールを持つ対称な int8 の量子化。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, LearnerError, call, exercise
from ..lesson_calls import lesson_calls
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


def _check_positive(scale, w) -> None:
    """scale が有限の正の数か。すべて 0 の列だけの誤りなら、その列のことを言う。"""
    zero_cols = np.abs(w).max(axis=0) == 0
    for bad, what in ((~np.isfinite(scale), "NaN か inf"), (np.isfinite(scale) & (scale <= 0), "0 以下")):
        if not bad.any():
            continue
        if np.all(zero_cols[bad]):
            raise Fail(f"すべて 0 の列の scale が {what}{' ' if what[-1].isascii() else ''}です（max|w| / 127 = 0 のまま）。w / scale が 0 で割る計算に"
                       "ならないよう、その列の scale は 1 などの正の数にします。")
        j = int(np.flatnonzero(bad & ~zero_cols)[0])
        raise Fail(f"列 {j} の scale が {what}（{scale[j]:.4g}）でした。scale は max|w[:, j]| / 127 の正の数です。")


def _check_scale(q, scale, w) -> None:
    """scale が列ごとの max|w| / 127 か（違えば、どう違うかを言う）と、q が -127..127 に収まるか。"""
    amax_w = np.abs(w.astype(np.float64)).max(axis=0)
    nonzero = amax_w > 0
    amax_q = np.abs(q.astype(np.int64)).max(axis=0)
    want = amax_w[nonzero] / 127
    got = scale[nonzero]
    if np.allclose(got, amax_w[nonzero] / 128, rtol=1e-5):
        raise Fail("q が -127..127 の範囲を超えます（scale を 128 で割った値にすると -128 が出ます）。"
                   "対称な int8 は -127..127 なので、scale = max|w| / 127 にします。")
    if not np.allclose(got, want, rtol=1e-5):
        bad = int(np.flatnonzero(~np.isclose(got, want, rtol=1e-5))[0])
        j = int(np.flatnonzero(nonzero)[bad])
        if np.allclose(got, 1 / want, rtol=1e-5):
            raise Fail("scale が 127 / max|w[:, j]|（逆数）になっています。q = round(w / scale) で戻せるよう、"
                       "scale = max|w[:, j]| / 127 を返します。")
        if amax_q[j] < 127 and np.all(amax_q <= 127):
            raise Fail(f"列 {j} の |q| の最大が {int(amax_q[j])} で、int8 の範囲を使い切っていません。"
                       "scale = max|w[:, j]| / 127 にすると、最大の値が 127 になります。")
        raise Fail(f"列 {j} の scale は max|w[:, {j}]| / 127 = {want[bad]:.4g} のはずが、{scale[j]:.4g} でした。"
                   "scale は列ごとの絶対値の最大を 127 で割った値です。")
    if np.any(q == -128) or np.any(amax_q > 127):
        raise Fail("q が -127..127 の範囲を超えます（-128 があります）。対称な int8 は -127..127 なので、"
                   "jnp.clip(…, -127, 127) で収めます。")


def _divides_by_zero(fn, w) -> bool:
    """すべて 0 の列で 0 で割る（0/0 の NaN や x/0 の inf を作ってから消す、jnp.where で後から捨てる）答えか。jit を外して
    1 演算ずつ NaN と inf を調べ、NumPy の 0 除算も例外にする（NaN を int8 にした値は CPU では 0 でも、ほかでは決まらない）。"""
    import jax

    try:
        with jax.disable_jit(), jax.debug_nans(True), jax.debug_infs(True), np.errstate(divide="raise", invalid="raise"):
            call(fn, w.copy())
    except LearnerError as err:
        return isinstance(err.exc, FloatingPointError)
    return False


@exercise("6.10-5", "quantize")
def check_quantize(fn):
    for w in _inputs():
        with lesson_calls(fn, "ch6.serving", "quantize_int8") as called:
            result = call(fn, w.copy())
        if called:
            raise Fail("本編の serving.quantize_int8 を呼んでいます。列ごとの scale と q を、この関数の中で自分で計算してください。")
        q, scale = _arrays(result, w)
        cols = w.shape[1]
        if scale.shape == ():
            raise Fail("scale がスカラー（行列全体で 1 つ）です。外れ値の列があるとほかの列の精度が落ちるので、"
                       f"出力チャネルごと（形 ({cols},)）に求めます。")
        if scale.shape == (w.shape[0],):
            raise Fail(f"scale の形が入力の軸の ({w.shape[0]},) です。出力チャネル（列）ごとなので、"
                       f"max は axis=0 で取り、形は ({cols},) です。")
        if scale.shape != (cols,):
            raise Fail(f"scale の形は出力チャネルごとの ({cols},) のはずが、{scale.shape} でした。")
        if scale.dtype != np.float32:
            raise Fail(f"scale の dtype は float32 のはずが、{scale.dtype} でした。.astype(jnp.float32) でそろえてください。")
        scale = scale.astype(np.float64)
        _check_positive(scale, w)
        _check_scale(q, scale, w)
        err = np.abs(q.astype(np.float64) * scale - w.astype(np.float64))
        if np.any(err > scale / 2 * (1 + 1e-5) + 1e-12):
            raise Fail("q·scale と w の差が scale/2 を超える要素があります。切り捨て（floor や astype だけ）ではなく、"
                       "jnp.round で最も近い整数に丸めます。")
    if _divides_by_zero(fn, w):
        raise Fail("すべて 0 の列で 0 で割っています（NaN か inf）。jnp.where で後から選んでも割り算はするので、"
                   "割る前にその列の scale を 1 などの正の数にします。")
    return "隠しの行列 2 つ（外れ値の列、すべて 0 の列を含む）で、列ごとのスケールと丸めの誤差が範囲内でした。"
