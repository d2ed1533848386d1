"""6.2 のチェック: 参照解と別の正解は通り、典型的な誤りは問題を名指しして落ちる。

デバイス数（--devices）が 1 や 2 だと区別できない誤り（向きが逆の ring shift など）は、
区別できるときだけ「落ちること」を確かめます。
"""
import functools

import jax
import jax.numpy as jnp
import pytest
from jax import lax
from jax.sharding import PartitionSpec as P

from ch6 import run_check
from ch6.checks.s6_2 import AXIS, LR, LR_LOGISTIC, logistic_loss, mse_loss

N = jax.device_count()


def not_done(*args, **kwargs):
    raise NotImplementedError


def boom(*args, **kwargs):
    raise ZeroDivisionError("division by zero")


def expect(ex, fn, want_status, *words):
    r = run_check(ex, fn)
    assert r.status == want_status, r.message
    for w in words:
        assert w in r.message, f"{w!r} not in {r.message!r}"


# 6.2-1 --------------------------------------------------------------------------------
def normalize_ref(xs):
    return jax.pmap(lambda x: x / lax.psum(x.sum(), "i"), axis_name="i")(xs)


def normalize_alt(xs):
    # 各デバイスの行ベクトルを psum してから合計しても同じ
    return jax.pmap(lambda x: x / jnp.sum(lax.psum(x, "d")), axis_name="d")(xs)


@pytest.mark.parametrize("fn", [normalize_ref, normalize_alt, jax.jit(normalize_ref)])
def test_6_2_1_correct(fn):
    expect("6.2-1", fn, "pass", "正解", "psum")


def test_6_2_1_wrong():
    local = lambda xs: jax.pmap(lambda x: x / x.sum())(xs)  # noqa: E731
    expect("6.2-1", local, "fail", "psum")
    if N > 1:
        expect("6.2-1", local, "fail", "デバイス）の中だけ")
    expect("6.2-1", lambda xs: xs / xs.sum(), "fail", "psum が見つかりません")
    loop = lambda xs: jnp.stack([x / sum(r.sum() for r in xs) for x in xs])  # noqa: E731  Python のループ
    expect("6.2-1", loop, "fail", "psum が見つかりません")
    # 決め打ちの出力（5 デバイスでは隠し入力が (5, 3) から始まるので、形で見つかる）
    expect("6.2-1", lambda xs: jnp.ones((N, 5)) / (5 * N), "fail", "値が違います" if N != 5 else "形が違います")
    transposed = lambda xs: jax.pmap(lambda x: x / lax.psum(x.sum(), "i"), axis_name="i", out_axes=1)(xs)  # noqa: E731
    expect("6.2-1", transposed, "fail", "転置", "out_axes")
    wrong_name = lambda xs: jax.pmap(lambda x: x / lax.psum(x.sum(), "j"), axis_name="i")(xs)  # noqa: E731
    expect("6.2-1", wrong_name, "error", "NameError")
    if N > 1:
        pmean = lambda xs: jax.pmap(lambda x: x / lax.pmean(x.sum(), "i"), axis_name="i")(xs)  # noqa: E731
        expect("6.2-1", pmean, "fail", "値が違います")
    expect("6.2-1", not_done, "not_done", "まだ解答されていません")
    expect("6.2-1", boom, "error", "ZeroDivisionError")
    expect("6.2-1", "normalize", "fail", "関数を渡してください")


# 6.2-2 --------------------------------------------------------------------------------
def sgd_ref(params, x, y):
    grads = jax.grad(mse_loss)(params, x, y)
    grads = lax.pmean(grads, AXIS)
    return jax.tree.map(lambda p, g: p - LR * g, params, grads)


def sgd_alt(params, x, y):
    # psum で合計して軸の大きさで割る（= pmean）。value_and_grad でもよい
    _, grads = jax.value_and_grad(mse_loss)(params, x, y)
    grads = jax.tree.map(lambda g: lax.psum(g, AXIS) / lax.psum(1, AXIS), grads)
    return {k: params[k] - LR * grads[k] for k in params}


@pytest.mark.parametrize("fn", [sgd_ref, sgd_alt])
def test_6_2_2_correct(fn):
    expect("6.2-2", fn, "pass", "正解", "pmean")


def sgd_no_mean(params, x, y):
    grads = jax.grad(mse_loss)(params, x, y)
    return jax.tree.map(lambda p, g: p - LR * g, params, grads)


def sgd_psum(params, x, y):
    grads = lax.psum(jax.grad(mse_loss)(params, x, y), AXIS)
    return jax.tree.map(lambda p, g: p - LR * g, params, grads)


