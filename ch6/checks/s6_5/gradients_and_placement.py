"""6.5 の問 1〜4: サンプルごとの勾配、smap の出力の形、smap の中の grad、device_put の分け方。"""
from __future__ import annotations

import functools

from ...checking import exercise, fmt, n_devices
from .common import Outcome, eval_option, grade, jax_namespace, outcome_of, quiz_mesh, shapes_text

# 6.5-1 -------------------------------------------------------------------------------
# 入力 x についての、サンプルごとの勾配

Q1_OPTIONS = {
    "a": "jax.grad(loss, argnums=1)(params, xs, ys)",
    "b": "jax.vmap(jax.grad(loss, argnums=1), in_axes=(None, 0, 0))(params, xs, ys)",
    "c": "jax.grad(jax.vmap(loss, in_axes=(None, 0, 0)), argnums=1)(params, xs, ys)",
    "d": "jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(params, xs, ys)",
}


def q1_loss(params, x, y):
    """問 1 の 1 サンプル用の損失（問題文と同じ）: x (10,), y スカラー -> スカラー。"""
    import jax.numpy as jnp

    return (jnp.tanh(params["W"] @ x + params["b"]).sum() - y) ** 2


@functools.cache
def q1_outcomes() -> dict[str, Outcome]:
    import jax
    import numpy as np

    rng = np.random.default_rng(65_001)
    params = {"W": rng.normal(size=(3, 10)).astype(np.float32), "b": rng.normal(size=3).astype(np.float32)}
    xs = rng.normal(size=(64, 10)).astype(np.float32)
    ys = rng.normal(size=64).astype(np.float32)
    g1 = jax.jit(jax.grad(q1_loss, argnums=1))
    want = np.stack([np.asarray(g1(params, xs[i], ys[i])) for i in range(len(xs))])
    ns = jax_namespace() | {"loss": q1_loss, "params": params, "xs": xs, "ys": ys}

    def judge(out):
        if not hasattr(out, "shape"):
            return Outcome(False, f"形 {shapes_text(out)} の勾配が返ります")
        if tuple(out.shape) != want.shape:
            return Outcome(False, f"形 {fmt(tuple(out.shape))} が返ります")
        ok = bool(np.allclose(np.asarray(out), want, rtol=1e-4, atol=1e-5))
        return Outcome(ok, "形 (64, 10) の正しい勾配が返ります" if ok else "値の違う形 (64, 10) の配列が返ります")

    return {k: outcome_of(lambda s=s: eval_option(s, ns), judge) for k, s in Q1_OPTIONS.items()}


@exercise("6.5-1", "q1")
def check_q1(fn):
    out = q1_outcomes()
    why = {
        "b": "argnums と、vmap と grad を重ねる順番を見直してください。",
        "a": "loss は 1 サンプル用なので、バッチ xs (64, 10) をそのまま渡すと W (3, 10) との行列積の形が合いません。",
        "c": "vmap(loss) は損失のベクトル (64,) を返しますが、grad が微分できるのはスカラーを返す関数だけです。",
        "d": "grad の argnums の既定は 0 なので、得られるのは x ではなく params についてのサンプルごとの勾配です。",
    }
    return grade(fn, {k for k, o in out.items() if o.ok}, why,
                  "1 サンプルの損失を x について微分し（argnums=1）、その関数を vmap でバッチに広げると、"
                  "形 (64, 10) のサンプルごとの勾配になります。", out)


# 6.5-2 -------------------------------------------------------------------------------
# smap の出力の形（pmap は積み重ね、smap はつなげる）

def _q2_shapes(n: int) -> dict[str, tuple]:
    return {"a": (n, 3), "b": (3 * n,), "c": (3,)}  # "d" は「エラーになる」


@functools.cache
def q2_truth(n: int) -> frozenset:
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = quiz_mesh()
    x2 = jax.device_put(jnp.ones((4 * n, 3)), NamedSharding(mesh, P("data")))
    try:
        with jax.set_mesh(mesh):
            shape = tuple(jax.smap(lambda b: b.sum(axis=0), in_axes=0, out_axes=0, axis_name="data")(x2).shape)
    except Exception:
        return frozenset({"d"})
    return frozenset(k for k, s in _q2_shapes(n).items() if s == shape)


