"""6.4 のチェック: 参照解と別の正解は通り、典型的な誤りは問題を名指しして落ちる。"""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec as P

from ch6 import run_check
from tests.checkhelp import boom, expect, not_done  # noqa: E402,F401


# 6.4-1 batched_loss（xs は (特徴, バッチ): バッチは 1 軸目） ----------------------------------

def batched_loss_ref(sample_loss, params, xs, ys):
    return jnp.mean(jax.vmap(sample_loss, in_axes=(None, 1, 0))(params, xs, ys))


@pytest.mark.parametrize("fn", [
    batched_loss_ref,
    jax.jit(batched_loss_ref, static_argnums=0),
    # 閉包で params を固定してから vmap しても正解
    lambda f, p, xs, ys: jax.vmap(lambda x, y: f(p, x, y), in_axes=(1, 0))(xs, ys).sum() / xs.shape[1],
    # 転置してから 0 軸でバッチ化しても正解（転置は自由）
    lambda f, p, xs, ys: jnp.mean(jax.vmap(f, in_axes=(None, 0, 0))(p, xs.T, ys)),
])
def test_6_4_1_correct(fn):
    expect("6.4-1", fn, "pass", "正解")


def test_6_4_1_wrong():
    vm = lambda f: jax.vmap(f, in_axes=(None, 1, 0))  # noqa: E731
    expect("6.4-1", lambda f, p, xs, ys: jnp.sum(vm(f)(p, xs, ys)), "fail", "合計", "jnp.mean")
    expect("6.4-1", lambda f, p, xs, ys: vm(f)(p, xs, ys), "fail", "サンプルごとの損失", "平均")
    expect("6.4-1", lambda f, p, xs, ys: jnp.mean(jax.vmap(f, in_axes=0)(p, xs, ys)), "fail",
           "in_axes の最初は None")
    expect("6.4-1", lambda f, p, xs, ys: jnp.mean(jax.vmap(f, in_axes=1)(p, xs, ys)), "error",
           "全サンプルで共通なら None")
    expect("6.4-1", lambda f, p, xs, ys: jnp.mean(f(p, xs, ys)), "fail", "1 サンプル用", "in_axes")
    expect("6.4-1", lambda f, p, xs, ys: jnp.mean(jnp.stack([f(p, x, y) for x, y in zip(xs.T, ys)])),
           "fail", "Python のループ")
    expect("6.4-1", lambda f, p, xs, ys: jnp.mean(lax.map(lambda xy: f(p, *xy), (xs.T, ys))), "fail", "scan")
    expect("6.4-1", lambda f, p, xs, ys: jnp.float32(1.234), "fail", "値が違います")
    expect("6.4-1", not_done, "not_done", "まだ解答されていません")
    expect("6.4-1", boom, "error", "ZeroDivisionError")


def test_6_4_1_lesson_axis_is_wrong_here():
    # 教材と同じ in_axes=(None, 0, 0) のままだと、バッチの軸が違うことを名指しする
    expect("6.4-1", lambda f, p, xs, ys: jnp.mean(jax.vmap(f, in_axes=(None, 0, 0))(p, xs, ys)), "fail",
           "1 軸目", "in_axes=(None, 1, 0)")
    # 両方を 1 軸目にすると ys（1 次元）の軸が足りない: 学習者のエラーとして説明する
    r = run_check("6.4-1", lambda f, p, xs, ys: jnp.mean(jax.vmap(f, in_axes=(None, 1, 1))(p, xs, ys)))
    assert r.status in ("fail", "error") and "internal" not in r.status, r.message


# 6.4-2 clipped_mean_grad（1 サンプルは辞書 {"x", "y"}、params は入れ子） ---------------------

def _per_example(f, p, batch):
    return jax.vmap(jax.grad(f), in_axes=(None, 0))(p, batch)


def _norms(g):
    return jnp.sqrt(sum(jnp.sum(v.reshape(v.shape[0], -1) ** 2, axis=1) for v in jax.tree.leaves(g)))


def _bcast(s, v):
    return s.reshape((-1,) + (1,) * (v.ndim - 1))


def clipped_ref(f, p, batch, c):
    g = _per_example(f, p, batch)
    s = jnp.minimum(1.0, c / _norms(g))
    return jax.tree.map(lambda v: jnp.mean(v * _bcast(s, v), axis=0), g)


def clipped_optax(f, p, batch, c):
    # optax の部品を使う別解
    g = _per_example(f, p, batch)
    leaves, tdef = jax.tree.flatten(g)
    summed, _ = optax.per_example_global_norm_clip(leaves, c)
    return jax.tree.unflatten(tdef, [v / batch["x"].shape[0] for v in summed])


