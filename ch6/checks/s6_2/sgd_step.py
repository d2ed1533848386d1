"""6.2-2 sgd_step: デバイスごとに有効な件数が違うバッチ（mask）で、全データの平均の勾配を取る SGD の 1 ステップ。

各デバイスは同じ形 (per, d) の x を受け持ちますが、mask が 1 の行だけが有効なデータで、0 の行はパディングです。
全データの平均損失 Σ mask·loss / Σ mask の勾配には、勾配の和と件数の和の 2 つを psum で集めます。
各デバイスの平均を pmean すると、件数の少ないデバイスのサンプルが重くなります（講義の 5 節の pmean の先の一歩）。
損失・学習率・軸の名前は引数で受け取り、採点ではノートブックと違うものを渡します。
"""
from __future__ import annotations

import re

import numpy as np

from ...checking import (
    PSUM_NAMES,
    Fail,
    LearnerError,
    call,
    dict_entry,
    exercise,
    expect_close,
    expect_shape,
    f32,
    n_devices,
)
from ..sgd_update import as_vector, step_with, update_mistake
from .common import exercise_rng, primitives

HIDDEN_AXIS = "replicas"  # 採点で渡す軸の名前（ノートブックの "devices" とは違う）
HIDDEN_LR = 0.3  # 採点で渡す学習率（ノートブックの LR とは違う）
NOTEBOOK_LR = 0.1  # ノートブックの LR（引数 lr を使わない答えの見分け用）
PER, D = 6, 4  # デバイスあたりの行数、特徴の数


def _logcosh_losses(params, x, y):
    """採点で渡す損失（ノートブックの squared_errors とは違う）: 行ごとの残差の log cosh、形 (per,)。"""
    import jax.numpy as jnp

    r = x @ params["w"] + params["b"] - y
    return jnp.logaddexp(r, -r) - jnp.log(2.0)


def _grads_np(params, x, y, weights, kind="logcosh"):
    """行ごとの重み weights での損失の重みつき和 Σ weights·loss の勾配 {'w', 'b'}（NumPy）。"""
    w, b = np.asarray(params["w"], np.float64), float(params["b"])
    r = x @ w + b - y
    t = np.tanh(r) if kind == "logcosh" else 2 * r  # d loss / dr
    return {"w": x.T @ (weights * t), "b": float(np.sum(weights * t))}


def _scaled(g, s):
    return {k: v * s for k, v in g.items()}


def _data(rng, groups, counts):
    """groups 個のデバイス分の x (groups, PER, D), y, mask。パディングの行は値の大きい別のデータ（無視しないと値が変わる）。"""
    x = f32(rng.normal(size=(groups, PER, D)))
    w_true = rng.normal(size=(D,))
    y = f32(x @ w_true + 0.5 + 0.1 * rng.normal(size=(groups, PER)))
    mask = np.zeros((groups, PER), np.float32)
    for g, c in enumerate(counts):
        mask[g, :c] = 1.0
    pad = mask == 0
    x[pad] = f32(rng.normal(size=(int(pad.sum()), D)) * 3.0 + 2.0)
    y[pad] = f32(rng.normal(size=int(pad.sum())) * 3.0 - 4.0)
    return x, y, mask


def _counts(groups: int) -> list[int]:
    """デバイスごとの有効な件数: 1 以上 PER 以下で、少なくとも 2 つの値が違う（1 デバイスでもパディングはある）。"""
    return [[PER, 2, 5, 1, 4, 3][g % 6] for g in range(groups)] if groups > 1 else [4]


def _references(params, xs, ys, masks):
    """正解の勾配と、よくある誤りの勾配（名前つき）。"""
    groups = len(xs)
    flat = [a.reshape(-1, *a.shape[2:]) for a in (xs, ys, masks)]
    x, y, m = flat
    total = float(m.sum())
    right = _scaled(_grads_np(params, x, y, m), 1 / total)
    per_device = [_scaled(_grads_np(params, xd, yd, md), 1 / float(md.sum())) for xd, yd, md in zip(xs, ys, masks)]
    mean_of_means = {k: np.mean([g[k] for g in per_device], axis=0) for k in ("w", "b")}
    wrong = [
        (_scaled(_grads_np(params, x, y, np.ones_like(m)), 1 / m.size),
         "mask が使われていないので、パディングの行まで損失に入っています。各行の損失に mask を掛けてから足してください。"),
        (_scaled(_grads_np(params, x, y, m), 1 / m.size),
         f"すべての行の数（{groups} × {PER}）で割っています。割るのは有効な件数の合計 lax.psum(jnp.sum(mask), axis_name) です。"),
        (_scaled(_grads_np(params, x, y, m), 1.0),
         "勾配が有効な件数の合計で割られていません。psum した勾配を lax.psum(jnp.sum(mask), axis_name) で割ってください。"),
    ]
    if groups > 1 and not np.allclose(as_vector(mean_of_means), as_vector(right), rtol=1e-4, atol=1e-5):
        wrong.append((mean_of_means,
                      "デバイスごとの平均を pmean したので、件数の少ないデバイスのサンプルが重くなっています。"
                      "勾配の和と件数の和を lax.psum で集めてから割ってください。"))
    return right, per_device, wrong


