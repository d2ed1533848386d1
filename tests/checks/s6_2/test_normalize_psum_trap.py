"""6.2-1: x / psum(x)（ベクトルをそのまま psum する、講義の落とし穴）と pmean で割る答えに、それぞれの言葉（issue 22 の 4）。"""
import jax
import jax.numpy as jnp
from jax import lax

from tests.checkhelp import expect

N = jax.device_count()


def vector_psum(xs):
    return jax.pmap(lambda x: x / lax.psum(x, "i"), axis_name="i")(xs)


def pmean_total(xs):
    return jax.pmap(lambda x: x / lax.pmean(jnp.sum(x), "i"), axis_name="i")(xs)


def test_x_over_psum_x_is_named():
    expect("6.2-1", vector_psum, "fail", "列ごと", "そのまま psum", "jnp.sum(x)")


def test_dividing_by_pmean_names_the_device_count():
    if N == 1:
        expect("6.2-1", pmean_total, "pass")  # 1 デバイスでは平均と合計が同じ
        return
    expect("6.2-1", pmean_total, "fail", f"ではなく {N}", "lax.pmean", "lax.psum")
