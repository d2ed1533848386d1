"""6.1-6 batchnorm_image: 分散の取り方の誤り（画像ごとの分散、画像ごとの分散の平均、sqrt の外の eps）に名前（issue 22 の 4）。"""
import jax.numpy as jnp
from jax import lax

from tests.checkhelp import expect


def _mean(x):
    return lax.pmean(jnp.mean(x, (0, 1)), "batch")


def per_image_variance(x, eps=1e-5):
    m = _mean(x)
    return (x - m) / jnp.sqrt(jnp.mean((x - m) ** 2, (0, 1)) + eps)  # 分散に pmean がない


def mean_of_image_variances(x, eps=1e-5):
    m = _mean(x)
    return (x - m) / jnp.sqrt(lax.pmean(jnp.var(x, (0, 1)), "batch") + eps)


def eps_outside_sqrt(x, eps=1e-5):
    m = _mean(x)
    return (x - m) / (jnp.sqrt(lax.pmean(jnp.mean((x - m) ** 2, (0, 1)), "batch")) + eps)


def moments(x, eps=1e-5):
    # E[x^2] - E[x]^2 でも正解
    m = _mean(x)
    return (x - m) / jnp.sqrt(lax.pmean(jnp.mean(x * x, (0, 1)), "batch") - m * m + eps)


def test_per_image_variance_is_named():
    expect("6.1-6", per_image_variance, "fail", "分散に lax.pmean がなく", "lax.pmean(…, 'batch')")


def test_mean_of_image_variances_is_named():
    expect("6.1-6", mean_of_image_variances, "fail", "画像ごとの分散の平均", "画像ごとの平均のずれ")


def test_eps_outside_the_sqrt_is_named():
    expect("6.1-6", eps_outside_sqrt, "fail", "sqrt の外", "sqrt(分散 + eps)")


def test_moments_pass():
    expect("6.1-6", moments, "pass")