@exercise("6.5-2", "q2")
def check_q2(fn):
    n = n_devices()
    why = {
        "a": "(n_devices, 3) は結果を新しい先頭軸に積み重ねる pmap の形で、smap は out_axes の軸に沿ってつなげます。",
        "c": "(3,) は 1 デバイスの関数が返す形で、smap は各デバイスの結果をつなげるので全体はそれより大きくなります。",
        "d": "smap の関数は次元の数を減らしてもよく、各デバイスの結果 (3,) を out_axes=0 の軸に沿ってつなげるので、エラーにはなりません。",
    }
    return grade(fn, set(q2_truth(n)), why,
                  f"各デバイスの (3,) が 0 軸目に沿って {n} 個つながり、全体は ({3 * n},) です"
                  "（pmap なら積み重なって (n_devices, 3)）。")


# 6.5-3 -------------------------------------------------------------------------------
# smap の中の grad: 複製した引数の勾配は自動で psum される

@functools.cache
def q3_outcomes(n: int) -> dict[str, Outcome]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = quiz_mesh()
    w3 = jnp.array([1.0, -2.0])
    x_np = np.arange(4.0 * n, dtype=np.float32).reshape(2 * n, 2)
    x3 = jax.device_put(x_np, NamedSharding(mesh, P("data")))

    def local_loss(w, x):
        return jnp.mean((x @ w) ** 2)

    per_device = np.stack([np.asarray(jax.grad(local_loss)(w3, x_np[2 * i:2 * i + 2])) for i in range(n)])
    try:
        with jax.set_mesh(mesh):
            got = np.asarray(jax.smap(lambda w, x: jax.grad(local_loss)(w, x), in_axes=(None, 0), out_axes=None,
                                      axis_name="data")(w3, x3))
    except Exception as exc:
        return {"d": Outcome(True, f"{type(exc).__name__} になります")}

    def close(want):
        return bool(np.allclose(got, want, rtol=1e-5))

    return {"a": Outcome(close(per_device[0]), ""), "b": Outcome(close(per_device.sum(0)), ""),
            "c": Outcome(close(per_device.mean(0)), ""), "d": Outcome(False, "")}


@exercise("6.5-3", "q3")
def check_q3(fn):
    out = q3_outcomes(n_devices())
    why = {
        "a": "w は in_axes=None で渡した不変な値なので、その勾配が 1 つのデバイスのデータだけで決まることはありません。",
        "b": "勾配にどんな集団通信が入るかを見直してください。",
        "c": "grad が pmean を入れることはないので、平均にはなりません（不変な入力の勾配に入る集団通信は 6.3c の 5 節）。",
        "d": "勾配の型には {V:data} の印がなく、全デバイスで同じ値だとわかるので、out_axes=None で返せます。",
    }
    return grade(fn, {k for k, o in out.items() if o.ok}, why,
                  "w は複製（不変）の値なので、grad が全デバイスの勾配を自動で psum します。"
                  "pmap の pmean を写すと、更新がデバイスの数の倍になります（6.3c の 5 節）。")


# 6.5-4 -------------------------------------------------------------------------------
# どの device_put が通るか（割り切れる次元だけを分けられる、メッシュ軸は 1 回だけ）

Q4_OPTIONS = {
    "a": 'jax.device_put(x4, NamedSharding(mesh, P("data", None)))',
    "b": 'jax.device_put(x4, NamedSharding(mesh, P(None, "data")))',
    "c": 'jax.device_put(x4, NamedSharding(mesh, P("data", "data")))',
}


@functools.cache
def q4_outcomes(n: int) -> dict[str, Outcome]:
    import jax.numpy as jnp

    ns = jax_namespace() | {"mesh": quiz_mesh(), "x4": jnp.ones((3 * n + 1, 2 * n))}
    out = {k: outcome_of(lambda s=s: eval_option(s, ns), lambda r: Outcome(True, "エラーなく配置できます"))
           for k, s in Q4_OPTIONS.items()}
    out["d"] = Outcome(not any(o.ok for o in out.values()), "")
    return out


@exercise("6.5-4", "q4")
def check_q4(fn):
    out = q4_outcomes(n_devices())
    why = {
        "a": "0 軸目の長さ 3 * n_devices + 1 は data 軸の大きさで割り切れない（2 個以上なら 1 余る）ので、分割できません。",
        "b": "それぞれの次元の長さを、data 軸の大きさで割ってみてください。",
        "c": "1 つのメッシュの軸は PartitionSpec の中で 1 回しか使えないので、2 つの次元を同じ軸で分割することはできません。",
        "d": "エラーにならないものが 1 つあるので、それぞれの次元の長さを data 軸の大きさで割ってみてください。",
    }
    return grade(fn, {k for k, o in out.items() if o.ok}, why,
                  "1 軸目の長さ 2 * n_devices は n_devices で割り切れるので、1 軸目を data で分割できます。", out)