def _named_mistake(params, got, xs, ys, masks, lr) -> str | None:
    """1 デバイス分の結果 got が、よくある誤りに当たればその説明。"""
    right, per_device, wrong = _references(params, xs, ys, masks)
    x, y, m = (a.reshape(-1, *a.shape[2:]) for a in (xs, ys, masks))
    squared = _scaled(_grads_np(params, x, y, m, kind="squared"), 1 / float(m.sum()))
    for rate in {lr, NOTEBOOK_LR}:
        if np.allclose(as_vector(got), as_vector(step_with(params, squared, rate)), rtol=1e-4, atol=1e-5):
            return ("演習のノートブックの squared_errors と同じ更新なので、チェックが渡した loss_fn が使われていません。"
                    "引数の loss_fn を使ってください。")
    for grads, why in wrong:
        if np.allclose(as_vector(got), as_vector(step_with(params, grads, lr)), rtol=1e-4, atol=1e-5):
            return why
    return update_mistake(params, got, right, lr, device_grads=per_device)



def _unbound_axis(exc: LearnerError) -> str | None:
    m = re.search(r"unbound axis name: (\S+?)\.?(?:\s|$)", str(exc.exc))
    return m.group(1) if isinstance(exc.exc, NameError) and m else None


def _call_pmap(fn, params, xs, ys, masks):
    import jax

    def stepped(p, x, y, m):  # 1 デバイス分の関数を、引数の軸の名前で pmap する
        return jax.pmap(fn, axis_name=HIDDEN_AXIS, in_axes=(None, 0, 0, 0), static_broadcasted_argnums=(4, 5, 6))(
            p, x, y, m, _logcosh_losses, HIDDEN_LR, HIDDEN_AXIS)

    try:
        return stepped, call(stepped, params, xs, ys, masks)
    except LearnerError as exc:
        if isinstance(exc.exc, TypeError) and "positional argument" in str(exc.exc):
            raise Fail("sgd_step の引数の数が合いません。"
                       "7 つの引数 (params, x, y, mask, loss_fn, lr, axis_name) を受け取るようにしてください。") from None
        name = _unbound_axis(exc)
        if name is None:
            raise
        raise Fail(f"集団通信に軸の名前 '{name}' が直接書かれていて、チェックが渡す軸の名前と合いません。"
                   "lax.psum(…, axis_name) のように引数を使ってください。") from None


def _expect_update(params, got, xs, ys, masks, what):
    w, b = dict_entry(got, "w", "sgd_step の戻り値"), dict_entry(got, "b", "sgd_step の戻り値")
    groups = len(xs)
    expect_shape(w, (groups, D), f"{what} の 'w'", "パラメータ 'w' と同じ形 (d,) を返してください。")
    w, b = np.asarray(w, np.float64), np.asarray(b, np.float64).reshape(groups)
    if groups > 1 and not (np.allclose(w, w[:1], atol=1e-6) and np.allclose(b, b[:1], atol=1e-6)):
        total = _grads_np(params, *(a.reshape(-1, *a.shape[2:]) for a in (xs, ys, masks)))
        local = [step_with(params, _scaled(total, 1 / float(m.sum())), HIDDEN_LR) for m in masks]
        if all(np.allclose(as_vector({"w": w[d], "b": b[d]}), as_vector(local[d]), rtol=1e-4, atol=1e-5)
               for d in range(groups)):
            raise Fail(f"{what} で、勾配の和をそのデバイスの有効な件数で割っています。"
                       "割るのは全デバイスの件数の和 lax.psum(jnp.sum(mask), axis_name) です。")
        raise Fail(f"{what} で、デバイスごとに違うパラメータになったので、勾配がデバイスの間でまとめられていません。"
                   "勾配の和と有効な件数の和を lax.psum で集めてください。")
    one = {"w": w[0], "b": b[0]}
    why = _named_mistake(params, one, xs, ys, masks, HIDDEN_LR)
    if why:
        raise Fail(f"{what} で、{why}")
    right, _, _ = _references(params, xs, ys, masks)
    want = step_with(params, right, HIDDEN_LR)
    hint = "全データの平均損失 Σ mask·loss / Σ mask の勾配で更新します。"
    expect_close(one["w"], want["w"], f"{what} の更新後の 'w'", hint=hint)
    expect_close(one["b"], want["b"], f"{what} の更新後の 'b'", hint=hint)


@exercise("6.2-2", "sgd_step")
def check_sgd_step(fn):
    import jax

    n = n_devices()
    rng = exercise_rng(2)
    params = {"w": f32(rng.normal(size=(D,)) * 0.3), "b": np.float32(0.2)}
    xs, ys, masks = _data(rng, n, _counts(n))
    stepped, got = _call_pmap(fn, params, xs, ys, masks)
    _expect_update(params, got, xs, ys, masks, f"デバイス {n} 個の pmap")
    # デバイスの数に依らない確認: vmap(axis_name=...) でも同じ集団通信が使える（軸の大きさ 3、件数 6・2・5）
    x3, y3, m3 = _data(rng, 3, _counts(3))
    got3 = call(jax.vmap(lambda p, x, y, m: fn(p, x, y, m, _logcosh_losses, HIDDEN_LR, HIDDEN_AXIS),
                         in_axes=(None, 0, 0, 0), axis_name=HIDDEN_AXIS), params, x3, y3, m3)
    _expect_update(params, got3, x3, y3, m3, f"件数 {_counts(3)} の 3 グループの vmap")
    prims = primitives(stepped, params, xs, ys, masks)
    if not prims & PSUM_NAMES:
        extra = "all_gather で全データを集めずに、" if "all_gather" in prims else ""
        raise Fail(f"jaxpr にデバイス間の和（psum）が見つかりません。{extra}"
                   "勾配の和と有効な件数の和は lax.psum(…, axis_name) で集めてください。")
    return f"デバイス {n} 個、有効な件数 {_counts(n)}、別の損失と軸の名前で一致し、psum でまとめています。"
