"""6.4 組み合わせパターンの演習チェック。

どのチェックも、ノートブックにない形と乱数で作った入力（隠し入力）で学習者の関数を呼びます。
参照は NumPy（6.4-1, 6.4-2, 6.4-4）か、1 デバイスで動かした同じ計算（6.4-3）です。
デバイスが関わるチェック（6.4-3, 6.4-4）は ch6.meshes でデバイスの数からメッシュを作るので、
1 から 8 のどのデバイス数でも動きます（2 のべき乗でなくてもよい）。

学習者が返した値は、使う前に形・型・順番を確かめます（学習者の誤りを「チェッカー内部の問題」にしない）。
"""
from __future__ import annotations

import numpy as np

from .. import explain
from ..checking import Fail, LearnerError, call, exercise, expect_close, expect_no_batch_loop, f32, hidden_rng
from ..meshes import mesh_1d, mesh_2d


def _rng(tag: int) -> np.random.Generator:
    return hidden_rng(64_000 + tag)


def _shape(x):
    shape = getattr(x, "shape", None)
    return tuple(shape) if shape is not None else None


def _matches(got, want, rtol=1e-4, atol=1e-5) -> bool:
    """expect_close（共通の比較）が通るか。誤りの種類を見分けるために使う。"""
    try:
        expect_close(got, want, rtol=rtol, atol=atol)
    except Fail:
        return False
    return True


# 6.4-1 -------------------------------------------------------------------------------
# 1 サンプル用の損失をバッチ平均にする（vmap）。バッチは xs の 1 軸目（列）にある

def _loss1_factory(d: int):
    import jax.numpy as jnp

    def sample_loss(params, x, y):
        """隠しモデル: x (d,), y () の 1 サンプル用。1 サンプルでないものが来たら知らせる。"""
        shape = tuple(getattr(x, "shape", ()))
        if len(shape) != 1:
            raise Fail(f"sample_loss に形 {shape} の x が渡されました（期待は 1 サンプルの形 ({d},)）。"
                       "sample_loss は 1 サンプル用です: vmap で包み、in_axes でバッチの軸を指定しましょう。")
        if shape != (d,):
            raise Fail(f"sample_loss に形 {shape} の x が渡されました（期待は 1 サンプルの特徴 ({d},)）。"
                       "xs の形は (特徴, バッチ) なので、バッチは 1 軸目です: in_axes=(None, 1, 0)。")
        pred = params["v"] @ jnp.tanh(params["W"] @ x + params["b"])
        return (pred - y) ** 2

    return sample_loss


def _loss1_np(params, xs, ys):
    pred = np.tanh(xs.T @ params["W"].T + params["b"]) @ params["v"]  # xs は (d, B)
    return (pred - ys) ** 2  # (B,)


@exercise("6.4-1", "batched_loss")
def check_batched_loss(fn):
    rng = _rng(1)
    d, h, b = 5, 7, 13
    params = {"W": f32(rng.normal(size=(h, d)) * 0.6), "b": f32(rng.normal(size=(h,)) * 0.1),
              "v": f32(rng.normal(size=(h,)))}

    def data(n):
        return f32(rng.normal(size=(d, n))), f32(rng.normal(size=(n,)))  # xs は (特徴, バッチ)

    xs, ys = data(b)
    sample_loss = _loss1_factory(d)
    per_example = _loss1_np(params, xs, ys)
    want = float(per_example.mean())
    try:
        got = call(fn, sample_loss, params, xs, ys)
    except LearnerError as exc:
        text = str(exc.exc)
        if "inconsistent sizes" in text and "argument params" in text:
            raise Fail("vmap が params までバッチ化しようとしています（inconsistent sizes）。"
                       "params は全サンプル共通なので、in_axes の最初は None です。") from None
        if "inconsistent sizes" in text:
            raise Fail(f"vmap の軸の大きさがそろいません（inconsistent sizes）: xs の形は (特徴 {d}, バッチ {b}) で、"
                       "バッチは 1 軸目です。in_axes=(None, 1, 0) としましょう。") from None
        raise
    shape = _shape(got)
    if shape == (b,):
        raise Fail(f"形 ({b},) のサンプルごとの損失が返りました。期待はスカラー（平均）です。"
                   "最後に jnp.mean で平均を取りましょう。")
    if shape == () and _matches(got, per_example.sum(), rtol=1e-4, atol=1e-4):
        raise Fail(f"合計 {float(np.asarray(got)):.4g} が返りました。期待は平均 {want:.4g} です。"
                   "jnp.sum ではなく jnp.mean を使いましょう。")
    expect_close(got, np.float64(want), "batched_loss の値", rtol=1e-4, atol=1e-5,
                 hint="xs の 1 軸目がバッチです。各サンプルの損失を vmap で求め、jnp.mean で平均します。")
    expect_no_batch_loop(fn, lambda n: (sample_loss, params, *data(n)))
    return (f"隠し入力（特徴 {d} × {b} サンプル、隠れ層 {h}）で平均損失が一致し、"
            "jaxpr はバッチサイズに依存しません。")


