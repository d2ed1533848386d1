"""6.8a-1 circular_tick: 周回するパイプラインの 1 ティック（最後のステージから最初へ戻す ppermute）。

デバイス d は層 v·S + d（v = 0 … V − 1）を持ち、マイクロバッチ S 個がリングを V 周して L = V·S 層を通ります。
チェックは隠しの軸の名前・V・幅で自前の scan（V·S + S − 1 ティック）を回し、学習者の 1 ティックを呼びます。
"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, LearnerError, call, exercise, expect_close, f32, fmt, is_close, n_devices, walk
from .common import exercise_rng

AXIS = "pp_hidden"  # ノートブックにない軸の名前（"stage" と決め打ちすると動かない）


def reference(w_dev, xs, *, round_rule="local", fresh="first_round", shift=1, wrap=True):
    """NumPy で回す周回パイプライン。返り値はティックごと・デバイスごとの出力 ys[d, t]。

    w_dev[d, v] はデバイス d の v 周目の層。誤りの名前を言うために、規則を変えても回せる:
    round_rule="global"（周回を t // S で決める）、fresh="always"（デバイス 0 が毎回新しい入力を取る）、
    shift=-1（逆向きに送る）、wrap=False（最後のデバイスから最初へ戻さない）。"""
    n, v_count = w_dev.shape[:2]
    ticks = v_count * n + n - 1
    state = np.zeros((n,) + xs.shape[1:])
    ys = np.zeros((n, ticks) + xs.shape[1:])
    for t in range(ticks):
        for d in range(n):
            k = t if round_rule == "global" else t - d
            v = min(max(k // n, 0), v_count - 1)
            take = d == 0 and (t < n or fresh == "always")
            x_in = xs[min(t, n - 1)] if take else state[d]
            ys[d, t] = np.tanh(x_in @ w_dev[d, v])
        new = np.zeros_like(state)
        for d in range(n):
            dst = d + shift
            if wrap:
                new[dst % n] = ys[d, t]
            elif 0 <= dst < n:
                new[dst] = ys[d, t]
        state = new
    return ys


def final_outputs(ys, v_count: int):
    """最後のデバイスが最後の周回で出した値（マイクロバッチの順）。"""
    n = ys.shape[0]
    return np.stack([ys[n - 1, (v_count - 1) * n + m + n - 1] for m in range(n)])


def _driver(fn, mesh, v_count: int, mb: int, width: int):
    """学習者の circular_tick を scan で V·S + S − 1 回呼ぶ関数（shard_map の中）。出力は (S, T, mb, width)。"""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import PartitionSpec as P

    n = mesh.shape[AXIS]
    ticks = v_count * n + n - 1

    def body(w, xs):
        w = w[0]

        def step(state, t):
            out = fn(w, state, xs[jnp.clip(t, 0, n - 1)], t, AXIS)
            if not isinstance(out, (tuple, list)) or len(out) != 2:
                got = f"長さ {len(out)} の {type(out).__name__}" if isinstance(out, (tuple, list)) else type(out).__name__
                raise Fail(f"circular_tick は (次の state, このティックの出力 y) の 2 つ組を返すはずですが、{got} が返りました。")
            new_state, y = out
            for name, a in (("次の state", new_state), ("y", y)):
                if getattr(a, "shape", None) != (mb, width):
                    raise Fail(f"{name}の形は 1 マイクロバッチ分 {fmt((mb, width))} のはずですが、"
                               f"{fmt(tuple(getattr(a, 'shape', ()) or ()))} の {type(a).__name__} が返りました。")
            return new_state, y

        state0 = lax.pcast(jnp.zeros((mb, width), jnp.float32), AXIS, to="varying")
        _, ys = lax.scan(step, state0, jnp.arange(ticks))
        return ys[None]

    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P(AXIS), P()), out_specs=P(AXIS)))


def _perm_text(pairs) -> str:
    pairs = sorted(pairs)
    text = ", ".join(f"{a}→{b}" for a, b in pairs[:5])
    return text + ("…" if len(pairs) > 5 else "") if pairs else "なし"


def _traced_perms(run, w, xs):
    """run(w, xs) をトレースした jaxpr にある ppermute の perm（組の集合）の列。"""
    import jax

    closed = call(jax.make_jaxpr(run), w, xs)
    return [frozenset(tuple(p) for p in e.params["perm"]) for e in walk(closed.jaxpr) if e.primitive.name == "ppermute"]


@exercise("6.8a-1", "circular_tick")
def check_circular_tick(fn):
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    n = n_devices()
    rng = exercise_rng(1)
    v_count, mb, width = 3, 2, 5
    w_dev = f32(rng.normal(size=(n, v_count, width, width)) / np.sqrt(width))
    xs = f32(rng.normal(size=(n, mb, width)))
    mesh = jax.make_mesh((n,), (AXIS,))
    w_put = jax.device_put(w_dev, NamedSharding(mesh, P(AXIS)))
    run = _driver(fn, mesh, v_count, mb, width)

    try:
        perms = _traced_perms(run, w_put, xs)
    except LearnerError as exc:
        if "unbound axis name" in str(exc.exc):
            raise Fail("circular_tick の中で、引数 axis_name 以外の軸の名前を使っています"
                       f"（チェックの軸の名前は「{AXIS}」です）。lax.axis_index・lax.axis_size・lax.ppermute には"
                       " axis_name を渡しましょう。") from None
        raise
    right = frozenset((i, (i + 1) % n) for i in range(n))
    if not perms:
        raise Fail("jaxpr に ppermute が見つかりません。出力 y を lax.ppermute で次のデバイスへ送り、"
                   "それを次の state として返しましょう。")
    for perm in perms:
        if perm == right:
            continue
        if n > 2 and perm == frozenset((i, (i - 1) % n) for i in range(n)):
            raise Fail(f"ppermute の向きが逆です: 期待 {_perm_text(right)}、実際 {_perm_text(perm)}。"
                       "perm の組は (送り元, 送り先) で、デバイス i の出力は i + 1 へ進みます。")
        if perm == frozenset((i, i + 1) for i in range(n - 1)):
            raise Fail(f"最後のデバイスから最初へ戻す組がありません: 期待 {_perm_text(right)}、実際 {_perm_text(perm)}。"
                       f"周回するパイプラインでは、{n - 1}→0 で 1 周目の出力がデバイス 0 の 2 周目の入力になります"
                       "（(i + 1) % n で送り先を決めましょう）。")
        if n > 2 and perm == frozenset((i, (i + 2) % n) for i in range(n)):
            raise Fail(f"ppermute が 2 つ先へ送っています: 期待 {_perm_text(right)}、実際 {_perm_text(perm)}。"
                       "1 ティックで進むのは 1 ステージです。")
        raise Fail(f"ppermute の組が違います: 期待 {_perm_text(right)}、実際 {_perm_text(perm)}。"
                   "デバイス i の出力をデバイス (i + 1) % n へ送ります。")

    got = np.asarray(call(run, w_put, xs), dtype=np.float64)
    want_ys = reference(w_dev, xs)
    want = final_outputs(want_ys, v_count)
    if got.shape != want_ys.shape:  # _driver が形を確かめるので、ここには来ないはず
        raise Fail(f"出力の形が違います: 期待 {fmt(want_ys.shape)}、実際 {fmt(got.shape)}。")
    out = final_outputs(got, v_count)
    if is_close(out, want, rtol=1e-4, atol=1e-5):
        return (f"隠しの {n} デバイス × {v_count} 周（{v_count * n} 層、{v_count * n + n - 1} ティック）で、"
                f"最後の周回の出力が 1 デバイスで全層を通した値と一致し、ppermute の組は {_perm_text(right)} です。")
    variants = [
        ({"round_rule": "global"},
         "周回の番号をティック t だけで決めています。デバイス d がマイクロバッチを受け取るのは d ティック遅れるので、"
         "周回は (t − d) // S です（lax.axis_index で d を得ます）。"),
        ({"fresh": "always"},
         "デバイス 0 がいつも新しいマイクロバッチ x_fresh を取っています。t < S のときだけ新しい入力を取り、"
         "それ以降は最後のデバイスから戻ってきた state を使います。"),
    ]
    for kw, message in variants:
        if is_close(out, final_outputs(reference(w_dev, xs, **kw), v_count), rtol=1e-4, atol=1e-5):
            raise Fail(f"最後の周回の出力が違います（{v_count} 周、{n} デバイス）。{message}")
    v0 = np.zeros_like(w_dev)
    v0[:] = w_dev[:, :1]
    if is_close(out, final_outputs(reference(v0, xs), v_count), rtol=1e-4, atol=1e-5):
        raise Fail(f"どの周回でも w[0] を使っています（{v_count} 周）。v 周目には w[v] を使います。")
    expect_close(out, want, f"最後の周回の出力（{v_count} 周、{n} デバイス）", rtol=1e-4, atol=1e-5,
                 hint="x_in を選ぶ（デバイス 0 で t < S なら x_fresh）→ y = tanh(x_in @ w[v]) → y を (i + 1) % n へ送る、"
                      "の順です。返すのは (次の state, y) です。")
    raise Fail("最後の周回の出力が違います。")  # expect_close が通るなら上で合格している
