"""6.1-5 ensemble_sgd_step のチェック（ch6/checks/s6_1/ensemble_sgd_step.py）のテスト。"""
import jax
import jax.numpy as jnp
import pytest

from tests.checkhelp import expect, not_done


# 6.1-5 --------------------------------------------------------------------------------
def sgd_ref(loss_fn, stacked_params, xs, ys, lrs):
    def one_model(params, lr):
        def mean_loss(p):
            return jnp.mean(jax.vmap(loss_fn, in_axes=(None, 0, 0))(p, xs, ys))

        grads = jax.grad(mean_loss)(params)
        return jax.tree.map(lambda p, g: p - lr * g, params, grads)

    return jax.vmap(one_model, in_axes=(0, 0))(stacked_params, lrs)


def sgd_per_example(loss_fn, stacked_params, xs, ys, lrs):
    """サンプルごとの勾配を平均しても同じ（平均の勾配 = 勾配の平均）。"""
    def one_model(params, lr):
        g = jax.vmap(jax.grad(loss_fn), in_axes=(None, 0, 0))(params, xs, ys)
        return jax.tree.map(lambda p, v: p - lr * v.mean(0), params, g)

    return jax.vmap(one_model)(stacked_params, lrs)


@pytest.mark.parametrize("fn", [sgd_ref, sgd_per_example, jax.jit(sgd_ref, static_argnums=0)])
def test_6_1_5_correct(fn):
    expect("6.1-5", fn, "pass")


def test_6_1_5_a_python_loop_over_the_samples_is_caught():
    """回帰（ミューテーションの生き残り）: 内側のサンプルの vmap を Python のループにしても通っていた。"""
    def sample_loop(loss_fn, stacked_params, xs, ys, lrs):
        def one_model(params, lr):
            def mean_loss(p):
                return jnp.mean(jnp.stack([loss_fn(p, x, y) for x, y in zip(xs, ys)]))

            grads = jax.grad(mean_loss)(params)
            return jax.tree.map(lambda p, g: p - lr * g, params, grads)

        return jax.vmap(one_model)(stacked_params, lrs)

    expect("6.1-5", sample_loop, "fail", "サンプルの数", "Python のループ")


def test_6_1_5_wrong():
    def model_loop(loss_fn, stacked_params, xs, ys, lrs):
        outs = [sgd_ref(loss_fn, jax.tree.map(lambda a: a[i:i + 1], stacked_params), xs, ys, lrs[i:i + 1])  # noqa: B023  その回のうちに使う
                for i in range(lrs.shape[0])]
        return jax.tree.map(lambda *v: jnp.concatenate(v), *outs)

    def same_lr(loss_fn, stacked_params, xs, ys, lrs):
        return sgd_ref(loss_fn, stacked_params, xs, ys, jnp.full_like(lrs, lrs[0]))

    def summed(loss_fn, stacked_params, xs, ys, lrs):
        return sgd_ref(loss_fn, stacked_params, xs, ys, lrs * xs.shape[0])

    def ascent(loss_fn, stacked_params, xs, ys, lrs):
        return sgd_ref(loss_fn, stacked_params, xs, ys, -lrs)

    def grads_only(loss_fn, stacked_params, xs, ys, lrs):
        return jax.tree.map(lambda a, b: (a - b) / lrs.reshape((-1,) + (1,) * (a.ndim - 1)),
                            stacked_params, sgd_ref(loss_fn, stacked_params, xs, ys, lrs))

    def no_model_vmap(loss_fn, stacked_params, xs, ys, lrs):
        return jax.vmap(loss_fn, in_axes=(None, 0, 0))(stacked_params, xs, ys)

    expect("6.1-5", model_loop, "fail", "モデルの数", "Python のループ")
    expect("6.1-5", same_lr, "fail", "同じ学習率")
    expect("6.1-5", summed, "fail", "合計")
    expect("6.1-5", ascent, "fail", "勾配の向き")
    expect("6.1-5", grads_only, "fail", "勾配を返しています")
    expect("6.1-5", no_model_vmap, "fail", "params['W'] は形 (5, 4) のはずが、(3, 5, 4)")
    expect("6.1-5", lambda loss_fn, ps, xs, ys, lrs: ps, "fail", "一度も呼ばれていません")
    expect("6.1-5", not_done, "not_done")
