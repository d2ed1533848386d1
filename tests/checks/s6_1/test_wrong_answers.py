"""6.1 の問題文から書いた、ありそうな誤答（issue 39）。6.1 のチェックはデバイスの数に依らない（vmap だけ）ので、
1・3・8 デバイスのどれでも同じ言葉で落ちる。"""
import jax
import jax.numpy as jnp
from jax import lax

from tests.checkhelp import expect


def rbf(x, c, g):
    return jnp.exp(-g * jnp.sum((x - c) ** 2))


def test_gammas_shared_across_centers():
    def rbf_features(kernel, x, centers, gammas):
        return jax.vmap(kernel, in_axes=(None, 0, None))(x, centers, gammas)
    expect("6.1-1", rbf_features, "fail", "引数 g", "gammas は中心ごと")


def test_example_kernel_instead_of_the_argument():
    def rbf_features(kernel, x, centers, gammas):
        return jax.vmap(rbf, in_axes=(None, 0, 0))(x, centers, gammas)
    expect("6.1-1", rbf_features, "fail", "一度も呼ばれていません")


def test_lengths_batched_on_axis_1():
    def time_major_apply(fn, seqs, lengths):
        return jax.vmap(fn, in_axes=(1, 1), out_axes=1)(seqs, lengths)
    expect("6.1-2", time_major_apply, "fail", "lengths のバッチは 0 軸目")


def test_two_levels_only():
    def batched_distances(pair_fn, Xs, Y):
        return jax.vmap(jax.vmap(pair_fn, in_axes=(0, None)), in_axes=(0, None))(Xs, Y)
    expect("6.1-3", batched_distances, "fail", "3 段重ね")


def test_elementwise_clipping():
    def clipped_mean_grad(loss_fn, params, xs, ys, max_norm):
        g = jax.vmap(jax.grad(loss_fn), in_axes=(None, 0, 0))(params, xs, ys)
        return jax.tree.map(lambda leaf: jnp.mean(jnp.clip(leaf, -max_norm, max_norm), axis=0), g)
    expect("6.1-4", clipped_mean_grad, "fail", "要素ごとに ±max_norm")


def test_squared_norm():
    def clipped_mean_grad(loss_fn, params, xs, ys, max_norm):
        def one(x, y):
            g = jax.grad(loss_fn)(params, x, y)
            scale = jnp.minimum(1.0, max_norm / sum(jnp.sum(leaf ** 2) for leaf in jax.tree.leaves(g)))
            return jax.tree.map(lambda leaf: leaf * scale, g)
        return jax.tree.map(lambda leaf: jnp.mean(leaf, 0), jax.vmap(one)(xs, ys))
    expect("6.1-4", clipped_mean_grad, "fail", "ノルムの 2 乗")


def test_first_learning_rate_for_every_model():
    def ensemble_sgd_step(loss_fn, stacked, xs, ys, lrs):
        def one(p, lr):
            g = jax.grad(lambda q: jnp.mean(jax.vmap(loss_fn, in_axes=(None, 0, 0))(q, xs, ys)))(p)
            return jax.tree.map(lambda a, b: a - lr * b, p, g)
        return jax.vmap(one, in_axes=(0, None))(stacked, lrs[0])
    expect("6.1-5", ensemble_sgd_step, "fail", "同じ学習率")


def batchnorm(reduce=lax.pmean, eps_arg=True):
    def batchnorm_image(x, eps=1e-5):
        mean = reduce(jnp.mean(x, axis=(0, 1)), "batch")
        var = reduce(jnp.mean((x - mean) ** 2, axis=(0, 1)), "batch")
        return (x - mean) / jnp.sqrt(var + (eps if eps_arg else 1e-5))
    return batchnorm_image


def test_psum_instead_of_pmean():
    expect("6.1-6", batchnorm(reduce=lax.psum), "fail", "lax.psum は和", "lax.pmean")


def test_eps_fixed_instead_of_the_argument():
    expect("6.1-6", batchnorm(eps_arg=False), "fail", "eps=0.5", "引数の値")
