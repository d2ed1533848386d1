"""6.2 のチェックのテストが共有する部品。"""
import jax
from jax import lax

N = jax.device_count()


def sgd_fixed_axis(params, x, y, loss_fn, lr, axis_name):
    # ノートブックの軸の名前 "devices" を書いてしまった
    grads = lax.pmean(jax.grad(loss_fn)(params, x, y), "devices")
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)
