"""6.2 のチェックのテストが共有する部品。"""
import jax
import jax.numpy as jnp
from jax import lax


def sgd_fixed_axis(params, x, y, mask, loss_fn, lr, axis_name):
    # ノートブックの軸の名前 "devices" を書いてしまった
    count = lax.psum(jnp.sum(mask), "devices")
    grads = lax.psum(jax.grad(lambda p: jnp.sum(mask * loss_fn(p, x, y)))(params), "devices")
    return jax.tree.map(lambda p, g: p - lr * g / count, params, grads)
