"""6.4 組み合わせパターンの演習チェック。

どのチェックも、ノートブックにない形と乱数で作った入力（隠し入力）で学習者の関数を呼びます。
参照は NumPy（6.4-1, 6.4-2）か、1 デバイスで動かした同じ計算（6.4-3）です。
デバイスが関わるチェック（6.4-3, 6.4-4）は ch6.meshes でデバイスの数からメッシュを作るので、
1 から 8 のどのデバイス数でも動きます（2 のべき乗でなくてもよい）。
"""
from __future__ import annotations

import numpy as np

from .._core import Fail, LearnerError, call, exercise, expect_close, expect_no_batch_loop
from .._core import f32 as _f32, hidden_rng
from ..meshes import mesh_1d, mesh_2d


def _rng(tag: int) -> np.random.Generator:
    return hidden_rng(64_000 + tag)



def _shape(x):
    shape = getattr(x, "shape", None)
    return tuple(shape) if shape is not None else None


def _close(got, want, rtol=1e-4, atol=1e-5) -> bool:
    try:
        g = np.asarray(got, dtype=np.float64)
    except Exception:
        return False
    return g.shape == np.shape(want) and bool(np.allclose(g, want, rtol=rtol, atol=atol))


# 6.4-1 -------------------------------------------------------------------------------
# 1 サンプル用の損失をバッチ平均にする（vmap）

def _loss1_factory():
    import jax.numpy as jnp

    def sample_loss(params, x, y):
        """隠しモデル: x (d,), y () の 1 サンプル用。バッチがそのまま来たら知らせる。"""
        if getattr(x, "ndim", 1) != 1:
            raise Fail(f"sample_loss に形 {tuple(x.shape)} のバッチがそのまま渡されました。"
                       "sample_loss は 1 サンプル用です: jax.vmap(sample_loss, in_axes=(None, 0, 0)) で包みましょう。")
        pred = params["v"] @ jnp.tanh(params["W"] @ x + params["b"])
        return (pred - y) ** 2

    return sample_loss


def _loss1_np(params, xs, ys):
    pred = np.tanh(xs @ params["W"].T + params["b"]) @ params["v"]
    return (pred - ys) ** 2  # (B,)


@exercise("6.4-1", "batched_loss")
def check_batched_loss(fn):
    rng = _rng(1)
    d, h, b = 5, 7, 13
    params = {"W": _f32(rng.normal(size=(h, d)) * 0.6), "b": _f32(rng.normal(size=(h,)) * 0.1),
              "v": _f32(rng.normal(size=(h,)))}

    def data(n):
        return _f32(rng.normal(size=(n, d))), _f32(rng.normal(size=(n,)))

    xs, ys = data(b)
    sample_loss = _loss1_factory()
    per_example = _loss1_np(params, xs, ys)
    want = float(per_example.mean())
    try:
        got = call(fn, sample_loss, params, xs, ys)
    except LearnerError as exc:
        if "inconsistent sizes" in str(exc.exc):
            raise Fail("vmap が params まで 0 軸でバッチ化しようとしています（inconsistent sizes）。"
                       "params は全サンプル共通なので in_axes=(None, 0, 0) です。") from None
        raise
    shape = _shape(got)
    if shape == (b,):
        raise Fail(f"形 ({b},) のサンプルごとの損失が返りました。期待はスカラー（平均）です。"
                   "最後に jnp.mean で平均を取りましょう。")
    if shape == () and _close(got, per_example.sum(), rtol=1e-4, atol=1e-4):
        raise Fail(f"合計 {float(np.asarray(got)):.4g} が返りました。期待は平均 {want:.4g} です。"
                   "jnp.sum ではなく jnp.mean を使いましょう。")
    expect_close(got, np.float64(want), "batched_loss の値", rtol=1e-4, atol=1e-5,
                 hint="各サンプルの損失を vmap で求め、jnp.mean で平均します。")
    expect_no_batch_loop(fn, lambda n: (sample_loss, params, *data(n)))
    return f"隠し入力（{b} サンプル、隠れ層 {h}）で平均損失が一致し、jaxpr はバッチサイズに依存しません。"


# 6.4-2 -------------------------------------------------------------------------------
# サンプルごとの勾配をサンプルごとにクリップして平均する（DP-SGD の中心）

def _loss2(params, x, y):
    import jax.numpy as jnp

    return jnp.sum((jnp.tanh(params["W"] @ x + params["b"]) - y) ** 2)


def _grads2_np(params, xs, ys):
    W, b = np.asarray(params["W"], np.float64), np.asarray(params["b"], np.float64)
    t = np.tanh(xs @ W.T + b)
    dz = 2 * (t - ys) * (1 - t ** 2)  # (B, h)
    return {"W": dz[:, :, None] * xs[:, None, :], "b": dz}


def _tree_norms(g):
    return np.sqrt(sum((v.reshape(len(v), -1) ** 2).sum(1) for v in g.values()))


