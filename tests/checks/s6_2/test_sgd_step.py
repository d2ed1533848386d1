"""6.2 のチェック: 参照解と別の正解は通り、典型的な誤りは問題を名指しして落ちる。

デバイス数（--devices）が 1 や 2 だと区別できない誤り（向きが逆の ring shift など）は、
区別できるときだけ「落ちること」を確かめます。issue 13 の回帰（shard_map + psum の 6.2-1、
関数でなく配列を渡した 6.2-2）にはそれぞれのテストがあります。
"""
import functools

import jax
import jax.numpy as jnp
import pytest
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec as P

from ch6 import run_check
from tests.checkhelp import boom, expect, not_done  # noqa: E402,F401

N = jax.device_count()


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


def test_6_2_1_shard_map_with_psum_is_accepted():
    # issue 13 の回帰: shard_map の中の lax.psum は jaxpr で psum_invariant と呼ばれる。これも psum として認める
    def with_shard_map(xs):
        mesh = jax.make_mesh((jax.device_count(),), ("i",))
        xs = jax.device_put(xs, NamedSharding(mesh, P("i")))
        return jax.shard_map(lambda x: x / lax.psum(x.sum(), "i"), mesh=mesh, in_specs=P("i"), out_specs=P("i"))(xs)

    expect("6.2-1", with_shard_map, "pass", "正解", "psum")


# 6.2-2 --------------------------------------------------------------------------------
# テストで使う損失と学習率（チェックはこれとも違う損失・学習率・軸の名前を渡す）
LR = 0.1


def mse_loss(params, x, y):
    return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)


def sgd_ref(params, x, y, loss_fn, lr, axis_name):
    grads = jax.grad(loss_fn)(params, x, y)
    grads = lax.pmean(grads, axis_name)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


def sgd_alt(params, x, y, loss_fn, lr, axis_name):
    # psum で合計して軸の大きさで割る（= pmean）。value_and_grad でもよい
    _, grads = jax.value_and_grad(loss_fn)(params, x, y)
    grads = jax.tree.map(lambda g: lax.psum(g, axis_name) / lax.psum(1, axis_name), grads)
    return {k: params[k] - lr * grads[k] for k in params}


def sgd_mean_loss(params, x, y, loss_fn, lr, axis_name):
    # shard_map（check_vma=True）の直し方を pmap に持ち込んだ誤り: pmap（check_vma=False）では
    # pmean の転置が psum / n なので、各デバイスの勾配は自分のデータの勾配のまま（平均されない）
    grads = jax.grad(lambda p: lax.pmean(loss_fn(p, x, y), axis_name))(params)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


@pytest.mark.parametrize("fn", [sgd_ref, sgd_alt])
def test_6_2_2_correct(fn):
    expect("6.2-2", fn, "pass", "正解", "pmean")


def test_6_2_2_notebook_call_matches_a_single_device_step():
    # ノートブックの呼び方（static_broadcasted_argnums）で、全データの 1 ステップと一致する
    params = {"w": jnp.zeros(3), "b": jnp.float32(0.0)}
    x = jax.random.normal(jax.random.key(0), (N, 4, 3))
    y = x[..., 0] * 2.0 + 1.0
    out = jax.pmap(sgd_ref, axis_name="devices", in_axes=(None, 0, 0), static_broadcasted_argnums=(3, 4, 5))(
        params, x, y, mse_loss, LR, "devices")
    grads = jax.grad(mse_loss)(params, x.reshape(-1, 3), y.reshape(-1))
    for k in params:
        assert jnp.allclose(out[k][0], params[k] - LR * grads[k], atol=1e-5)


def sgd_no_mean(params, x, y, loss_fn, lr, axis_name):
    grads = jax.grad(loss_fn)(params, x, y)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


def sgd_psum(params, x, y, loss_fn, lr, axis_name):
    grads = lax.psum(jax.grad(loss_fn)(params, x, y), axis_name)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


def sgd_gather(params, x, y, loss_fn, lr, axis_name):
    # 全データを集めて各デバイスで全バッチの勾配を計算（値は正しいが通信が多い）
    xa = lax.all_gather(x, axis_name, tiled=True)
    ya = lax.all_gather(y, axis_name, tiled=True)
    grads = jax.grad(loss_fn)(params, xa, ya)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


def sgd_fixed_axis(params, x, y, loss_fn, lr, axis_name):
    # ノートブックの軸の名前 "devices" を書いてしまった
    grads = lax.pmean(jax.grad(loss_fn)(params, x, y), "devices")
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


def sgd_fixed_lr(params, x, y, loss_fn, lr, axis_name):
    # ノートブックの学習率 LR を書いてしまった
    grads = lax.pmean(jax.grad(loss_fn)(params, x, y), axis_name)
    return jax.tree.map(lambda p, g: p - LR * g, params, grads)


def sgd_fixed_loss(params, x, y, loss_fn, lr, axis_name):
    # ノートブックの損失 mse_loss を書いてしまった
    grads = lax.pmean(jax.grad(mse_loss)(params, x, y), axis_name)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


def sgd_three_args(params, x, y):
    # 以前の問題文の形（引数 3 つ）
    return params


def test_6_2_2_wrong():
    if N > 1:
        expect("6.2-2", sgd_no_mean, "fail", "平均していません", "pmean")
        expect("6.2-2", sgd_mean_loss, "fail", "平均していません")
    else:  # 1 デバイスでは平均しなくても同じ値: vmap（軸の大きさ 3）で見つかる
        expect("6.2-2", sgd_no_mean, "fail", "3 グループ")
    expect("6.2-2", sgd_psum, "fail", "倍大きすぎます", "psum")
    expect("6.2-2", sgd_gather, "fail", "all_gather", "pmean")
    expect("6.2-2", sgd_fixed_axis, "fail", "'devices'", "引数 axis_name", "'replicas'")
    expect("6.2-2", sgd_fixed_lr, "fail", "値が違います", "引数 lr")
    expect("6.2-2", sgd_fixed_loss, "fail", "値が違います", "引数 loss_fn")
    expect("6.2-2", sgd_three_args, "fail", "6 つの引数")
    expect("6.2-2", lambda p, x, y, L, lr, a: p, "fail", "値が違います")
    expect("6.2-2", lambda p, x, y, L, lr, a: (p["w"], p["b"]), "fail", "dict")
    expect("6.2-2", not_done, "not_done")
    expect("6.2-2", boom, "error", "ZeroDivisionError")


def test_6_2_2_array_instead_of_function_is_not_internal():
    # issue 13 の回帰: 関数ではなく配列を渡すと、以前は「チェッカー内部の問題」になった
    expect("6.2-2", jnp.ones(3), "fail", "関数を渡してください")
    expect("6.2-2", {"w": jnp.zeros(2), "b": jnp.float32(0)}, "fail", "関数を渡してください")  # 呼んだ結果の dict


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


def test_6_2_unbound_axis_gives_no_shard_map_advice():
    # issue 13: JAX の原文の助言（"please call psum under `jax.shard_map`"）は pmap の演習には誤り。日本語の説明だけを出す
    wrong_name = lambda xs: jax.pmap(lambda x: x / lax.psum(x.sum(), "j"), axis_name="i")(xs)  # noqa: E731
    r = run_check("6.2-1", wrong_name)
    assert r.status == "error" and "軸の名前 j" in r.message, r.message
    assert "shard_map" not in r.message, r.message
    r = run_check("6.2-2", sgd_fixed_axis)
    assert r.status == "fail" and "shard_map" not in r.message, r.message
