"""6.4-3 make_dp_train_step のチェック（ch6/checks/s6_4/dp_train_step.py）のテスト: 1 回の呼び出しで K ステップ（scan）。"""
import jax
import jax.numpy as jnp
import optax
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from ch6 import run_check
from tests.checkhelp import boom, expect, not_done
from tests.checks.s6_4.common import fsdp_ref

BATCH = P(None, "data")  # xs は (ステップ, バッチ, 特徴): 分割するのは 1 軸目


def _one(loss_fn, optimizer, sign=1.0, with_params=True):
    def one(carry, batch):
        params, opt_state = carry
        loss, grads = jax.value_and_grad(loss_fn)(params, *batch)
        updates, opt_state = optimizer.update(grads, opt_state, params) if with_params else \
            optimizer.update(grads, opt_state)
        return (jax.tree.map(lambda p, u: p + sign * u, params, updates), opt_state), loss
    return one


def _update(loss_fn, optimizer, **kw):
    def run(params, opt_state, xs, ys):
        (params, opt_state), losses = jax.lax.scan(_one(loss_fn, optimizer, **kw), (params, opt_state), (xs, ys))
        return params, opt_state, losses
    return run


def dp_ref(loss_fn, optimizer, mesh, spec=BATCH):
    step = jax.jit(_update(loss_fn, optimizer))

    def train_step(params, opt_state, xs, ys):
        batch = NamedSharding(mesh, spec)
        return step(params, opt_state, jax.device_put(xs, batch), jax.device_put(ys, batch))
    return train_step


def dp_mesh_context(loss_fn, optimizer, mesh):
    # 別解: 出力の配置も jit に明示し、set_mesh の中で P だけで置く
    rep = NamedSharding(mesh, P())
    step = jax.jit(_update(loss_fn, optimizer), out_shardings=(rep, rep, rep))

    def train_step(params, opt_state, xs, ys):
        with jax.set_mesh(mesh):
            return step(params, opt_state, jax.device_put(xs, BATCH), jax.device_put(ys, BATCH))
    return train_step


def dp_fori(loss_fn, optimizer, mesh):
    # 別解: lax.fori_loop で k 番目のバッチを取り出し、損失を配列に書き込む
    @jax.jit
    def run(params, opt_state, xs, ys):
        def body(k, c):
            p, s, losses = c
            (p, s), loss = _one(loss_fn, optimizer)((p, s), (xs[k], ys[k]))
            return p, s, losses.at[k].set(loss)
        return jax.lax.fori_loop(0, xs.shape[0], body, (params, opt_state, jnp.zeros(xs.shape[0])))

    def train_step(params, opt_state, xs, ys):
        batch = NamedSharding(mesh, BATCH)
        return run(params, opt_state, jax.device_put(xs, batch), jax.device_put(ys, batch))
    return train_step


@pytest.mark.parametrize("fn", [dp_ref, dp_mesh_context, dp_fori])
def test_6_4_3_correct(fn):
    expect("6.4-3", fn, "pass", "コンパイルは 1 回")