# 6.4-2 -------------------------------------------------------------------------------
# サンプルごとの勾配をサンプルごとにクリップして平均する（DP-SGD の中心）。
# 1 サンプルは辞書 {"x", "y"}、params は入れ子の辞書

def _loss2(params, example):
    import jax.numpy as jnp

    x, y = example["x"], example["y"]
    if getattr(x, "ndim", 1) != 1:
        raise Fail(f"sample_loss に形 {tuple(x.shape)} の x（バッチのまま）が渡されました。"
                   "sample_loss は 1 サンプル用です: jax.vmap(jax.grad(sample_loss), in_axes=(None, 0)) で包みましょう。")
    t = jnp.tanh(params["enc"]["W"] @ x + params["enc"]["b"])
    return jnp.sum((params["out"] * t - y) ** 2)


def _grads2_np(params, xs, ys):
    W, b, out = (np.asarray(a, np.float64) for a in (params["enc"]["W"], params["enc"]["b"], params["out"]))
    t = np.tanh(xs @ W.T + b)  # (B, h)
    r = out * t - ys
    dz = 2 * r * out * (1 - t ** 2)
    return {"enc": {"W": dz[:, :, None] * xs[:, None, :], "b": dz}, "out": 2 * r * t}


def _tmap(f, *trees):
    import jax

    return jax.tree.map(f, *trees)


def _tree_norms(g):
    import jax

    return np.sqrt(sum((v.reshape(len(v), -1) ** 2).sum(1) for v in jax.tree.leaves(g)))


def _scale(g, s):
    return _tmap(lambda v: v * s.reshape((-1,) + (1,) * (v.ndim - 1)), g)


def _mean(g):
    return _tmap(lambda v: v.mean(0), g)