def _scale(g, s):
    return {k: v * s.reshape((-1,) + (1,) * (v.ndim - 1)) for k, v in g.items()}


def _mean(g):
    return {k: v.mean(0) for k, v in g.items()}


@exercise("6.4-2", "clipped_mean_grad")
def check_clipped_mean_grad(fn):
    import jax

    rng = _rng(2)
    d, h, b = 5, 4, 12
    params = {"W": _f32(rng.normal(size=(h, d)) * 0.7), "b": _f32(rng.normal(size=(h,)) * 0.2)}

    def data(n):
        return _f32(rng.normal(size=(n, d))), _f32(rng.normal(size=(n, h)))

    xs, ys = data(b)
    g = _grads2_np(params, xs, ys)
    norms = _tree_norms(g)
    max_norm = float(np.median(norms))  # 半分ほどのサンプルがクリップされる
    want = _mean(_scale(g, np.minimum(1.0, max_norm / norms)))
    got = call(fn, _loss2, params, xs, ys, max_norm)

    if jax.tree.structure(got) != jax.tree.structure(params):
        raise Fail(f"返り値の pytree の構造が params と違います（期待 {jax.tree.structure(params)}）。"
                   "勾配は params と同じ辞書 {'W': …, 'b': …} で返しましょう。")
    for k in params:
        if _shape(got[k]) == (b,) + params[k].shape:
            raise Fail(f"葉 '{k}' の形が {(b,) + params[k].shape} で、サンプルごとの勾配のままです。"
                       "クリップした後、バッチ軸（0 軸）で平均しましょう。")

    def same(cand):
        return all(_close(got[k], cand[k], rtol=1e-3, atol=1e-5) for k in params)

    if not same(want):
        mean_g = _mean(g)
        mean_norm = float(np.sqrt(sum((v ** 2).sum() for v in mean_g.values())))
        per_leaf = _mean({k: v * np.minimum(1.0, max_norm / np.sqrt((v.reshape(b, -1) ** 2).sum(1))).reshape(
            (-1,) + (1,) * (v.ndim - 1)) for k, v in g.items()})
        if same(mean_g):
            raise Fail("サンプルごとにクリップされていません（クリップなしの平均勾配と同じ値です）。平均の前に、"
                       "サンプルごとの全体ノルム ‖g_i‖ を求めて min(1, max_norm/‖g_i‖) を掛けましょう。")
        if same({k: v * min(1.0, max_norm / mean_norm) for k, v in mean_g.items()}):
            raise Fail("平均をとってからクリップしています。DP-SGD では平均の前に、サンプルごとにクリップします。")
        if same({k: v * b for k, v in want.items()}):
            raise Fail(f"値が期待のちょうど {b} 倍（バッチサイズ倍）です: 合計になっています。バッチ軸で平均しましょう。")
        if same(per_leaf):
            raise Fail("葉ごとに別々のノルムでクリップしています。ノルムは 1 サンプルの勾配全体（W と b をまとめた）で 1 つです。")
        if same(_mean(_scale(g, max_norm / norms))):
            raise Fail("すべてのサンプルをノルム max_norm にそろえています。小さい勾配は縮めも伸ばしもせず、"
                       "倍率は min(1, max_norm/‖g_i‖) です。")
        for k in params:
            expect_close(got[k], want[k], f"葉 '{k}' の値", rtol=1e-3, atol=1e-5,
                         hint="vmap(grad(sample_loss), in_axes=(None, 0, 0)) → サンプルごとの全体ノルム → 倍率 → 平均 の順です。")
    expect_no_batch_loop(fn, lambda n: (_loss2, params, *data(n), max_norm))
    n_clipped = int((norms > max_norm).sum())
    return f"隠し入力 {b} サンプル（うち {n_clipped} 件がクリップ対象）で一致し、jaxpr はバッチサイズに依存しません。"


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
    params = {"W1": _f32(rng.normal(size=(d_in, d_hid)) * 0.5), "b1": _f32(np.zeros(d_hid)),
              "W2": _f32(rng.normal(size=(d_hid, d_out)) * 0.5), "b2": _f32(np.zeros(d_out))}
    batches = [(_f32(rng.normal(size=(bsz, d_in))), _f32(rng.normal(size=(bsz, d_out)))) for _ in range(steps)]
    optimizer = optax.adamw(learning_rate=0.05, weight_decay=0.1)  # 更新に params が要る

    traced_types = []

    def loss_fn(p, xs, ys):
        traced_types.append(jax.typeof(xs))  # トレースのたびに記録（実行時は増えない）
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
        step = call(fn, loss_fn, optimizer, mesh)
        if not callable(step):
            raise Fail(f"make_dp_train_step は関数（学習ステップ）を返すはずですが、{type(step).__name__} が返りました。")
        losses = []
        for xs, ys in batches:
            out = call(step, p, s, xs, ys)
            if not (isinstance(out, tuple) and len(out) == 3):
                raise Fail("学習ステップは (新しい params, 新しい opt_state, loss) の 3 つ組を返してください。")
            p, s, loss = out
            _expect_replicated(p, n, "出力パラメータ ")
            _expect_replicated(s, n, "オプティマイザの状態 ")
            losses.append(float(np.asarray(loss)))

    if not traced_types:
        raise Fail("loss_fn が一度も呼ばれていません。jax.value_and_grad(loss_fn) で損失と勾配を求めましょう。")
    if len(traced_types) > 1:
        raise Fail(f"{steps} ステップで loss_fn が {len(traced_types)} 回トレースされました（期待は 1 回）。"
                   "jit していないか、呼ぶたびに jax.jit し直しています。jit した関数は 1 度だけ作って使い回しましょう。")
    xs_type = traced_types[0]
    spec = getattr(getattr(xs_type, "sharding", None), "spec", None)
    if spec is None or len(spec) == 0 or spec[0] != "data":
        raise Fail(f"loss_fn に届いたバッチの型が {xs_type} で、'data' 軸で分割されていません。"
                   "jax.device_put(xs, NamedSharding(mesh, P('data'))) で分割してから jit した関数に渡しましょう。")
    got_params = jax.device_get(p)
    if all(_close(got_params[k], want_params[k], rtol=1e-3, atol=1e-5) for k in params):
        pass
    else:
        rev, _ = reference(-1)
        if all(_close(got_params[k], rev[k], rtol=1e-3, atol=1e-5) for k in params):
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
# FSDP 風にパラメータを分割: 割り切れる最初の軸を 'data' で分割