def clipped_dict_axes(f, p, batch, c):
    # in_axes を辞書の形で書いても同じ
    g = jax.vmap(jax.grad(f), in_axes=(None, {"x": 0, "y": 0}))(p, batch)
    s = jnp.minimum(1.0, c / _norms(g))
    return jax.tree.map(lambda v: jnp.mean(v * _bcast(s, v), axis=0), g)


@pytest.mark.parametrize("fn", [clipped_ref, clipped_optax, clipped_dict_axes, jax.jit(clipped_ref, static_argnums=0)])
def test_6_4_2_correct(fn):
    expect("6.4-2", fn, "pass", "正解")


def test_6_4_2_wrong():
    def no_clip(f, p, batch, c):
        return jax.tree.map(lambda v: v.mean(0), _per_example(f, p, batch))

    def clip_after_mean(f, p, batch, c):
        m = jax.grad(lambda q: jnp.mean(jax.vmap(f, in_axes=(None, 0))(q, batch)))(p)
        return jax.tree.map(lambda v: v * jnp.minimum(1.0, c / optax.tree.norm(m)), m)

    def per_leaf(f, p, batch, c):
        g = _per_example(f, p, batch)
        return jax.tree.map(lambda v: jnp.mean(v * _bcast(jnp.minimum(1.0, c / _norms([v])), v), 0), g)

    def summed(f, p, batch, c):
        return jax.tree.map(lambda v: v * batch["x"].shape[0], clipped_ref(f, p, batch, c))

    def normalize_all(f, p, batch, c):
        g = _per_example(f, p, batch)
        s = c / _norms(g)
        return jax.tree.map(lambda v: jnp.mean(v * _bcast(s, v), 0), g)

    def keep_batch(f, p, batch, c):
        g = _per_example(f, p, batch)
        s = jnp.minimum(1.0, c / _norms(g))
        return jax.tree.map(lambda v: v * _bcast(s, v), g)

    def skip_out_leaf(f, p, batch, c):
        # ノルムに 1 つの葉（out）を入れ忘れる
        g = _per_example(f, p, batch)
        s = jnp.minimum(1.0, c / _norms(g["enc"]))
        return jax.tree.map(lambda v: jnp.mean(v * _bcast(s, v), 0), g)

    def loop(f, p, batch, c):
        gs = [jax.grad(f)(p, {"x": x, "y": y}) for x, y in zip(batch["x"], batch["y"])]
        gs = [jax.tree.map(lambda v: v * jnp.minimum(1.0, c / optax.tree.norm(g)), g) for g in gs]
        return jax.tree.map(lambda *v: jnp.mean(jnp.stack(v), 0), *gs)

    expect("6.4-2", no_clip, "fail", "クリップされていません")
    expect("6.4-2", clip_after_mean, "fail", "クリップされていません", "平均の前")
    expect("6.4-2", per_leaf, "fail", "葉ごと")
    expect("6.4-2", summed, "fail", "合計")
    expect("6.4-2", normalize_all, "fail", "min(1, max_norm/‖g_i‖)")
    expect("6.4-2", keep_batch, "fail", "サンプルごとの勾配のまま")
    expect("6.4-2", skip_out_leaf, "fail", "値が違います")
    expect("6.4-2", lambda f, p, batch, c: [p["enc"], p["out"]], "fail", "構造")
    expect("6.4-2", lambda f, p, batch, c: jax.tree.map(jnp.zeros_like, p), "fail", "値が違います")
    expect("6.4-2", lambda f, p, batch, c: jax.grad(f)(p, batch), "fail", "バッチのまま", "vmap")
    expect("6.4-2", loop, "fail", "Python のループ")
    expect("6.4-2", not_done, "not_done", "まだ解答されていません")
    expect("6.4-2", boom, "error", "ZeroDivisionError")


# 6.4-3 make_dp_train_step ------------------------------------------------------------

def _update(loss_fn, optimizer):
    def step(params, opt_state, xs, ys):
        loss, grads = jax.value_and_grad(loss_fn)(params, xs, ys)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss
    return step


def dp_ref(loss_fn, optimizer, mesh):
    step = jax.jit(_update(loss_fn, optimizer))

    def train_step(params, opt_state, xs, ys):
        batch = NamedSharding(mesh, P("data"))
        return step(params, opt_state, jax.device_put(xs, batch), jax.device_put(ys, batch))
    return train_step


