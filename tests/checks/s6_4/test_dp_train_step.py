"""6.4-3 make_dp_train_step のチェック（ch6/checks/s6_4/dp_train_step.py）のテスト。"""
import jax
import jax.numpy as jnp
import optax
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from ch6 import run_check
from tests.checkhelp import boom, expect, not_done
from tests.checks.s6_4.common import fsdp_ref


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