def sgd_gather(params, x, y):
    # 全データを集めて各デバイスで全バッチの勾配を計算（値は正しいが通信が多い）
    xa = lax.all_gather(x, AXIS, tiled=True)
    ya = lax.all_gather(y, AXIS, tiled=True)
    grads = jax.grad(mse_loss)(params, xa, ya)
    return jax.tree.map(lambda p, g: p - LR * g, params, grads)


def test_6_2_2_wrong():
    if N > 1:
        expect("6.2-2", sgd_no_mean, "fail", "平均していません", "pmean")
    else:  # 1 デバイスでは平均しなくても同じ値: vmap（軸の大きさ 3）で見つかる
        expect("6.2-2", sgd_no_mean, "fail", "3 グループ")
    expect("6.2-2", sgd_psum, "fail", "倍大きすぎます", "psum")
    expect("6.2-2", sgd_gather, "fail", "all_gather", "pmean")
    # 学習率 0.25 は LR の 2.5 倍: どのデバイス数 n でも「n 倍（psum）」と取り違えない
    wrong_lr = lambda p, x, y: jax.tree.map(lambda a, g: a - 0.25 * g, p, lax.pmean(jax.grad(mse_loss)(p, x, y), AXIS))  # noqa: E731
    expect("6.2-2", wrong_lr, "fail", "値が違います", "学習率")
    expect("6.2-2", lambda p, x, y: p, "fail", "値が違います")
    expect("6.2-2", lambda p, x, y: (p["w"], p["b"]), "fail", "dict")
    expect("6.2-2", lambda p, x, y: lax.pmean(jax.grad(mse_loss)(p, x, y), "batch"), "error", "NameError")
    expect("6.2-2", not_done, "not_done")
    expect("6.2-2", boom, "error", "ZeroDivisionError")


# 6.2-3 --------------------------------------------------------------------------------
def ring_ref(xs, shift):
    n = jax.device_count()
    perm = [(i, (i + shift) % n) for i in range(n)]
    return jax.pmap(lambda x: lax.ppermute(x, "ring", perm), axis_name="ring")(xs)


def ring_alt(xs, shift):
    # 受信先 j から見て送信元 (j - shift) % n を書いても同じ置換
    n = xs.shape[0]
    perm = [((j - shift) % n, j) for j in range(n)]
    return jax.pmap(functools.partial(lax.ppermute, axis_name="r", perm=perm), axis_name="r")(xs)


@pytest.mark.parametrize("fn", [ring_ref, ring_alt])
def test_6_2_3_correct(fn):
    expect("6.2-3", fn, "pass", "正解", "ppermute")


def test_6_2_3_wrong():
    backwards = lambda xs, s: ring_ref(xs, -s)  # noqa: E731
    if N > 2:
        expect("6.2-3", backwards, "fail", "向きが逆", "(送信元, 送信先)")
        expect("6.2-3", lambda xs, s: ring_ref(xs, 1), "fail", "shift=-1", "引数 shift を使って")
    else:  # 2 デバイス以下では逆向きも同じ置換
        expect("6.2-3", backwards, "pass")
    if N > 1:
        same = lambda xs, s: jax.pmap(lambda x: lax.ppermute(x, "r", [(i, i) for i in range(N)]), axis_name="r")(xs)  # noqa: E731
        expect("6.2-3", same, "fail", "動いていません")
    expect("6.2-3", lambda xs, s: jnp.roll(xs, s, axis=0), "fail", "ppermute が見つかりません", "jnp.roll")
    loop = lambda xs, s: jnp.stack([xs[(i - s) % N] for i in range(N)])  # noqa: E731  Python のループ
    expect("6.2-3", loop, "fail", "ppermute が見つかりません")
    gather = lambda xs, s: jax.pmap(  # noqa: E731
        lambda x: lax.all_gather(x, "r")[(lax.axis_index("r") - s) % N], axis_name="r")(xs)
    expect("6.2-3", gather, "fail", "ppermute が見つかりません", "all_gather")
    expect("6.2-3", lambda xs, s: xs[:, :2], "fail", "形が違います")
    bad_perm = lambda xs, s: jax.pmap(lambda x: lax.ppermute(x, "r", [(0, 0), (0, 0)]), axis_name="r")(xs)  # noqa: E731
    expect("6.2-3", bad_perm, "error", "ValueError")
    expect("6.2-3", not_done, "not_done")
    expect("6.2-3", boom, "error", "ZeroDivisionError")