def dp_mesh_context(loss_fn, optimizer, mesh):
    # 別解: 出力の配置も jit に明示し、set_mesh の中で P だけで置く
    rep = NamedSharding(mesh, P())
    step = jax.jit(_update(loss_fn, optimizer), out_shardings=(rep, rep, rep))

    def train_step(params, opt_state, xs, ys):
        with jax.set_mesh(mesh):
            return step(params, opt_state, jax.device_put(xs, P("data")), jax.device_put(ys, P("data")))
    return train_step


@pytest.mark.parametrize("fn", [dp_ref, dp_mesh_context])
def test_6_4_3_correct(fn):
    expect("6.4-3", fn, "pass", "正解", "コンパイルは 1 回")


def test_6_4_3_wrong():
    def unsharded(loss_fn, optimizer, mesh):
        return jax.jit(_update(loss_fn, optimizer))  # バッチをそのまま渡す

    def rejit(loss_fn, optimizer, mesh):
        def train_step(params, opt_state, xs, ys):
            batch = NamedSharding(mesh, P("data"))
            return jax.jit(_update(loss_fn, optimizer))(  # 呼ぶたびに新しい jit
                params, opt_state, jax.device_put(xs, batch), jax.device_put(ys, batch))
        return train_step

    def no_jit(loss_fn, optimizer, mesh):
        def train_step(params, opt_state, xs, ys):
            batch = NamedSharding(mesh, P("data"))
            return _update(loss_fn, optimizer)(params, opt_state, jax.device_put(xs, batch),
                                               jax.device_put(ys, batch))
        return train_step

    def to_host(loss_fn, optimizer, mesh):
        inner = dp_ref(loss_fn, optimizer, mesh)

        def train_step(*args):
            p, s, loss = inner(*args)
            return jax.device_get(p), s, loss
        return train_step

    def sharded_params(loss_fn, optimizer, mesh):
        inner = dp_ref(loss_fn, optimizer, mesh)

        def train_step(*args):
            p, s, loss = inner(*args)
            return fsdp_ref(p, mesh), s, loss  # パラメータまで分割してしまう
        return train_step

    def one_device(loss_fn, optimizer, mesh):
        inner = dp_ref(loss_fn, optimizer, mesh)

        def train_step(*args):
            p, s, loss = inner(*args)
            return jax.device_put(p, jax.devices()[-1]), s, loss
        return train_step

    def reversed_update(loss_fn, optimizer, mesh):
        def upd(params, opt_state, xs, ys):
            loss, grads = jax.value_and_grad(loss_fn)(params, xs, ys)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return jax.tree.map(lambda p, u: p - u, params, updates), opt_state, loss
        step = jax.jit(upd)
        batch = NamedSharding(mesh, P("data"))
        return lambda p, s, xs, ys: step(p, s, jax.device_put(xs, batch), jax.device_put(ys, batch))

    def no_params(loss_fn, optimizer, mesh):
        def upd(params, opt_state, xs, ys):
            loss, grads = jax.value_and_grad(loss_fn)(params, xs, ys)
            updates, opt_state = optimizer.update(grads, opt_state)  # adamw には params が要る
            return optax.apply_updates(params, updates), opt_state, loss
        step = jax.jit(upd)
        return lambda p, s, xs, ys: step(p, s, xs, ys)

    expect("6.4-3", unsharded, "fail", "'data' 軸で分割されていません")
    expect("6.4-3", rejit, "fail", "トレース", "使い回し")
    expect("6.4-3", no_jit, "fail", "jit の外")
    expect("6.4-3", to_host, "fail", "jax.Array ではありません")
    if jax.device_count() > 1:
        expect("6.4-3", sharded_params, "fail", "分割されています", "複製")
        expect("6.4-3", one_device, "fail", "デバイスにしかありません")
    expect("6.4-3", reversed_update, "fail", "向きが逆", "apply_updates")
    expect("6.4-3", no_params, "error", "params")
    expect("6.4-3", lambda loss_fn, optimizer, mesh: "step", "fail", "関数（学習ステップ）")
    expect("6.4-3", lambda loss_fn, optimizer, mesh: (lambda p, s, xs, ys: (p, s)), "fail", "3 つ組")
    expect("6.4-3", lambda loss_fn, optimizer, mesh: not_done, "not_done", "まだ解答されていません")
    expect("6.4-3", boom, "error", "ZeroDivisionError")


# 6.4-4 fsdp_shard（割り切れる軸のうちいちばん長い軸、同じ長さなら前の軸） -----------------------