def test_6_4_3_wrong():
    def unsharded(loss_fn, optimizer, mesh):
        return jax.jit(_update(loss_fn, optimizer))  # バッチをそのまま渡す

    def rejit(loss_fn, optimizer, mesh):
        def train_step(params, opt_state, xs, ys):
            batch = NamedSharding(mesh, BATCH)
            return jax.jit(_update(loss_fn, optimizer))(  # 呼ぶたびに新しい jit
                params, opt_state, jax.device_put(xs, batch), jax.device_put(ys, batch))
        return train_step

    def no_jit(loss_fn, optimizer, mesh):
        def train_step(params, opt_state, xs, ys):
            batch = NamedSharding(mesh, BATCH)
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
        step = jax.jit(_update(loss_fn, optimizer, sign=-1.0))
        batch = NamedSharding(mesh, BATCH)
        return lambda p, s, xs, ys: step(p, s, jax.device_put(xs, batch), jax.device_put(ys, batch))

    def no_params(loss_fn, optimizer, mesh):
        step = jax.jit(_update(loss_fn, optimizer, with_params=False))  # adamw には params が要る
        return lambda p, s, xs, ys: step(p, s, xs, ys)

    def python_loop(loss_fn, optimizer, mesh):
        # K ステップを Python のループで書き下す（jit の中身がステップの数だけ長くなる）
        @jax.jit
        def run(params, opt_state, xs, ys):
            carry, losses = (params, opt_state), []
            for k in range(xs.shape[0]):
                carry, loss = _one(loss_fn, optimizer)(carry, (xs[k], ys[k]))
                losses.append(loss)
            return *carry, jnp.stack(losses)
        batch = NamedSharding(mesh, BATCH)
        return lambda p, s, xs, ys: run(p, s, jax.device_put(xs, batch), jax.device_put(ys, batch))

    def last_loss_only(loss_fn, optimizer, mesh):
        inner = dp_ref(loss_fn, optimizer, mesh)

        def train_step(*args):
            p, s, losses = inner(*args)
            return p, s, losses[-1]
        return train_step

    expect("6.4-3", unsharded, "fail", "'data' 軸で分割されていません", "P(None, 'data')")
    if jax.device_count() > 1:  # ステップの軸（長さ 7）は 2〜8 デバイスのどれでも割り切れない
        expect("6.4-3", lambda f, o, m: dp_ref(f, o, m, spec=P("data")), "fail", "0 軸", "ステップの軸", "P(None, 'data')")
    expect("6.4-3", python_loop, "fail", "7 回トレース", "lax.scan")
    expect("6.4-3", last_loss_only, "fail", "形 ()", "(7,)")
    expect("6.4-3", rejit, "fail", "トレース", "1 度だけ作って")
    expect("6.4-3", no_jit, "fail", "jit がないか")
    expect("6.4-3", to_host, "fail", "jax.Array ではありません")
    if jax.device_count() > 1:
        expect("6.4-3", sharded_params, "fail", "分割されています", "複製")
        expect("6.4-3", one_device, "fail", "個すべてに複製のはずが", "個にしかありません")
    expect("6.4-3", reversed_update, "fail", "向きが逆", "apply_updates")
    expect("6.4-3", no_params, "error", "params")
    expect("6.4-3", lambda loss_fn, optimizer, mesh: "step", "fail", "関数（学習ステップ）")
    expect("6.4-3", lambda loss_fn, optimizer, mesh: (lambda p, s, xs, ys: (p, s)), "fail", "3 つ組")
    expect("6.4-3", lambda loss_fn, optimizer, mesh: (lambda p, s, xs, ys: (p, s, jnp.zeros(7))), "fail", "一度も呼ばれていません")
    expect("6.4-3", lambda loss_fn, optimizer, mesh: not_done, "not_done", "関数の本体に答えを書いてから")
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
    (lambda p, s, loss: (loss, p, s), "(losses, params, opt_state)"),
    (lambda p, s, loss: (s, p, loss), "(opt_state, params, losses)"),
    (lambda p, s, loss: (p, loss, s), "(params, losses, opt_state)"),
])
def test_6_4_3_wrong_order_is_named(order, got):
    # 順番違いは「内部の問題」ではなく、期待と実際を並べた不合格
    expect("6.4-3", _with_out(order), "fail", "順番は (params, opt_state, losses) のはず", got)


def test_6_4_3_list_is_accepted():
    # タプルでもリストでもよい（規則は 1 つ: 長さ 3 の並び）
    expect("6.4-3", _with_out(lambda p, s, loss: [p, s, loss]), "pass")


def test_6_4_3_bad_outputs():
    expect("6.4-3", _with_out(lambda p, s, loss: (p, s, loss, loss)), "fail", "3 つ組", "4 要素")
    expect("6.4-3", _with_out(lambda p, s, loss: {"params": p}), "fail", "3 つ組", "dict")
    expect("6.4-3", _with_out(lambda p, s, loss: (p, s, jnp.stack([loss, loss]))), "fail",
           "3 つ組", "(7,)")