@exercise("6.4-2", "clipped_mean_grad")
def check_clipped_mean_grad(fn):
    import jax

    rng = _rng(2)
    d, h, b = 5, 4, 12
    params = {"enc": {"W": f32(rng.normal(size=(h, d)) * 0.7), "b": f32(rng.normal(size=(h,)) * 0.2)},
              "out": f32(1.0 + 0.3 * rng.normal(size=(h,)))}

    def batch(n):
        return {"x": f32(rng.normal(size=(n, d))), "y": f32(rng.normal(size=(n, h)))}

    data = batch(b)
    g = _grads2_np(params, data["x"], data["y"])
    norms = _tree_norms(g)
    max_norm = float(np.median(norms))  # 半分ほどのサンプルがクリップされる
    want = _mean(_scale(g, np.minimum(1.0, max_norm / norms)))
    got = call(fn, _loss2, params, data, max_norm)

    structure = jax.tree.structure(params)
    if jax.tree.structure(got) != structure:
        raise Fail(f"返り値の pytree の構造が params と違います（期待 {structure}、実際 {jax.tree.structure(got)}）。"
                   "勾配は params と同じ入れ子の辞書で返しましょう。")
    names = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(params)]
    for name, leaf, ref in zip(names, jax.tree.leaves(got), jax.tree.leaves(params)):
        if _shape(leaf) == (b,) + ref.shape:
            raise Fail(f"葉 {name} の形が {(b,) + ref.shape} で、サンプルごとの勾配のままです。"
                       "クリップした後、バッチ軸（0 軸）で平均しましょう。")
        if _shape(leaf) != ref.shape:
            raise Fail(f"葉 {name} の形が違います: 期待 {ref.shape}、実際 {_shape(leaf)}。")

    def same(cand):
        return all(_matches(a, c, rtol=1e-3, atol=1e-5) for a, c in zip(jax.tree.leaves(got), jax.tree.leaves(cand)))

    if not same(want):
        mean_g = _mean(g)
        mean_norm = float(np.sqrt(sum((v ** 2).sum() for v in jax.tree.leaves(mean_g))))
        per_leaf = _mean(_tmap(lambda v: v * np.minimum(1.0, max_norm / np.sqrt((v.reshape(b, -1) ** 2).sum(1))).reshape(
            (-1,) + (1,) * (v.ndim - 1)), g))
        if same(mean_g):
            raise Fail("サンプルごとにクリップされていません（クリップなしの平均勾配と同じ値です）。平均の前に、"
                       "サンプルごとの全体ノルム ‖g_i‖ を求めて min(1, max_norm/‖g_i‖) を掛けましょう。")
        if same(_tmap(lambda v: v * min(1.0, max_norm / mean_norm), mean_g)):
            raise Fail("平均をとってからクリップしています。DP-SGD では平均の前に、サンプルごとにクリップします。")
        if same(_tmap(lambda v: v * b, want)):
            raise Fail(f"値が期待のちょうど {b} 倍（バッチサイズ倍）です: 合計になっています。バッチ軸で平均しましょう。")
        if same(per_leaf):
            raise Fail("葉ごとに別々のノルムでクリップしています。ノルムは 1 サンプルの勾配全体（すべての葉をまとめた）で 1 つです。")
        if same(_mean(_scale(g, max_norm / norms))):
            raise Fail("すべてのサンプルをノルム max_norm にそろえています。小さい勾配は縮めも伸ばしもせず、"
                       "倍率は min(1, max_norm/‖g_i‖) です。")
        for name, leaf, ref in zip(names, jax.tree.leaves(got), jax.tree.leaves(want)):
            expect_close(leaf, ref, f"葉 {name} ", rtol=1e-3, atol=1e-5,
                         hint="vmap(grad(sample_loss), in_axes=(None, 0)) → サンプルごとの全体ノルム → 倍率 → 平均 の順です。")
    expect_no_batch_loop(fn, lambda n: (_loss2, params, batch(n), max_norm))
    n_clipped = int((norms > max_norm).sum())
    return f"隠し入力 {b} サンプル（うち {n_clipped} 件がクリップ対象、葉 3 つの入れ子）で一致し、jaxpr はバッチサイズに依存しません。"


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
    from jax.sharding import NamedSharding, PartitionSpec as P

    n = jax.device_count()
    mesh = mesh_1d("data")
    rng = _rng(3)
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
    if not all(_matches(got_params[k], want_params[k], rtol=1e-3, atol=1e-5) for k in params):
        rev, _ = reference(-1)
        if all(_matches(got_params[k], rev[k], rtol=1e-3, atol=1e-5) for k in params):
            raise Fail("更新の向きが逆です（params - updates）。optax の updates は足すもの: "
                       "optax.apply_updates(params, updates) を使いましょう。")
        for k in params:
            expect_close(got_params[k], want_params[k], f"{steps} ステップ後の params['{k}']", rtol=1e-3, atol=1e-5,
                         hint="value_and_grad → optimizer.update(grads, opt_state, params) → optax.apply_updates の順です。")
    expect_close(np.array(losses), np.array(want_losses), "各ステップの loss", rtol=1e-3, atol=1e-5,
                 hint="loss は更新前のパラメータでの損失（value_and_grad の値）を返します。")
    return (f"{n} デバイスで {steps} ステップ: 1 デバイスの結果と一致し、コンパイルは 1 回、"
            "バッチは 'data' で分割、パラメータと状態は複製のままです。")


# 6.4-4 -------------------------------------------------------------------------------
# FSDP 風にパラメータを分割: 割り切れる軸のうちいちばん長い軸（同じ長さなら前の軸）を 'data' で分割

