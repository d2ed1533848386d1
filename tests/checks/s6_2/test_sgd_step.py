"""6.2-2 sgd_step のチェック（ch6/checks/s6_2/sgd_step.py）のテスト: 有効な件数がデバイスごとに違うバッチ（mask）。"""
import jax
import jax.numpy as jnp
import pytest
from jax import lax

from tests.checkhelp import N, boom, expect, not_done
from tests.checks.s6_2.common import sgd_fixed_axis

# テストで使う損失と学習率（チェックはこれとも違う損失・学習率・軸の名前を渡す）
LR = 0.1


def squared_errors(params, x, y):
    return (x @ params["w"] + params["b"] - y) ** 2


def _update(params, grads, rate):
    return jax.tree.map(lambda p, g: p - rate * g, params, grads)


def sgd_ref(params, x, y, mask, loss_fn, lr, axis_name):
    count = lax.psum(jnp.sum(mask), axis_name)
    grads = lax.psum(jax.grad(lambda p: jnp.sum(mask * loss_fn(p, x, y)))(params), axis_name)
    return jax.tree.map(lambda p, g: p - lr * g / count, params, grads)


def sgd_weights(params, x, y, mask, loss_fn, lr, axis_name):
    # 各デバイスの平均を、件数の割合で重みづけして psum（value_and_grad と jnp.where でも同じ）
    count = jnp.sum(mask)
    local_mean = lambda p: jnp.sum(jnp.where(mask > 0, loss_fn(p, x, y), 0.0)) / jnp.maximum(count, 1)  # noqa: E731
    _, grads = jax.value_and_grad(local_mean)(params)
    share = count / lax.psum(count, axis_name)
    return _update(params, jax.tree.map(lambda g: lax.psum(g * share, axis_name), grads), lr)


def sgd_global_loss(params, x, y, mask, loss_fn, lr, axis_name):
    # 全体の平均損失を作ってから grad し、その勾配を psum（pmap では各デバイスの勾配は自分の項の分だけ）
    def total(p):
        return jnp.sum(mask * loss_fn(p, x, y)) / lax.psum(jnp.sum(mask), axis_name)
    return _update(params, lax.psum(jax.grad(total)(params), axis_name), lr)


@pytest.mark.parametrize("fn", [sgd_ref, sgd_weights, sgd_global_loss])
def test_6_2_2_correct(fn):
    expect("6.2-2", fn, "pass", "psum")


def test_6_2_2_notebook_call_matches_the_masked_mean_step():
    # ノートブックの呼び方（static_broadcasted_argnums）で、有効な行だけの平均の 1 ステップと一致する
    params = {"w": jnp.zeros(3), "b": jnp.float32(0.0)}
    x = jax.random.normal(jax.random.key(0), (N, 4, 3))
    y = x[..., 0] * 2.0 + 1.0
    mask = (jnp.arange(4)[None, :] < (jnp.arange(N) % 4 + 1)[:, None]).astype(jnp.float32)
    out = jax.pmap(sgd_ref, axis_name="devices", in_axes=(None, 0, 0, 0), static_broadcasted_argnums=(4, 5, 6))(
        params, x, y, mask, squared_errors, LR, "devices")
    keep = mask.reshape(-1) > 0
    grads = jax.grad(lambda p: jnp.mean(squared_errors(p, x.reshape(-1, 3)[keep], y.reshape(-1)[keep])))(params)
    for k in params:
        assert jnp.allclose(out[k][0], params[k] - LR * grads[k], atol=1e-5)


def sgd_mean_of_means(params, x, y, mask, loss_fn, lr, axis_name):
    # 講義の pmap_step のまま: 各デバイスの平均の勾配を pmean（件数が違うと重みが違う）
    local = lambda p: jnp.sum(mask * loss_fn(p, x, y)) / jnp.sum(mask)  # noqa: E731
    return _update(params, lax.pmean(jax.grad(local)(params), axis_name), lr)


def sgd_no_mask(params, x, y, mask, loss_fn, lr, axis_name):
    return _update(params, lax.pmean(jax.grad(lambda p: jnp.mean(loss_fn(p, x, y)))(params), axis_name), lr)


