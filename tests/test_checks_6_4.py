"""6.4 のチェック: 参照解と別の正解は通り、典型的な誤りは問題を名指しして落ちる。"""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec as P

from ch6 import run_check


def expect(ex, fn, want_status, *words):
    r = run_check(ex, fn)
    assert r.status == want_status, r.message
    for w in words:
        assert w in r.message, f"{w!r} not in {r.message!r}"


def not_done(*args, **kwargs):
    raise NotImplementedError


def boom(*args, **kwargs):
    raise ZeroDivisionError("division by zero")


# 6.4-1 batched_loss ------------------------------------------------------------------

def batched_loss_ref(sample_loss, params, xs, ys):
    return jnp.mean(jax.vmap(sample_loss, in_axes=(None, 0, 0))(params, xs, ys))


@pytest.mark.parametrize("fn", [
    batched_loss_ref,
    jax.jit(batched_loss_ref, static_argnums=0),
    # 閉包で params を固定してから vmap しても正解
    lambda f, p, xs, ys: jax.vmap(lambda x, y: f(p, x, y))(xs, ys).sum() / xs.shape[0],
])
def test_6_4_1_correct(fn):
    expect("6.4-1", fn, "pass", "正解")


def test_6_4_1_wrong():
    vm = lambda f: jax.vmap(f, in_axes=(None, 0, 0))  # noqa: E731
    expect("6.4-1", lambda f, p, xs, ys: jnp.sum(vm(f)(p, xs, ys)), "fail", "合計", "jnp.mean")
    expect("6.4-1", lambda f, p, xs, ys: vm(f)(p, xs, ys), "fail", "サンプルごとの損失", "平均")
    expect("6.4-1", lambda f, p, xs, ys: jnp.mean(jax.vmap(f, in_axes=0)(p, xs, ys)), "fail",
           "in_axes=(None, 0, 0)")
    expect("6.4-1", lambda f, p, xs, ys: jnp.mean(f(p, xs, ys)), "fail", "バッチがそのまま", "vmap")
    expect("6.4-1", lambda f, p, xs, ys: jnp.mean(jnp.stack([f(p, x, y) for x, y in zip(xs, ys)])),
           "fail", "Python のループ")
    expect("6.4-1", lambda f, p, xs, ys: jnp.mean(lax.map(lambda xy: f(p, *xy), (xs, ys))), "fail", "scan")
    expect("6.4-1", lambda f, p, xs, ys: jnp.float32(1.234), "fail", "値が違います")
    expect("6.4-1", not_done, "not_done", "まだ解答されていません")
    expect("6.4-1", boom, "error", "ZeroDivisionError")


# 6.4-2 clipped_mean_grad -------------------------------------------------------------

def _per_example(f, p, xs, ys):
    return jax.vmap(jax.grad(f), in_axes=(None, 0, 0))(p, xs, ys)


def _norms(g):
    return jnp.sqrt(sum(jnp.sum(v.reshape(v.shape[0], -1) ** 2, axis=1) for v in jax.tree.leaves(g)))


def _bcast(s, v):
    return s.reshape((-1,) + (1,) * (v.ndim - 1))


def clipped_ref(f, p, xs, ys, c):
    g = _per_example(f, p, xs, ys)
    s = jnp.minimum(1.0, c / _norms(g))
    return jax.tree.map(lambda v: jnp.mean(v * _bcast(s, v), axis=0), g)


def clipped_optax(f, p, xs, ys, c):
    # optax の部品を使う別解
    g = _per_example(f, p, xs, ys)
    leaves, tdef = jax.tree.flatten(g)
    summed, _ = optax.per_example_global_norm_clip(leaves, c)
    return jax.tree.unflatten(tdef, [v / xs.shape[0] for v in summed])


@pytest.mark.parametrize("fn", [clipped_ref, clipped_optax, jax.jit(clipped_ref, static_argnums=0)])
def test_6_4_2_correct(fn):
    expect("6.4-2", fn, "pass", "正解")


