"""6.2-2 sgd_step のチェック（ch6/checks/s6_2/sgd_step.py）のテスト。"""
import jax
import jax.numpy as jnp
import pytest
from jax import lax

from tests.checkhelp import boom, expect, not_done
from tests.checks.s6_2.common import N, sgd_fixed_axis

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
