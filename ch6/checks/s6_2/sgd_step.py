"""6.2-2 sgd_step: 勾配を全デバイスで平均する SGD の 1 ステップ（lax.pmean、損失・学習率・軸の名前は引数）。"""
from __future__ import annotations

import re

import numpy as np

from ...checking import (
    Fail, LearnerError, PSUM_NAMES, call, dict_entry, exercise, expect_close, expect_shape, f32, is_close, n_devices,
)
from ..sgd_update import as_vector, step_with, update_mistake
from .common import exercise_rng, primitives


# 6.2-2 -------------------------------------------------------------------------------

HIDDEN_AXIS = "replicas"  # 採点で渡す軸の名前（ノートブックの "devices" とは違う）
HIDDEN_LR = 0.3  # 採点で渡す学習率（ノートブックの LR とは違う）


def _logcosh_loss(params, x, y):
    """採点で渡す損失（ノートブックの mse_loss とは違う）: 残差の log cosh の平均。"""
    import jax.numpy as jnp

    r = x @ params["w"] + params["b"] - y
    return jnp.mean(jnp.logaddexp(r, -r) - jnp.log(2.0))


def _logcosh_grads_np(params, x, y):
    """データ x (N, d), y (N,) での log cosh 損失の勾配 {'w', 'b'}。"""
    w, b = np.asarray(params["w"], np.float64), float(params["b"])
    t = np.tanh(x @ w + b - y)  # d log cosh(r) / dr
    return {"w": x.T @ t / len(y), "b": t.mean()}


def _mse_grads_np(params, x, y):
    """ノートブックの mse_loss の勾配（引数 loss_fn を使わない答えの見分け用）。"""
    w, b = np.asarray(params["w"], np.float64), float(params["b"])
    r = x @ w + b - y
    return {"w": 2 * x.T @ r / len(y), "b": 2 * r.mean()}


def _logcosh_step_np(params, x, y, lr, scale=1.0):
    """全データ x (N, d), y (N,) での 1 ステップ。scale は勾配の倍率（誤答の見分け用）。"""
    g = _logcosh_grads_np(params, x, y)
    return {"w": np.asarray(params["w"], np.float64) - lr * scale * g["w"], "b": float(params["b"]) - lr * scale * g["b"]}


NOTEBOOK_LR = 0.1  # ノートブックの LR（引数 lr を使わない答えの見分け用）


def _named_mistake(params, got, xs, ys, lr) -> str | None:
    """pmap した結果の 1 デバイス分 got が、よくある誤りに当たればその説明。"""
    d = xs.shape[-1]
    x, y = xs.reshape(-1, d), ys.reshape(-1)
    for rate in {lr, NOTEBOOK_LR}:
        if is_close(as_vector(got), as_vector(step_with(params, _mse_grads_np(params, x, y), rate)), rtol=1e-4, atol=1e-5):
            return ("ノートブックの mse_loss と同じ更新になりました。引数 loss_fn を使っていません。"
                    "損失は引数の loss_fn で求めます（採点ではノートブックと違う損失を渡します）。")
    return update_mistake(params, got, _logcosh_grads_np(params, x, y), lr,
                          device_grads=[_logcosh_grads_np(params, xd, yd) for xd, yd in zip(xs, ys)])


def _regression(rng, groups, per, d):
    x = f32(rng.normal(size=(groups, per, d)))
    w_true = rng.normal(size=(d,))
    y = f32(x @ w_true + 0.5 + 0.1 * rng.normal(size=(groups, per)))
    return x, y


def _first_line(exc: BaseException) -> str:
    from ...explain import clean

    return clean(exc)[:80]


def _unbound_axis(exc: LearnerError) -> str | None:
    m = re.search(r"unbound axis name: (\S+?)\.?(?:\s|$)", str(exc.exc))
    return m.group(1) if isinstance(exc.exc, NameError) and m else None


