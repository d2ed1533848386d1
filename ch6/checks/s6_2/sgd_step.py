"""6.2 pmap の演習チェック。

隠し入力はチェックのときに ``jax.device_count()`` から作ります（1〜8 のどのデバイス数でも動く）。
値は NumPy の参照と比べ、さらに「本当にデバイス間の集団通信を使っているか」を jaxpr
（psum / ppermute）で確かめます。ノートブックの定義（損失、学習率、軸の名前）の写しは持ちません。
6.2-2 は損失・学習率・軸の名前を引数で受け取るので、採点ではノートブックと違うものを渡します。
"""
from __future__ import annotations

import re

import numpy as np

from ..checking import Fail, LearnerError, NotDone, call, exercise, expect_close, expect_shape
from ..checking import walk as _walk
from ..checking import f32 as _f32, hidden_rng, n_devices as _n
from ..checking import PSUM_NAMES, dict_entry as _get, is_close as _close, traced_eqns as _eqns  # noqa: F401


def _rng(tag: int) -> np.random.Generator:
    return hidden_rng(62_000 + tag)


def _prims(fn, *args) -> set[str]:
    return {e.primitive.name for e in _eqns(fn, *args)}


# 6.2-1 -------------------------------------------------------------------------------

@exercise("6.2-1", "normalize_across_devices")
def check_normalize(fn):
    n = _n()
    rng = _rng(1)
    ks = [k for k in (5, 3, 4) if k != n][:2]  # 形を変えて 2 回（形の決め打ちを防ぐ）。k != n で転置と区別できる
    for k in ks:
        xs = _f32(rng.uniform(0.5, 2.0, size=(n, k)))
        want = xs / xs.sum()
        got = call(fn, xs)
        if getattr(got, "shape", None) == (k, n) and k != n:
            raise Fail(f"出力の形が {(k, n)} で、期待 {(n, k)} の転置です。デバイスの軸は 0 軸目のまま返します"
                       "（in_axes / out_axes は既定の 0 で十分です）。")
        local = xs / xs.sum(axis=1, keepdims=True)
        if n > 1 and _close(got, local):
            raise Fail("各行（各デバイス）の中だけで合計が 1 になっています。全デバイスの合計で割るには "
                       "lax.psum(x.sum(), axis_name) を使います（pmap に axis_name を付けましょう）。")
        expect_close(got, want, f"normalize_across_devices(xs) の結果（xs の形 {(n, k)}）",
                     hint="全要素の合計が 1 になるように、全デバイスの合計で割ります。")
    prims = _prims(fn, xs)
    if not prims & PSUM_NAMES:
        raise Fail("値は合っていますが、jaxpr にデバイス間の psum が見つかりません。"
                   "pmap の中で lax.psum を使って全デバイスの合計を取りましょう。")
    return f"隠し入力 ({n}, {ks[0]}) と ({n}, {ks[1]}) で一致し、デバイス間の psum を使っています。"


# 6.2-2 -------------------------------------------------------------------------------

HIDDEN_AXIS = "replicas"  # 採点で渡す軸の名前（ノートブックの "devices" とは違う）
HIDDEN_LR = 0.3  # 採点で渡す学習率（ノートブックの LR とは違う）


def _logcosh_loss(params, x, y):
    """採点で渡す損失（ノートブックの mse_loss とは違う）: 残差の log cosh の平均。"""
    import jax.numpy as jnp

    r = x @ params["w"] + params["b"] - y
    return jnp.mean(jnp.logaddexp(r, -r) - jnp.log(2.0))


def _logcosh_step_np(params, x, y, lr, scale=1.0):
    """全データ x (N, d), y (N,) での 1 ステップ。scale は勾配の倍率（誤答の見分け用）。"""
    w, b = np.asarray(params["w"], np.float64), float(params["b"])
    t = np.tanh(x @ w + b - y)  # d log cosh(r) / dr
    gw, gb = x.T @ t / len(y), t.mean()
    return {"w": w - lr * scale * gw, "b": b - lr * scale * gb}


def _regression(rng, groups, per, d):
    x = _f32(rng.normal(size=(groups, per, d)))
    w_true = rng.normal(size=(d,))
    y = _f32(x @ w_true + 0.5 + 0.1 * rng.normal(size=(groups, per)))
    return x, y


def _first_line(exc: BaseException) -> str:
    from ..explain import clean

    return clean(exc)[:80]


def _unbound_axis(exc: LearnerError) -> str | None:
    m = re.search(r"unbound axis name: (\S+?)\.?(?:\s|$)", str(exc.exc))
    return m.group(1) if isinstance(exc.exc, NameError) and m else None