def sgd_all_rows(params, x, y, mask, loss_fn, lr, axis_name):
    # mask は掛けたが、全部の行の数で割った
    local = lambda p: jnp.mean(mask * loss_fn(p, x, y))  # noqa: E731
    return _update(params, lax.pmean(jax.grad(local)(params), axis_name), lr)


def sgd_not_divided(params, x, y, mask, loss_fn, lr, axis_name):
    local = lambda p: jnp.sum(mask * loss_fn(p, x, y))  # noqa: E731
    return _update(params, lax.psum(jax.grad(local)(params), axis_name), lr)


def sgd_local_only(params, x, y, mask, loss_fn, lr, axis_name):
    local = lambda p: jnp.sum(mask * loss_fn(p, x, y)) / jnp.sum(mask)  # noqa: E731
    return _update(params, jax.grad(local)(params), lr)


def sgd_gather(params, x, y, mask, loss_fn, lr, axis_name):
    # 全データを集めて各デバイスで全バッチの勾配を計算（値は正しいが psum がない）
    xa, ya, ma = (lax.all_gather(a, axis_name, tiled=True) for a in (x, y, mask))
    grads = jax.grad(lambda p: jnp.sum(ma * loss_fn(p, xa, ya)) / jnp.sum(ma))(params)
    return _update(params, grads, lr)


def sgd_fixed_lr(params, x, y, mask, loss_fn, lr, axis_name):
    return sgd_ref(params, x, y, mask, loss_fn, LR, axis_name)


def sgd_fixed_loss(params, x, y, mask, loss_fn, lr, axis_name):
    return sgd_ref(params, x, y, mask, squared_errors, lr, axis_name)


def sgd_six_args(params, x, y, loss_fn, lr, axis_name):
    # 以前の問題文の形（mask なしの 6 つの引数）
    return params


def test_6_2_2_wrong():
    where = f"デバイス {N} 個" if N > 1 else "3 グループ"  # 1 デバイスでは平均の平均も正しい: vmap の 3 グループで見つかる
    expect("6.2-2", sgd_mean_of_means, "fail", "pmean したので", "件数の少ないデバイス", "lax.psum", where)
    expect("6.2-2", sgd_no_mask, "fail", "mask が使われていない", "パディング")
    expect("6.2-2", sgd_all_rows, "fail", "すべての行の数", "lax.psum(jnp.sum(mask), axis_name)")
    expect("6.2-2", sgd_not_divided, "fail", "割られていません")
    if N > 1:
        expect("6.2-2", sgd_local_only, "fail", "デバイスごとに違うパラメータ", "lax.psum")
    else:
        expect("6.2-2", sgd_local_only, "fail", "3 グループ")
    expect("6.2-2", sgd_gather, "fail", "all_gather", "psum")
    expect("6.2-2", sgd_fixed_axis, "fail", "'devices'", "直接書かれて", "axis_name")
    expect("6.2-2", sgd_fixed_lr, "fail", "学習率 0.1 相当", "引数 lr")
    expect("6.2-2", sgd_fixed_loss, "fail", "squared_errors", "引数の loss_fn")
    expect("6.2-2", sgd_six_args, "fail", "7 つの引数")
    expect("6.2-2", lambda p, x, y, m, L, lr, a: p, "fail", "そのまま返りました")
    expect("6.2-2", lambda p, x, y, m, L, lr, a: (p["w"], p["b"]), "fail", "dict")
    expect("6.2-2", not_done, "not_done")
    expect("6.2-2", boom, "error", "ZeroDivisionError")


def test_6_2_2_array_instead_of_function_is_not_internal():
    # issue 13 の回帰: 関数ではなく配列を渡すと、以前は「チェッカ内部の問題」になった
    expect("6.2-2", jnp.ones(3), "fail", "関数を渡してください")
    expect("6.2-2", {"w": jnp.zeros(2), "b": jnp.float32(0)}, "fail", "関数を渡してください")  # 呼んだ結果の dict