@exercise("6.2-2", "sgd_step")
def check_sgd_step(fn):
    import jax

    n = n_devices()
    rng = exercise_rng(2)
    d, per = 4, 6
    params = {"w": f32(rng.normal(size=(d,)) * 0.3), "b": np.float32(0.2)}
    xs, ys = _regression(rng, n, per, d)
    want = _logcosh_step_np(params, xs.reshape(-1, d), ys.reshape(-1), HIDDEN_LR)
    hint = ("各デバイスで引数 loss_fn の勾配を求め、lax.pmean(grads, axis_name) で平均してから "
            "params - lr * grads を返します。")

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
    gw, gb = dict_entry(got, "w", "sgd_step の戻り値"), dict_entry(got, "b", "sgd_step の戻り値")
    expect_shape(gw, (n, d), "pmap した結果の 'w'", "パラメータ 'w' と同じ形 (d,) を返してください。")
    gw, gb = np.asarray(gw), np.asarray(gb)
    if n > 1 and not (np.allclose(gw, gw[:1], atol=1e-6) and np.allclose(gb, gb[:1], atol=1e-6)):
        raise Fail("デバイスごとに違うパラメータになりました: 勾配を平均していません。"
                   "grad の後で lax.pmean(grads, axis_name) で全デバイスの平均を取りましょう。")
    if n > 1 and is_close(gw[0], _logcosh_step_np(params, xs.reshape(-1, d), ys.reshape(-1), HIDDEN_LR, scale=n)["w"]):
        raise Fail(f"更新が {n} 倍大きすぎます: 勾配を psum で合計しています。平均は lax.pmean です。")
    why = _named_mistake(params, {"w": gw[0], "b": gb[0]}, xs, ys, HIDDEN_LR)
    if why:
        raise Fail(f"更新後のパラメータ（軸 '{HIDDEN_AXIS}'、{n} デバイス）の値が違います: {why}")
    expect_close(gw[0], want["w"], "更新後の 'w'", hint=hint)
    expect_close(gb[0], want["b"], "更新後の 'b'", hint=hint)
    # デバイスの数に依らない確認: vmap(axis_name=...) でも同じ集団通信が使える（軸の大きさ 3）
    x3, y3 = _regression(rng, 3, per, d)
    want3 = _logcosh_step_np(params, x3.reshape(-1, d), y3.reshape(-1), HIDDEN_LR)
    got3 = call(jax.vmap(lambda p, x, y: fn(p, x, y, _logcosh_loss, HIDDEN_LR, HIDDEN_AXIS),
                         in_axes=(None, 0, 0), axis_name=HIDDEN_AXIS), params, x3, y3)
    w3 = np.asarray(dict_entry(got3, "w", "sgd_step の戻り値"))
    b3 = np.asarray(dict_entry(got3, "b", "sgd_step の戻り値"))
    if is_close(w3[0], _logcosh_step_np(params, x3.reshape(-1, d), y3.reshape(-1), HIDDEN_LR, scale=3)["w"]):
        raise Fail("軸の大きさ 3 で更新が 3 倍大きすぎます: 勾配を psum で合計しています。平均は lax.pmean です。")
    why = _named_mistake(params, {"w": w3[0], "b": b3.reshape(-1)[0]}, x3, y3, HIDDEN_LR)
    if why:
        raise Fail(f"vmap(axis_name='{HIDDEN_AXIS}') で 3 グループにしたときの更新の値が違います: {why}")
    expect_close(w3[0], want3["w"], f"vmap(axis_name='{HIDDEN_AXIS}') で 3 グループにしたときの 'w'",
                 hint="lax.pmean(grads, axis_name) で平均します。")
    prims = primitives(stepped, params, xs, ys)
    if not prims & PSUM_NAMES:
        extra = "all_gather で全データを集めるより、" if "all_gather" in prims else ""
        raise Fail(f"jaxpr にデバイス間の平均（psum）が見つかりません。{extra}"
                   "勾配は lax.pmean(grads, axis_name) で平均しましょう。")
    return (f"隠し入力（{n} デバイス × {per} 件、採点用の損失と学習率 {HIDDEN_LR}、軸 '{HIDDEN_AXIS}'）で"
            "全データの 1 ステップと一致し、勾配を pmean で平均しています。")
