"""6.4-3 make_dp_train_step: データ並列の学習ステップ。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, call, exercise, expect_close, f32
from ...meshes import mesh_1d
from .common import exercise_rng, matches

# 6.4-3 -------------------------------------------------------------------------------
# データ並列の学習ステップ: バッチは data 軸で分割、パラメータは複製のまま、コンパイルは 1 回

def _mlp3(params, x):
    import jax.numpy as jnp

    h = jnp.tanh(x @ params["W1"] + params["b1"])
    return h @ params["W2"] + params["b2"]


def _describe_sharding(a) -> str:
    import jax

    sh = getattr(a, "sharding", None)
    if sh is None:
        return type(a).__name__
    spec = getattr(sh, "spec", None)
    return f"{jax.typeof(a)}（{len(sh.device_set)} デバイス{'、spec ' + str(spec) if spec is not None else ''}）"


def _expect_replicated(tree, n, what):
    import jax

    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        name = jax.tree_util.keystr(path)
        if not isinstance(leaf, jax.Array):
            raise Fail(f"{what}{name} が {type(leaf).__name__} です（jax.Array ではありません）。"
                       "NumPy に戻さず、jit した関数の出力をそのまま返しましょう。")
        sh = leaf.sharding
        if len(sh.device_set) != n:
            raise Fail(f"{what}{name} が {len(sh.device_set)} デバイスにしかありません（期待は {n} デバイスすべてに複製）。"
                       "1 つのデバイスに集めたり device_put で移したりしないでください。")
        if not sh.is_fully_replicated:
            raise Fail(f"{what}{name} が分割されています: {_describe_sharding(leaf)}。"
                       "データ並列ではパラメータは全デバイスに複製（P()）のままです。")


_STEP_OUT = ("params", "opt_state", "loss")


def _role(x, params_def, state_def) -> str:
    """学習ステップの返り値の 1 要素が、params・opt_state・loss のどれに見えるか（どれでもなければ型と形）。"""
    import jax

    try:
        tree_def = jax.tree.structure(x)
    except Exception:
        tree_def = None
    if tree_def == params_def:
        return "params"
    if tree_def == state_def:
        return "opt_state"
    shape = getattr(x, "shape", None)
    if shape == () or isinstance(x, (float, int)) and not isinstance(x, bool):
        return "loss"
    return type(x).__name__ + (f"{tuple(shape)}" if shape is not None else "")


def _expect_step_output(out, params_def, state_def):
    """(params, opt_state, loss) の 3 つ組（タプルかリスト）を、使う前に確かめる。"""
    want = "（新しい params, 新しい opt_state, loss）"
    if not isinstance(out, (tuple, list)):
        raise Fail(f"学習ステップは 3 つ組{want}をタプルかリストで返してください。実際は {type(out).__name__} です。")
    if len(out) != 3:
        raise Fail(f"学習ステップは 3 つ組{want}を返してください。実際は {len(out)} 要素です。")
    roles = [_role(x, params_def, state_def) for x in out]
    if tuple(roles) == _STEP_OUT:
        return
    got = "(" + ", ".join(roles) + ")"
    if sorted(roles) == sorted(_STEP_OUT):
        raise Fail(f"学習ステップの返り値の順番が違います: 期待 (params, opt_state, loss)、実際 {got}。")
    raise Fail(f"学習ステップの返り値が 3 つ組{want}になっていません: 実際 {got}"
               "（params と opt_state は入力と同じ構造、loss はスカラーです）。")


_REF3: dict[int, tuple] = {}


@exercise("6.4-3", "make_dp_train_step")
def check_dp_train_step(fn):
    import jax
    import jax.numpy as jnp
    import optax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    n = jax.device_count()
    mesh = mesh_1d("data")
    rng = exercise_rng(3)
    d_in, d_hid, d_out, bsz, steps = 3, 8, 2, 4 * n, 3
    params = {"W1": f32(rng.normal(size=(d_in, d_hid)) * 0.5), "b1": f32(np.zeros(d_hid)),
              "W2": f32(rng.normal(size=(d_hid, d_out)) * 0.5), "b2": f32(np.zeros(d_out))}
    batches = [(f32(rng.normal(size=(bsz, d_in))), f32(rng.normal(size=(bsz, d_out)))) for _ in range(steps)]
    optimizer = optax.adamw(learning_rate=0.05, weight_decay=0.1)  # 更新に params が要る

    now = [0]  # いま何ステップ目の呼び出しの中か（0 は make_dp_train_step の中）
    calls = []  # loss_fn が呼ばれるたびに (ステップ, jit の中か, xs の型)

    def loss_fn(p, xs, ys):
        calls.append((now[0], isinstance(xs, jax.core.Tracer), jax.typeof(xs)))
        return jnp.mean((_mlp3(p, xs) - ys) ** 2)

    # 参照: 1 デバイス（既定のデバイス）で同じ最適化を普通に回す
    def reference(sign):
        @jax.jit
        def ref_step(p, s, xs, ys):
            loss, g = jax.value_and_grad(lambda q: jnp.mean((_mlp3(q, xs) - ys) ** 2))(p)
            u, s = optimizer.update(g, s, p)
            return jax.tree.map(lambda a, b: a + sign * b, p, u), s, loss

        p = jax.device_put(params, jax.devices()[0])
        s = optimizer.init(p)
        losses = []
        for xs, ys in batches:
            p, s, loss = ref_step(p, s, xs, ys)
            losses.append(float(loss))
        return jax.device_get(p), losses

    if n not in _REF3:  # 参照は決定的なので、デバイス数ごとに 1 度だけ計算する
        _REF3[n] = reference(+1)
    want_params, want_losses = _REF3[n]

    with jax.set_mesh(mesh):
        rep = NamedSharding(mesh, P())
        p = jax.device_put(params, rep)
        s = optimizer.init(p)
        params_def, state_def = jax.tree.structure(p), jax.tree.structure(s)
        step = call(fn, loss_fn, optimizer, mesh)
        if not callable(step):
            raise Fail(f"make_dp_train_step は関数（学習ステップ）を返すはずですが、{type(step).__name__} が返りました。")
        losses = []
        for i, (xs, ys) in enumerate(batches, 1):
            now[0] = i
            out = call(step, p, s, xs, ys)
            _expect_step_output(out, params_def, state_def)
            p, s, loss = out
            _expect_replicated(p, n, "出力パラメータ ")
            _expect_replicated(s, n, "オプティマイザの状態 ")
            losses.append(float(np.asarray(loss)))

    if not calls:
        raise Fail("loss_fn が一度も呼ばれていません。jax.value_and_grad(loss_fn) で損失と勾配を求めましょう。")
    traced = sorted({i for i, _, _ in calls})  # loss_fn が呼ばれた（トレースされた）ステップ
    if len(traced) > 1:
        if not all(in_jit for _, in_jit, _ in calls):
            raise Fail(f"{steps} ステップのうち {len(traced)} ステップで loss_fn が jit の外で実行されました。"
                       "更新を jax.jit で包み、その jit した関数を使い回しましょう。")
        if len(traced) < steps:  # 毎回ではない: 入力の型が変わって再コンパイルした
            raise Fail(f"{steps} ステップのうち {len(traced)} ステップで loss_fn がトレースされました（期待は最初の 1 ステップだけ）。"
                       "出力の params や opt_state の形・型・シャーディングが入力と違うと、次のステップで再コンパイルされます。")
        raise Fail(f"{steps} ステップのうち {len(traced)} ステップで loss_fn がトレースされました（期待は最初の 1 ステップだけ）。"
                   "呼ぶたびに jax.jit し直しています。jit した関数は 1 度だけ作って使い回しましょう。")
    xs_type = calls[0][2]
    spec = getattr(getattr(xs_type, "sharding", None), "spec", None)
    if spec is None or len(spec) == 0 or spec[0] != "data":
        raise Fail(f"loss_fn に届いたバッチの型が {xs_type} で、'data' 軸で分割されていません。"
                   "jax.device_put(xs, NamedSharding(mesh, P('data'))) で分割してから jit した関数に渡しましょう。")
    got_params = jax.device_get(p)
    if not all(matches(got_params[k], want_params[k], rtol=1e-3, atol=1e-5) for k in params):
        rev, _ = reference(-1)
        if all(matches(got_params[k], rev[k], rtol=1e-3, atol=1e-5) for k in params):
            raise Fail("更新の向きが逆です（params - updates）。optax の updates は足すもの: "
                       "optax.apply_updates(params, updates) を使いましょう。")
        for k in params:
            expect_close(got_params[k], want_params[k], f"{steps} ステップ後の params['{k}']", rtol=1e-3, atol=1e-5,
                         hint="value_and_grad → optimizer.update(grads, opt_state, params) → optax.apply_updates の順です。")
    expect_close(np.array(losses), np.array(want_losses), "各ステップの loss", rtol=1e-3, atol=1e-5,
                 hint="loss は更新前のパラメータでの損失（value_and_grad の値）を返します。")
    return (f"{n} デバイスで {steps} ステップ: 1 デバイスの結果と一致し、コンパイルは 1 回、"
            "バッチは 'data' で分割、パラメータと状態は複製のままです。")