def test_6_4_3_loss_called_twice_in_one_trace():
    # loss_fn を 1 回のトレースの中で 2 度呼んでも、コンパイルは 1 回: 「jit し直し」とは言わない
    def twice(loss_fn, optimizer, mesh):
        def one(carry, batch):
            params, opt_state = carry
            loss = loss_fn(params, *batch)
            grads = jax.grad(loss_fn)(params, *batch)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), loss

        @jax.jit
        def upd(params, opt_state, xs, ys):
            (params, opt_state), losses = jax.lax.scan(one, (params, opt_state), (xs, ys))
            return params, opt_state, losses
        batch = NamedSharding(mesh, BATCH)
        return lambda p, s, xs, ys: upd(p, s, jax.device_put(xs, batch), jax.device_put(ys, batch))
    expect("6.4-3", twice, "pass", "コンパイルは 1 回")


def test_6_4_3_no_jit_is_named():
    def no_jit(loss_fn, optimizer, mesh):
        step = _update(loss_fn, optimizer)
        batch = NamedSharding(mesh, BATCH)
        return lambda p, s, xs, ys: step(p, s, jax.device_put(xs, batch), jax.device_put(ys, batch))
    expect("6.4-3", no_jit, "fail", "jit がないか")


def test_6_4_3_recompile_on_changed_types_is_not_called_rejit():
    # 1 ステップ目だけ出力の dtype を変える → 2 ステップ目だけ再トレース: 「呼ぶたびに jit し直し」とは言わない
    def drift(loss_fn, optimizer, mesh):
        inner = _update(loss_fn, optimizer)

        @jax.jit
        def run(params, opt_state, xs, ys):  # 入口で float32 に戻すので、2 回目は型が違うだけでエラーにはならない
            return inner(jax.tree.map(lambda v: v.astype(jnp.float32), params), opt_state, xs, ys)
        batch = NamedSharding(mesh, BATCH)
        calls = [0]

        def train_step(p, s, xs, ys):
            p, s, losses = run(p, s, jax.device_put(xs, batch), jax.device_put(ys, batch))
            calls[0] += 1
            if calls[0] == 1:
                p = {k: (v.astype(jnp.float16) if k == "b1" else v) for k, v in p.items()}
            return p, s, losses
        return train_step
    r = run_check("6.4-3", drift)
    assert r.status == "fail", r.message
    assert "トレースは最初の 1 回だけのはず" in r.message and "呼ぶたびに" not in r.message, r.message


def test_6_4_3_python_loop_of_jitted_steps_is_not_a_scan():
    # 1 ステップだけを jit し、K ステップは jit の外の Python ループで呼ぶ: loss_fn のトレースは 1 回だが、
    # 1 回の呼び出しが K 回のディスパッチになり、scan で回っていない（issue 28 item 6）
    def loop_of_jits(loss_fn, optimizer, mesh):
        one = jax.jit(_one(loss_fn, optimizer))
        batch = NamedSharding(mesh, BATCH)

        def train_step(p, s, xs, ys):
            xs, ys = jax.device_put(xs, batch), jax.device_put(ys, batch)
            carry, losses = (p, s), []
            for k in range(xs.shape[0]):
                carry, loss = one(carry, (xs[k], ys[k]))
                losses.append(loss)
            return *carry, jnp.stack(losses)
        return train_step
    expect("6.4-3", loop_of_jits, "fail", "scan がない", "Python のループ")


def test_counting_compiles_sees_a_compile_that_traces_do_not():
    # 同じ型の入力を別のデバイスに置くと、jit はトレースし直さずにコンパイルだけし直す（6.4-3 の「コンパイルは 1 回」）
    from ch6.checking import counting_compiles

    traces = []

    @jax.jit
    def f(x):
        traces.append(1)
        return x * 3.0

    first, last = jax.devices()[0], jax.devices()[-1]
    f(jax.device_put(jnp.ones(5), first)).block_until_ready()
    with counting_compiles() as same:
        f(jax.device_put(jnp.ones(5), first)).block_until_ready()
    with counting_compiles() as moved:
        f(jax.device_put(jnp.ones(5), last)).block_until_ready()
    assert same[0] == 0 and len(traces) == 1
    if first != last:
        assert moved[0] >= 1 and len(traces) == 1, (moved, traces)