def _axis_by(rule):
    def pick(shape, k):
        divisible = [i for i, d in enumerate(shape) if d % k == 0]
        return rule(divisible, shape) if divisible else None
    return pick


longest = _axis_by(lambda ax, shape: max(ax, key=lambda i: (shape[i], -i)))
first = _axis_by(lambda ax, shape: ax[0])
last = _axis_by(lambda ax, shape: ax[-1])
longest_last = _axis_by(lambda ax, shape: max(ax, key=lambda i: (shape[i], i)))


def _place(tree, mesh, size, pick=longest, only_2d=False):
    def put(a):
        a = np.asarray(a)
        axis = pick(a.shape, size)
        if axis is None or (only_2d and a.ndim < 2):
            return jax.device_put(a, NamedSharding(mesh, P()))
        return jax.device_put(a, NamedSharding(mesh, P(*[None] * axis, "data")))
    return jax.tree.map(put, tree)


def fsdp_ref(tree, mesh):
    return _place(tree, mesh, mesh.shape["data"])


def fsdp_numpy_argmax(tree, mesh):
    # 別解: 割り切れない軸を -1 にして np.argmax（同じ値なら最初の位置を返す）。末尾の None を書いても同じ
    k = mesh.shape["data"]

    def put(a):
        shape = np.shape(a)
        lengths = [d if d % k == 0 else -1 for d in shape]
        if not shape or max(lengths) < 0:
            return jax.device_put(a, NamedSharding(mesh, P()))
        i = int(np.argmax(lengths))
        spec = [None] * len(shape)
        spec[i] = "data"
        return jax.device_put(a, NamedSharding(mesh, P(*spec)))
    return jax.tree.map(put, tree)


def fsdp_set_mesh(tree, mesh):
    # 別解: set_mesh の中で P だけを渡す
    with jax.set_mesh(mesh):
        return jax.tree.map(
            lambda a: jax.device_put(a, P() if longest(np.shape(a), mesh.shape["data"]) is None
                                     else P(*[None] * longest(np.shape(a), mesh.shape["data"]), "data")), tree)


@pytest.mark.parametrize("fn", [fsdp_ref, fsdp_numpy_argmax, fsdp_set_mesh])
def test_6_4_4_correct(fn):
    expect("6.4-4", fn, "pass", "正解")


@pytest.mark.parametrize("pick, words", [
    (first, ("最初の軸ではなく",)),
    (last, ("最後の軸ではなく",)),
    (longest_last, ("前の軸",)),
])
def test_6_4_4_which_axis(pick, words):
    # 回帰（issue 13）: バイト数は同じでも、分割した軸が規則と違えば落ちる。どのデバイス数でも（奇数・1 個でも）
    expect("6.4-4", lambda t, m: _place(t, m, m.shape["data"], pick=pick), "fail", "規則では", *words)


def test_6_4_4_wrong():
    n = jax.device_count()
    expect("6.4-4", lambda t, m: jax.tree.map(lambda a: jax.device_put(a, NamedSharding(m, P())), t),
           "fail", "分割されていません")
    expect("6.4-4", lambda t, m: _place(t, m, m.shape["data"], only_2d=True), "fail",
           "1 次元の葉" if n > 1 else "分割されていません")
    if n > 2:
        # jax.device_count() で割り切れるかを調べてしまう誤り。2 次元メッシュ（偶数）か、
        # 一部のデバイスのメッシュ（奇数）で data の大きさが全デバイス数と違うときに見つかる
        expect("6.4-4", lambda t, m: _place(t, m, jax.device_count()), "fail", "mesh.shape['data']")
    if n > 1:
        expect("6.4-4", lambda t, m: jax.device_put(t, jax.devices()[0]), "fail", "デバイスにあります")
    else:
        expect("6.4-4", lambda t, m: jax.device_put(t, jax.devices()[0]), "fail", "NamedSharding")

    def both(t, m):
        # data と model の両方で分割する（model の大きさが 1 でも spec が違う）
        if "model" not in m.axis_names:
            return fsdp_ref(t, m)
        k = m.shape["data"] * m.shape["model"]

        def put(a):
            axis = longest(np.shape(a), k)
            spec = P(*[None] * axis, ("data", "model")) if axis is not None else P()
            return jax.device_put(a, NamedSharding(m, spec))
        return jax.tree.map(put, t)
    expect("6.4-4", both, "fail", "'data' 軸だけ")
    expect("6.4-4", lambda t, m: _place(jax.tree.map(lambda a: np.asarray(a) * 1.0, t), m, m.shape["data"]),
           "fail", "dtype")
    expect("6.4-4", lambda t, m: list(jax.tree.leaves(fsdp_ref(t, m))), "fail", "構造")
    if n > 1:
        expect("6.4-4", lambda t, m: jax.tree.map(lambda a: jax.device_put(a, NamedSharding(m, P("data"))), t),
               "fail", "割り切れない軸", "mesh.shape['data']")
    expect("6.4-4", not_done, "not_done", "まだ解答されていません")
    expect("6.4-4", boom, "error", "ZeroDivisionError")