@exercise("6.2-2", "sgd_step")
def check_sgd_step(fn):
    import jax

    n = _n()
    rng = _rng(2)
    d, per = 4, 6
    params = {"w": _f32(rng.normal(size=(d,)) * 0.3), "b": np.float32(0.2)}
    xs, ys = _regression(rng, n, per, d)
    want = _logcosh_step_np(params, xs.reshape(-1, d), ys.reshape(-1), HIDDEN_LR)
    hint = ("損失は引数 loss_fn、学習率は引数 lr を使います（採点ではノートブックと違う損失と学習率を渡します）。")

    def stepped(p, x, y):  # 1 デバイス分の関数を、引数の軸の名前で pmap する
        return jax.pmap(fn, axis_name=HIDDEN_AXIS, in_axes=(None, 0, 0), static_broadcasted_argnums=(3, 4, 5))(
            p, x, y, _logcosh_loss, HIDDEN_LR, HIDDEN_AXIS)

    try:
        got = call(stepped, params, xs, ys)
    except LearnerError as exc:
        if isinstance(exc.exc, TypeError) and "positional argument" in str(exc.exc):
            raise Fail("sgd_step は (params, x, y, loss_fn, lr, axis_name) の 6 つの引数を受け取ります"
                       f"（「{_first_line(exc.exc)}」）。") from None
        name = _unbound_axis(exc)
        if name is None:
            raise
        raise Fail(f"集団通信に軸の名前 '{name}' が書かれていますが、軸の名前は引数 axis_name で受け取ります"
                   f"（採点では '{HIDDEN_AXIS}' を渡します）。lax.pmean(grads, axis_name) のように引数を使いましょう。") from None
    gw, gb = _get(got, "w", "sgd_step の戻り値"), _get(got, "b", "sgd_step の戻り値")
    expect_shape(gw, (n, d), "pmap した結果の 'w'", "パラメータ 'w' と同じ形 (d,) を返してください。")
    gw, gb = np.asarray(gw), np.asarray(gb)
    if n > 1 and not (np.allclose(gw, gw[:1], atol=1e-6) and np.allclose(gb, gb[:1], atol=1e-6)):
        raise Fail("デバイスごとに違うパラメータになりました: 勾配を平均していません。"
                   "grad の後で lax.pmean(grads, axis_name) で全デバイスの平均を取りましょう。")
    if n > 1 and _close(gw[0], _logcosh_step_np(params, xs.reshape(-1, d), ys.reshape(-1), HIDDEN_LR, scale=n)["w"]):
        raise Fail(f"更新が {n} 倍大きすぎます: 勾配を psum で合計しています。平均は lax.pmean です。")
    expect_close(gw[0], want["w"], "更新後の 'w'", hint=hint)
    expect_close(gb[0], want["b"], "更新後の 'b'", hint=hint)
    # デバイスの数に依らない確認: vmap(axis_name=...) でも同じ集団通信が使える（軸の大きさ 3）
    x3, y3 = _regression(rng, 3, per, d)
    want3 = _logcosh_step_np(params, x3.reshape(-1, d), y3.reshape(-1), HIDDEN_LR)
    got3 = call(jax.vmap(lambda p, x, y: fn(p, x, y, _logcosh_loss, HIDDEN_LR, HIDDEN_AXIS),
                         in_axes=(None, 0, 0), axis_name=HIDDEN_AXIS), params, x3, y3)
    w3 = np.asarray(_get(got3, "w", "sgd_step の戻り値"))
    if _close(w3[0], _logcosh_step_np(params, x3.reshape(-1, d), y3.reshape(-1), HIDDEN_LR, scale=3)["w"]):
        raise Fail("軸の大きさ 3 で更新が 3 倍大きすぎます: 勾配を psum で合計しています。平均は lax.pmean です。")
    expect_close(w3[0], want3["w"], f"vmap(axis_name='{HIDDEN_AXIS}') で 3 グループにしたときの 'w'",
                 hint="lax.pmean(grads, axis_name) で平均します。")
    prims = _prims(stepped, params, xs, ys)
    if not prims & PSUM_NAMES:
        extra = "all_gather で全データを集めるより、" if "all_gather" in prims else ""
        raise Fail(f"jaxpr にデバイス間の平均（psum）が見つかりません。{extra}"
                   "勾配は lax.pmean(grads, axis_name) で平均しましょう。")
    return (f"隠し入力（{n} デバイス × {per} 件、採点用の損失と学習率 {HIDDEN_LR}、軸 '{HIDDEN_AXIS}'）で"
            "全データの 1 ステップと一致し、勾配を pmean で平均しています。")


# 6.2-3 -------------------------------------------------------------------------------

@exercise("6.2-3", "ring_shift")
def check_ring_shift(fn):
    n = _n()
    rng = _rng(3)
    xs = _f32(rng.normal(size=(n, 3)))
    shifts = [1, -1] + ([2] if n > 2 else [])
    for shift in shifts:
        want = np.roll(xs, shift, axis=0)
        got = call(fn, xs, shift)
        expect_shape(got, xs.shape, f"ring_shift(xs, {shift}) の結果")
        if _close(got, want):
            continue
        order = ", ".join(f"{(i - shift) % n}→{i}" for i in range(min(n, 4))) + ("…" if n > 4 else "")
        if shift != 1 and n > 2 and _close(got, np.roll(xs, 1, axis=0)):
            raise Fail(f"shift={shift} でも shift=1 と同じ結果です。引数 shift を使って perm を作りましょう"
                       f"（期待する並び 送信元→受信先: {order}）。")
        if n > 2 and _close(got, np.roll(xs, -shift, axis=0)):
            raise Fail(f"shift={shift} で回る向きが逆です。デバイス i の値はデバイス (i + shift) % n へ送ります"
                       f"（期待する並び 送信元→受信先: {order}）。perm の組は (送信元, 送信先) です。")
        if n > 1 and _close(got, xs):
            raise Fail(f"shift={shift} で値が動いていません（期待する並び 送信元→受信先: {order}）。"
                       "lax.ppermute(x, axis_name, perm) で送り先を指定しましょう。")
        expect_close(got, want, f"ring_shift(xs, {shift}) の結果",
                     hint=f"{n} デバイスの環で、期待する並び 送信元→受信先 は {order} です。")
    prims = _prims(lambda a: fn(a, 1), xs)
    if "ppermute" not in prims:
        how = "all_gather で全部集めてから選ぶと通信が n 倍です。" if "all_gather" in prims else \
            "jnp.roll は 1 つのデバイスの中での並べ替えで、デバイス間の送受信ではありません。"
        raise Fail(f"値は合っていますが、jaxpr に ppermute が見つかりません。{how}"
                   "pmap の中で lax.ppermute を使いましょう。")
    return f"{n} デバイスの環で shift={shifts} がすべて一致し、ppermute で送っています。"