def _fsdp_tree(rng, k):
    """data 軸の大きさ k から形を決めた隠しの pytree（Adam の状態のように整数のスカラーも入れる）。"""
    return {
        "embed": _f32(rng.normal(size=(3 * k, 5))),
        "dense": {"W": _f32(rng.normal(size=(7, 2 * k))), "b": _f32(rng.normal(size=(2 * k,)))},
        "head": {"W": _f32(rng.normal(size=(5, 3))), "b": _f32(rng.normal(size=(3,)))},
        "count": np.asarray(7, dtype=np.int32),
    }


DEFAULT_HINT = "mesh.shape['data'] で割り切れる最初の軸を 'data' で分割しましょう。"


def _divisible_axis(shape, k):
    return next((i for i, s in enumerate(shape) if s % k == 0), None)


def _check_fsdp_on(fn, mesh, tree, label):
    import jax

    k = mesh.shape["data"]
    n_mesh = mesh.devices.size
    got = call(fn, tree, mesh)
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
        if not np.array_equal(np.asarray(leaf), want):
            raise Fail(f"{label}: 葉 {name} の値が変わっています。配置を変えるだけで、値は変えません。")
        if set(leaf.sharding.device_set) != mesh_devices:
            raise Fail(f"{label}: 葉 {name} が {len(leaf.sharding.device_set)} デバイスにあります"
                       f"（期待はメッシュの {n_mesh} デバイス）。NamedSharding(mesh, spec) を使いましょう。")
        got_bytes = int(np.prod(leaf.sharding.shard_shape(leaf.shape))) * leaf.dtype.itemsize
        axis = _divisible_axis(want.shape, k)
        want_bytes = want.nbytes // k if axis is not None else want.nbytes
        total_in += want.nbytes
        total_out += got_bytes
        if got_bytes == want_bytes:
            spec = getattr(leaf.sharding, "spec", None)
            if axis is not None and (spec is None or "data" not in tuple(spec)):
                raise Fail(f"{label}: 葉 {name}（形 {want.shape}）は {axis} 軸が {k} で割り切れるのに 'data' 軸で分割されていません"
                           f"（spec {spec}）。mesh.shape['data'] で割り切れる最初の軸を 'data' で分割しましょう。")
            continue
        if got_bytes > want_bytes:
            hint = ""
            if len(want.shape) == 1:
                hint = "1 次元の葉（バイアスなど）も分割の対象です。"
            elif all(s % n_mesh for s in want.shape) and n_mesh != k:
                hint = (f"割り切れるかは jax.device_count() や全デバイス数 {n_mesh} ではなく、"
                        f"mesh.shape['data'] = {k} で調べます。")
            raise Fail(f"{label}: 葉 {name}（形 {want.shape}）の 1 デバイスあたりのバイト数が減っていません: "
                       f"期待 {want_bytes}、実際 {got_bytes}（{_describe_sharding(leaf)}）。"
                       f"{hint or DEFAULT_HINT}")
        raise Fail(f"{label}: 葉 {name}（形 {want.shape}）のバイト数が期待 {want_bytes} より少ない {got_bytes} です。"
                   "'data' 軸だけで分割し、ほかの軸（model など）は使いません。")
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
    return (f"{n} デバイス: 隠しの pytree（全体 {t_in} バイト）が 1 デバイスあたり {t_out} バイトになり、"
            "2 次元メッシュでも 'data' 軸だけで分割できています。")
