"""6.4-3 make_dp_train_step: 1 回の呼び出しで K ステップ進むデータ並列の学習ループ（jit の中の lax.scan）。

バッチは (K, B, ...) の形で届き、分割するのはバッチの軸（1 軸目）: P(None, 'data')。パラメータと最適化器の状態は
複製のまま scan の carry で運び、各ステップの損失を形 (K,) で返す（講義の 1 ステップの先の一歩）。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, LearnerError, call, counting_compiles, exercise, expect_close, f32, traced_eqns
from ...meshes import mesh_1d
from .common import exercise_rng, matches

# 6.4-3 -------------------------------------------------------------------------------
# データ並列の学習ループ: バッチは data 軸で分割、パラメータは複製のまま、コンパイルは 1 回、K ステップは scan で
K_STEPS = 7  # 1 回の呼び出しのステップ数（2〜8 のどのデバイス数でも割り切れない: ステップの軸を分割する誤りが見える）

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
    return f"{jax.typeof(a)}（デバイス {len(sh.device_set)} 個{'、spec ' + str(spec) if spec is not None else ''}）"


def _expect_replicated(tree, n, what):
    import jax

    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        name = jax.tree_util.keystr(path)
        if not isinstance(leaf, jax.Array):
            raise Fail(f"{what}{name} が {type(leaf).__name__} で、jax.Array ではありません。jit した関数の出力をそのまま返してください。")
        sh = leaf.sharding
        if len(sh.device_set) != n:
            raise Fail(f"{what}{name} はデバイス {n} 個すべてに複製のはずが、{len(sh.device_set)} 個にしかありません。"
                       "1 つのデバイスに集めないようにしてください。")
        if not sh.is_fully_replicated:
            raise Fail(f"{what}{name} が分割されています: {_describe_sharding(leaf)}。データ並列ではパラメータは複製（P()）のままです。")


_STEP_OUT = ("params", "opt_state", "losses")


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
    if shape == (K_STEPS,):
        return "losses"
    if shape == () or isinstance(x, (float, int)) and not isinstance(x, bool):
        return "loss()"
    return type(x).__name__ + (f"{tuple(shape)}" if shape is not None else "")


def _expect_step_output(out, params_def, state_def):
    """(params, opt_state, loss) の 3 つ組（タプルかリスト）を、使う前に確かめる。"""
    want = "（新しい params, 新しい opt_state, losses）"
    if not isinstance(out, (tuple, list)):
        raise Fail(f"学習ステップの戻り値は 3 つ組{want}のはずが、{type(out).__name__} でした。")
    if len(out) != 3:
        raise Fail(f"学習ステップの戻り値は 3 つ組{want}のはずが、{len(out)} 要素でした。")
    roles = [_role(x, params_def, state_def) for x in out]
    if tuple(roles) == _STEP_OUT:
        return
    if tuple(roles) == ("params", "opt_state", "loss()"):
        raise Fail(f"3 つ目は各ステップの損失を並べた形 ({K_STEPS},) のはずが、形 () のスカラーでした。"
                   "lax.scan の 2 つ目の戻り値に各ステップの loss を出してください。")
    got = "(" + ", ".join(roles) + ")"
    if sorted(roles) == sorted(_STEP_OUT):
        raise Fail(f"学習ステップの戻り値の順番は (params, opt_state, losses) のはずが、{got} でした。")
    raise Fail(f"学習ステップの戻り値が 3 つ組{want}ではなく、{got} でした。"
               f"params と opt_state は入力と同じ構造、losses は形 ({K_STEPS},) です。")


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
    d_in, d_hid, d_out, bsz, steps = 3, 8, 2, 4 * n, 3  # steps 回呼び、1 回で K_STEPS ステップ
    params = {"W1": f32(rng.normal(size=(d_in, d_hid)) * 0.5), "b1": f32(np.zeros(d_hid)),
              "W2": f32(rng.normal(size=(d_hid, d_out)) * 0.5), "b2": f32(np.zeros(d_out))}
    batches = [(f32(rng.normal(size=(K_STEPS, bsz, d_in))), f32(rng.normal(size=(K_STEPS, bsz, d_out))))
               for _ in range(steps)]
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
        for xk, yk in batches:
            for xs, ys in zip(xk, yk):
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
            raise Fail(f"make_dp_train_step の戻り値は関数（学習ステップ）のはずが、{type(step).__name__} でした。")
        losses, recompiles = [], 0
        for i, (xs, ys) in enumerate(batches, 1):
            now[0] = i
            with counting_compiles() as compiles:  # トレースせずにコンパイルだけし直すこともある
                out = _call_step(step, p, s, xs, ys)
                jax.block_until_ready(out)
            recompiles += compiles[0] if i > 1 else 0
            _expect_step_output(out, params_def, state_def)
            p, s, loss = out
            _expect_replicated(p, n, "出力パラメータ ")
            _expect_replicated(s, n, "最適化器の状態 ")
            losses.extend(float(v) for v in np.asarray(loss))
        now[0] = -1  # 構造を見るためのトレース（下の数え方には入れない）
        scans = _scan_lengths(step, p, s, *batches[0])
        calls[:] = [c for c in calls if c[0] >= 0]

    if not calls:
        raise Fail("loss_fn が一度も呼ばれていません。jax.value_and_grad(loss_fn) で損失と勾配を求めてください。")
    first = sum(1 for i, _, _ in calls if i == 1)
    if K_STEPS > 2 and first >= K_STEPS and all(in_jit for _, in_jit, _ in calls):
        raise Fail(f"1 回の呼び出しで loss_fn が {first} 回トレースされたので、{K_STEPS} ステップが Python のループで"
                   "書き下されています。lax.scan で 1 ステップ分の関数を回してください。")
    traced = sorted({i for i, _, _ in calls})  # loss_fn が呼ばれた（トレースされた）呼び出し
    if len(traced) > 1:
        if not all(in_jit for _, in_jit, _ in calls):
            raise Fail(f"{steps} 回の呼び出しのうち {len(traced)} 回で loss_fn が jit の外で実行されました。"
                       "更新を jax.jit で包み、使い回してください。")
        if len(traced) < steps:  # 毎回ではない: 入力の型が変わって再コンパイルした
            raise Fail(f"トレースは最初の 1 回だけのはずが、{steps} 回の呼び出しのうち {len(traced)} 回でした。"
                       "出力の params や opt_state の型やシャーディングが入力と違うと、次の呼び出しでトレースし直します。")
        raise Fail(f"呼ぶたびにトレースされたので、jit がないか、呼ぶたびに jax.jit を作り直しています（{steps} 回中 {len(traced)} 回）。"
                   "jit した関数は make_dp_train_step の中で 1 度だけ作ってください。")
    if recompiles:
        raise Fail(f"loss_fn のトレースは 1 回ですが、2 回目以降の呼び出しで XLA が {recompiles} 回コンパイルし直しました。"
                   "呼ぶたびに lower(...).compile() などを実行せず、jit した関数を 1 度だけ作って使い回してください。")
    if scans is not None and K_STEPS not in scans:
        raise Fail(f"1 回の呼び出しの jaxpr に長さ {K_STEPS} の scan がないので、Python のループで jit した関数を何度も"
                   f"呼んでいます。jit の中で lax.scan を使い、{K_STEPS} ステップを 1 つのプログラムで回してください。")
    xs_type = calls[0][2]
    spec = getattr(getattr(xs_type, "sharding", None), "spec", None)
    if spec is None or len(spec) == 0 or spec[0] != "data":
        raise Fail(f"loss_fn に届いたバッチの型が {xs_type} で、バッチの軸が 'data' 軸で分割されていません。"
                   "xs は (ステップ, バッチ, 特徴) なので、P(None, 'data') で配置してから渡してください。")
    got_params = jax.device_get(p)
    if not all(matches(got_params[k], want_params[k], rtol=1e-3, atol=1e-5) for k in params):
        rev, _ = reference(-1)
        if all(matches(got_params[k], rev[k], rtol=1e-3, atol=1e-5) for k in params):
            raise Fail("更新が params - updates で、向きが逆です。optax の updates は足すものなので optax.apply_updates を使ってください。")
        for k in params:
            expect_close(got_params[k], want_params[k], f"{steps * K_STEPS} ステップ後の params['{k}']", rtol=1e-3, atol=1e-5,
                         )
    expect_close(np.array(losses), np.array(want_losses), "各ステップの loss", rtol=1e-3, atol=1e-5,
                 hint="losses の k 番目は、k 番目のステップの更新前の損失です。")
    return f"{steps} 回 × {K_STEPS} ステップが 1 ステップずつの結果と一致し、コンパイルは 1 回、ステップは scan で回ります。"


def _scan_lengths(step, *args) -> list[int] | None:
    """step(*args) をトレースした jaxpr にある scan の長さ（トレースできなければ None: 実行はできたので判定しない）。"""
    try:
        eqns = traced_eqns(lambda *a: step(*a), *args)
    except (LearnerError, Fail):
        return None
    return [e.params.get("length") for e in eqns if e.primitive.name == "scan"]


def _call_step(step, *args):
    """学習者の train_step を呼ぶ。ステップの軸（0 軸）を分割しようとして割り切れないエラーには、どの軸かを言う。"""
    try:
        return call(step, *args)
    except LearnerError as err:
        text = str(err.exc)
        if "axis 0 is partitioned" in text or (f"{K_STEPS}" in text and "divisible" in text):
            raise Fail(f"xs の 0 軸（ステップの軸、長さ {K_STEPS}）を 'data' で分割しようとして、割り切れずにエラーになりました。"
                       "分割するのはバッチの軸（1 軸目）なので P(None, 'data') です。") from None
        if "dimension of all xs should be replicated" in text:
            raise Fail("xs の 0 軸（ステップの軸）を 'data' で分割したので、その軸を回す scan がエラーにしました。"
                       "分割するのはバッチの軸（1 軸目）なので P(None, 'data') です。") from None
        raise