def test_6_4_2_wrong():
    def no_clip(f, p, xs, ys, c):
        return jax.tree.map(lambda v: v.mean(0), _per_example(f, p, xs, ys))

    def clip_after_mean(f, p, xs, ys, c):
        m = jax.grad(lambda q: jnp.mean(jax.vmap(f, in_axes=(None, 0, 0))(q, xs, ys)))(p)
        return jax.tree.map(lambda v: v * jnp.minimum(1.0, c / optax.tree.norm(m)), m)

    def per_leaf(f, p, xs, ys, c):
        g = _per_example(f, p, xs, ys)
        return jax.tree.map(lambda v: jnp.mean(v * _bcast(jnp.minimum(1.0, c / _norms([v])), v), 0), g)

    def summed(f, p, xs, ys, c):
        return jax.tree.map(lambda v: v * xs.shape[0], clipped_ref(f, p, xs, ys, c))

    def normalize_all(f, p, xs, ys, c):
        g = _per_example(f, p, xs, ys)
        s = c / _norms(g)
        return jax.tree.map(lambda v: jnp.mean(v * _bcast(s, v), 0), g)

    def keep_batch(f, p, xs, ys, c):
        g = _per_example(f, p, xs, ys)
        s = jnp.minimum(1.0, c / _norms(g))
        return jax.tree.map(lambda v: v * _bcast(s, v), g)

    def loop(f, p, xs, ys, c):
        gs = [jax.grad(f)(p, x, y) for x, y in zip(xs, ys)]
        gs = [jax.tree.map(lambda v: v * jnp.minimum(1.0, c / optax.tree.norm(g)), g) for g in gs]
        return jax.tree.map(lambda *v: jnp.mean(jnp.stack(v), 0), *gs)

    expect("6.4-2", no_clip, "fail", "クリップされていません")
    expect("6.4-2", clip_after_mean, "fail", "クリップされていません", "平均の前")
    expect("6.4-2", per_leaf, "fail", "葉ごと")
    expect("6.4-2", summed, "fail", "合計")
    expect("6.4-2", normalize_all, "fail", "min(1, max_norm/‖g_i‖)")
    expect("6.4-2", keep_batch, "fail", "サンプルごとの勾配のまま")
    expect("6.4-2", lambda f, p, xs, ys, c: [p["W"], p["b"]], "fail", "構造")
    expect("6.4-2", lambda f, p, xs, ys, c: jax.tree.map(jnp.zeros_like, p), "fail", "値が違います")
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
    expect("6.4-3", no_jit, "fail", "トレース")
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


# 6.4-4 fsdp_shard --------------------------------------------------------------------

def _place(tree, mesh, size, only_2d=False):
    def put(a):
        a = np.asarray(a)
        for i, d in enumerate(a.shape):
            if d % size == 0 and not (only_2d and a.ndim < 2):
                return jax.device_put(a, NamedSharding(mesh, P(*[None] * i, "data")))
        return jax.device_put(a, NamedSharding(mesh, P()))
    return jax.tree.map(put, tree)


def fsdp_ref(tree, mesh):
    return _place(tree, mesh, mesh.shape["data"])


def fsdp_last_axis_first(tree, mesh):
    # 別解: 割り切れる軸のうち最後の軸を選んでも、バイト数は同じだけ減る
    k = mesh.shape["data"]

    def put(a):
        axes = [i for i, d in enumerate(np.shape(a)) if d % k == 0]
        spec = P(*[None] * axes[-1], "data") if axes else P()
        return jax.device_put(a, NamedSharding(mesh, spec))
    return jax.tree.map(put, tree)


@pytest.mark.parametrize("fn", [fsdp_ref, fsdp_last_axis_first])
def test_6_4_4_correct(fn):
    expect("6.4-4", fn, "pass", "正解")


def test_6_4_4_wrong():
    n = jax.device_count()
    # デバイスが 1 個なら分割してもバイト数は減らないので、誤りは「'data' で分割されていない spec」として見つかる
    expect("6.4-4", lambda t, m: jax.tree.map(lambda a: jax.device_put(a, NamedSharding(m, P())), t),
           "fail", "減っていません" if n > 1 else "分割されていません")
    expect("6.4-4", lambda t, m: _place(t, m, m.shape["data"], only_2d=True), "fail",
           "1 次元の葉" if n > 1 else "分割されていません")
    if n % 2 == 0:
        # jax.device_count() で割り切れるかを調べてしまう誤り。2 次元メッシュの data の大きさ（n/2）が
        # 全デバイス数と違うときだけ見つかる（奇数なら 2 次元メッシュは n×1 で、この答えも正しく分割する）
        expect("6.4-4", lambda t, m: _place(t, m, jax.device_count()), "fail", "mesh.shape['data']")
    if n > 1:
        expect("6.4-4", lambda t, m: jax.device_put(t, jax.devices()[0]), "fail", "デバイスにあります")
    if n % 2 == 0:
        # data と model の両方で分割すると、期待より減りすぎる
        def both(t, m):
            if "model" not in m.axis_names:
                return fsdp_ref(t, m)
            k = m.shape["data"] * m.shape["model"]

            def put(a):
                axis = next((i for i, d in enumerate(np.shape(a)) if d % k == 0), None)
                spec = P(*[None] * axis, ("data", "model")) if axis is not None else P()
                return jax.device_put(a, NamedSharding(m, spec))
            return jax.tree.map(put, t)
        expect("6.4-4", both, "fail", "'data' 軸だけ")
    expect("6.4-4", lambda t, m: jax.tree.map(lambda a: jax.device_put(np.asarray(a) * 1.0, NamedSharding(m, P())), t),
           "fail", "dtype")
    expect("6.4-4", lambda t, m: list(jax.tree.leaves(fsdp_ref(t, m))), "fail", "構造")
    expect("6.4-4", lambda t, m: jax.tree.map(lambda a: jax.device_put(a, NamedSharding(m, P("data"))), t),
           "error", "あなたのコードの中で")
    expect("6.4-4", not_done, "not_done", "まだ解答されていません")
    expect("6.4-4", boom, "error", "ZeroDivisionError")