def _fsdp_tree(rng, k):
    """data 軸の大きさ k から形を決めた隠しの pytree。どの k でも、割り切れる軸のうち
    「最初」「最後」「いちばん長い」が別々の軸になる葉（qkv）、同じ長さの軸が並ぶ葉（square）、
    1 次元の葉、割り切れない葉、Adam の状態のような整数のスカラーを入れる。"""
    return {
        "embed": f32(rng.normal(size=(3 * k, 5))),
        "attn": {"qkv": f32(rng.normal(size=(2 * k, 5 * k, 3 * k))),
                 "out": f32(rng.normal(size=(k + 1, 3 * k, 2 * k)))},
        "square": f32(rng.normal(size=(4 * k, 4 * k))),
        "dense": {"W": f32(rng.normal(size=(7, 2 * k))), "b": f32(rng.normal(size=(2 * k,)))},
        "head": {"W": f32(rng.normal(size=(5, 3))), "b": f32(rng.normal(size=(k + 1,)))},
        "count": np.asarray(7, dtype=np.int32),
    }


def fsdp_axis(shape, k):
    """規則: 長さが k で割り切れる軸のうち、いちばん長い軸（同じ長さなら前の軸）。なければ None。"""
    divisible = [i for i, s in enumerate(shape) if s % k == 0]
    return max(divisible, key=lambda i: (shape[i], -i)) if divisible else None


def _first_axis(shape, k):
    return next((i for i, s in enumerate(shape) if s % k == 0), None)


def _last_axis(shape, k):
    divisible = [i for i, s in enumerate(shape) if s % k == 0]
    return divisible[-1] if divisible else None


def _longest_last_axis(shape, k):
    divisible = [i for i, s in enumerate(shape) if s % k == 0]
    return max(divisible, key=lambda i: (shape[i], i)) if divisible else None


def _entries(spec, ndim):
    """PartitionSpec を、軸ごとのメッシュ軸名のタプルの列にそろえる（末尾の None、1 つだけのタプルを正規化）。"""
    items = list(spec) + [None] * (ndim - len(spec))
    return tuple(() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in items)


def _spec_of(axis, ndim):
    from jax.sharding import PartitionSpec as P

    return P() if axis is None else P(*[None] * axis, "data")