# 6.2-4 --------------------------------------------------------------------------------
def _jit_shard_map(body, mesh, **kw):
    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P(), P("data"), P("data")), out_specs=P(), **kw))


def _update(params, grads):
    return jax.tree.map(lambda p, g: p - LR_LOGISTIC * g, params, grads)


def migrated_ref(mesh, params, x, y):
    def body(params, x, y):
        loss, grads = jax.value_and_grad(lambda p: lax.pmean(logistic_loss(p, x, y), "data"))(params)
        return _update(params, grads), loss
    return _jit_shard_map(body, mesh)(params, x, y)


def migrated_pcast(mesh, params, x, y):
    # パラメータを「デバイスごとに異なりうる」値にしてから grad し、pmean する（pmap と同じ書き順）
    def body(params, x, y):
        local = jax.tree.map(lambda a: lax.pcast(a, "data", to="varying"), params)
        loss, grads = jax.value_and_grad(logistic_loss)(local, x, y)
        return _update(params, lax.pmean(grads, "data")), lax.pmean(loss, "data")
    return _jit_shard_map(body, mesh)(params, x, y)


def migrated_no_vma(mesh, params, x, y):
    # pmap と同じ check_vma=False なら、元のコードをそのまま写せる
    def body(params, x, y):
        loss, grads = jax.value_and_grad(logistic_loss)(params, x, y)
        return _update(params, lax.pmean(grads, "data")), lax.pmean(loss, "data")
    return _jit_shard_map(body, mesh, check_vma=False)(params, x, y)


@pytest.mark.parametrize("fn", [migrated_ref, migrated_pcast, migrated_no_vma])
def test_6_2_4_correct(fn):
    expect("6.2-4", fn, "pass", "正解", "レガシー版と同じ")


def migrated_naive(mesh, params, x, y):
    def body(params, x, y):
        loss, grads = jax.value_and_grad(logistic_loss)(params, x, y)
        return _update(params, lax.pmean(grads, "data")), lax.pmean(loss, "data")
    return _jit_shard_map(body, mesh)(params, x, y)


def migrated_stacked(mesh, params, x, y):
    def body(params, x, y):
        loss, grads = jax.value_and_grad(lambda p: lax.pmean(logistic_loss(p, x, y), "data"))(params)
        new = _update(params, grads)
        return jax.tree.map(lambda a: a[None], new), loss
    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P(), P("data"), P("data")),
                                 out_specs=(P("data"), P())))(params, x, y)


@functools.partial(jax.jit, static_argnums=0)
def migrated_plain_jit(mesh, params, x, y):
    # jit + NamedSharding への移行としては正しいが、この演習は shard_map を求める
    loss, grads = jax.value_and_grad(logistic_loss)(params, x, y)
    return _update(params, grads), loss


def migrated_gather(mesh, params, x, y):
    def body(params, x, y):
        xa, ya = lax.all_gather(x, "data", tiled=True), lax.all_gather(y, "data", tiled=True)
        loss, grads = jax.value_and_grad(logistic_loss)(params, xa, ya)
        return _update(params, grads), loss
    return _jit_shard_map(body, mesh, check_vma=False)(params, x, y)



def migrated_local_loss(mesh, params, x, y):
    def body(params, x, y):
        loss, grads = jax.value_and_grad(logistic_loss)(params, x, y)
        return _update(params, lax.pmean(grads, "data")), loss
    return _jit_shard_map(body, mesh, check_vma=False)(params, x, y)


def test_6_2_4_wrong():
    if N > 1:
        expect("6.2-4", migrated_naive, "fail", f"{N} 倍大きすぎます", "損失を pmean")
        expect("6.2-4", migrated_stacked, "fail", "積み重な", "out_specs=P()")
        expect("6.2-4", migrated_local_loss, "fail", "loss", "値が違います")
    expect("6.2-4", migrated_plain_jit, "fail", "shard_map が見つかりません")
    expect("6.2-4", migrated_gather, "fail", "all-gather")
    expect("6.2-4", lambda mesh, p, x, y: p, "fail", "2 つ組")
    wrong_spec = lambda mesh, p, x, y: jax.jit(jax.shard_map(  # noqa: E731
        lambda p, x, y: (p, lax.pmean(logistic_loss(p, x, y), "data")), mesh=mesh,
        in_specs=(P(), P(), P()), out_specs=P()))(p, x, y)
    expect("6.2-4", wrong_spec, "error", "in_specs")
    expect("6.2-4", not_done, "not_done")
    expect("6.2-4", boom, "error", "ZeroDivisionError")