def test_6_4_4_own_mesh_same_devices():
    # 渡された mesh ではなく、自分で作ったメッシュ（軸の名前が違う）に置く誤り
    def own(t, m):
        mine = jax.make_mesh(m.devices.shape, tuple(f"my_{a}" for a in m.axis_names), devices=list(m.devices.flat))
        return jax.tree.map(lambda a: jax.device_put(a, NamedSharding(mine, P())), t)
    expect("6.4-4", own, "fail", "渡された mesh")


# 6.4-3 の回帰（issue 13）--------------------------------------------------------------

def _with_out(order):
    def make(loss_fn, optimizer, mesh):
        inner = dp_ref(loss_fn, optimizer, mesh)

        def train_step(*args):
            p, s, loss = inner(*args)
            return order(p, s, loss)
        return train_step
    return make


@pytest.mark.parametrize("order, got", [
    (lambda p, s, loss: (loss, p, s), "(loss, params, opt_state)"),
    (lambda p, s, loss: (s, p, loss), "(opt_state, params, loss)"),
    (lambda p, s, loss: (p, loss, s), "(params, loss, opt_state)"),
])
def test_6_4_3_wrong_order_is_named(order, got):
    # 順番違いは「内部の問題」ではなく、期待と実際を並べた不合格
    expect("6.4-3", _with_out(order), "fail", "順番が違います", "期待 (params, opt_state, loss)", got)


def test_6_4_3_list_is_accepted():
    # タプルでもリストでもよい（規則は 1 つ: 長さ 3 の並び）
    expect("6.4-3", _with_out(lambda p, s, loss: [p, s, loss]), "pass", "正解")


def test_6_4_3_bad_outputs():
    expect("6.4-3", _with_out(lambda p, s, loss: (p, s, loss, loss)), "fail", "3 つ組", "4 要素")
    expect("6.4-3", _with_out(lambda p, s, loss: {"params": p}), "fail", "タプルかリスト", "dict")
    expect("6.4-3", _with_out(lambda p, s, loss: (p, s, jnp.stack([loss, loss]))), "fail",
           "3 つ組", "スカラー")


def test_6_4_3_loss_called_twice_in_one_trace():
    # loss_fn を 1 回のトレースの中で 2 度呼んでも、コンパイルは 1 回: 「jit し直し」とは言わない
    def twice(loss_fn, optimizer, mesh):
        @jax.jit
        def upd(params, opt_state, xs, ys):
            loss = loss_fn(params, xs, ys)
            grads = jax.grad(loss_fn)(params, xs, ys)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss
        batch = NamedSharding(mesh, P("data"))
        return lambda p, s, xs, ys: upd(p, s, jax.device_put(xs, batch), jax.device_put(ys, batch))
    expect("6.4-3", twice, "pass", "正解", "コンパイルは 1 回")


def test_6_4_3_no_jit_is_named():
    def no_jit(loss_fn, optimizer, mesh):
        step = _update(loss_fn, optimizer)
        batch = NamedSharding(mesh, P("data"))
        return lambda p, s, xs, ys: step(p, s, jax.device_put(xs, batch), jax.device_put(ys, batch))
    expect("6.4-3", no_jit, "fail", "jit の外")


def test_6_4_3_recompile_on_changed_types_is_not_called_rejit():
    # 1 ステップ目だけ出力の dtype を変える → 2 ステップ目だけ再トレース: 「呼ぶたびに jit し直し」とは言わない
    def drift(loss_fn, optimizer, mesh):
        inner = dp_ref(loss_fn, optimizer, mesh)
        calls = [0]

        def train_step(*args):
            p, s, loss = inner(*args)
            calls[0] += 1
            if calls[0] == 1:
                p = {k: (v.astype(jnp.float16) if k == "b1" else v) for k, v in p.items()}
            return p, s, loss
        return train_step
    r = run_check("6.4-3", drift)
    assert r.status == "fail", r.message
    assert "トレースされました" in r.message and "呼ぶたびに" not in r.message, r.message