def _check_fsdp_on(fn, mesh, tree, label):
    import jax
    from jax.sharding import NamedSharding

    k = mesh.shape["data"]
    n_mesh = mesh.devices.size
    try:
        got = call(fn, tree, mesh)
    except LearnerError as exc:
        if "implies that array axis" not in str(exc.exc):
            raise
        raise Fail(f"{label}: 割り切れない軸を 'data' で分割しようとしてエラーになりました"
                   f"（{explain.explain(exc.exc)}）。割り切れるかは jax.device_count() ではなく、"
                   f"mesh.shape['data'] = {k} で調べます。") from None
    if jax.tree.structure(got) != jax.tree.structure(tree):
        raise Fail(f"{label}: 返り値の pytree の構造が入力と違います。jax.tree.map で葉ごとに配置しましょう。")
    mesh_devices = set(mesh.devices.flat)
    total_in = total_out = 0
    for (path, leaf), want in zip(jax.tree_util.tree_leaves_with_path(got), jax.tree.leaves(tree)):
        name = jax.tree_util.keystr(path)
        if not isinstance(leaf, jax.Array):
            raise Fail(f"{label}: 葉 {name} が {type(leaf).__name__} です。jax.device_put で jax.Array にしましょう。")
        if leaf.dtype != want.dtype:
            raise Fail(f"{label}: 葉 {name} の dtype が {want.dtype} から {leaf.dtype} に変わりました。値はそのまま置きましょう。")
        if leaf.shape != want.shape or not np.array_equal(np.asarray(leaf), want):
            raise Fail(f"{label}: 葉 {name} の値が変わっています。配置を変えるだけで、値は変えません。")
        sh = leaf.sharding
        if set(sh.device_set) != mesh_devices:
            raise Fail(f"{label}: 葉 {name} が {len(sh.device_set)} デバイスにあります"
                       f"（期待はメッシュの {n_mesh} デバイス）。NamedSharding(mesh, spec) を使いましょう。")
        if not (isinstance(sh, NamedSharding) and tuple(sh.mesh.axis_names) == tuple(mesh.axis_names)
                and np.array_equal(sh.mesh.device_ids, mesh.device_ids)):
            raise Fail(f"{label}: 葉 {name} が、渡された mesh の NamedSharding で置かれていません"
                       f"（{type(sh).__name__}）。jax.device_put(a, NamedSharding(mesh, spec)) を使いましょう。")
        shape = want.shape
        axis = fsdp_axis(shape, k)
        want_spec = _spec_of(axis, len(shape))
        total_in += want.nbytes
        total_out += int(np.prod(sh.shard_shape(leaf.shape))) * leaf.dtype.itemsize
        got_entries = _entries(sh.spec, len(shape))
        if got_entries == _entries(want_spec, len(shape)):
            continue
        seen = f"（spec {sh.spec}、期待 {want_spec}）"
        others = sorted({a for e in got_entries for a in e} - {"data"})
        if others:
            raise Fail(f"{label}: 葉 {name}（形 {shape}）を {', '.join(others)} 軸でも分割しています{seen}。"
                       "'data' 軸だけで分割し、ほかの軸（model など）は使いません。")
        split = [i for i, e in enumerate(got_entries) if "data" in e]
        if split and split[0] == (fsdp_axis(shape, n_mesh) if n_mesh != k else None):
            hint = (f"割り切れるかは jax.device_count() や全デバイス数 {n_mesh} ではなく、"
                    f"mesh.shape['data'] = {k} で調べます。")
        elif not split:
            if axis is None:  # ここには来ない（期待も複製なら spec は一致している）
                hint = ""
            elif fsdp_axis(shape, n_mesh) is None and n_mesh != k:
                hint = (f"割り切れるかは jax.device_count() や全デバイス数 {n_mesh} ではなく、"
                        f"mesh.shape['data'] = {k} で調べます。")
            elif len(shape) == 1:
                hint = "1 次元の葉（バイアスなど）も分割の対象です。"
            else:
                hint = f"{axis} 軸（長さ {shape[axis]}）が {k} で割り切れます。"
            raise Fail(f"{label}: 葉 {name}（形 {shape}）が 'data' 軸で分割されていません{seen}。{hint}")
        else:
            j = split[0]
            if axis is None:
                hint = f"どの軸も {k} で割り切れないので、複製（P()）にします。"
            elif j == _longest_last_axis(shape, k):
                hint = "いちばん長い軸が複数あるときは、前の軸を選びます。"
            elif j == _first_axis(shape, k):
                hint = "割り切れる最初の軸ではなく、割り切れる軸のうちいちばん長い軸を選びます。"
            elif j == _last_axis(shape, k):
                hint = "割り切れる最後の軸ではなく、割り切れる軸のうちいちばん長い軸を選びます。"
            else:
                hint = "割り切れる軸のうちいちばん長い軸（同じ長さなら前の軸）を選びます。"
            raise Fail(f"{label}: 葉 {name}（形 {shape}）: 'data' で分割したのは {j} 軸（長さ {shape[j]}）ですが、"
                       f"規則では {'複製' if axis is None else f'{axis} 軸（長さ {shape[axis]}）'}です{seen}。{hint}")
        raise Fail(f"{label}: 葉 {name}（形 {shape}）の分割が規則と違います{seen}。{hint}")
    return total_in, total_out


@exercise("6.4-4", "fsdp_shard")
def check_fsdp_shard(fn):
    import jax

    n = jax.device_count()
    rng = _rng(4)
    mesh1 = mesh_1d("data")
    t_in, t_out = _check_fsdp_on(fn, mesh1, _fsdp_tree(rng, n), f"1 次元メッシュ（data={n}）")
    mesh2 = mesh_2d(("data", "model"))  # 偶数なら (n/2, 2)、奇数なら (n, 1)
    k, n_model = mesh2.shape["data"], mesh2.shape["model"]
    _check_fsdp_on(fn, mesh2, _fsdp_tree(rng, k), f"2 次元メッシュ（data={k}, model={n_model}）")
    if n % 2 == 1 and n > 1:  # 奇数: 2 次元メッシュの data は全デバイス数と同じなので、一部のデバイスのメッシュも使う
        sub = jax.make_mesh((n - 1,), ("data",), devices=jax.devices()[: n - 1])
        _check_fsdp_on(fn, sub, _fsdp_tree(rng, n - 1), f"{n - 1} デバイスのメッシュ（data={n - 1}）")
    return (f"{n} デバイス: 隠しの pytree（全体 {t_in:,} バイト）が 1 デバイスあたり {t_out:,} バイトになりました。"
            "どのメッシュでも、各葉は割り切れる軸のうちいちばん長い軸を 'data' 軸だけで分割しています。")
