"""6.3c の問題文から書いた、ありそうな誤答（issue 39）。どれも 1・3・8 デバイスで、その誤りの名前で落ちるか、
そのデバイスの数では見分けられないことを正解の 1 行が言う。"""
import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

from ch6 import Status
from tests.checkhelp import N, expect

BATCH = P(("host", "local"))


def migrated(axis_name, grads_after=False):
    def make_migrated_step(mesh, loss_fn, lr):
        def body(params, x, y):
            if grads_after:   # pmap のまま: 勾配を pmean（shard_map はすでに psum している）
                loss, g = jax.value_and_grad(loss_fn)(params, x, y)
                g, loss = lax.pmean(g, axis_name), lax.pmean(loss, axis_name)
            else:
                loss, g = jax.value_and_grad(lambda p: lax.pmean(loss_fn(p, x, y), axis_name))(params)
            return jax.tree.map(lambda p, gg: p - lr * gg, params, g), loss
        return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P(), BATCH, BATCH), out_specs=P()))
    return make_migrated_step


def test_mean_over_one_mesh_axis():
    expect("6.3c-1", migrated("local"), Status.FAIL, "2 つの軸の両方で平均")


def test_gradients_averaged_after_the_automatic_psum():
    if N == 1:
        expect("6.3c-1", migrated(("host", "local"), grads_after=True), Status.PASS, "確かめられません")
    else:
        expect("6.3c-1", migrated(("host", "local"), grads_after=True), Status.FAIL, f"{N} 倍大きすぎます")


def test_new_jit_on_every_call():
    def make_migrated_step(mesh, loss_fn, lr):
        def body(params, x, y):
            loss, g = jax.value_and_grad(lambda p: lax.pmean(loss_fn(p, x, y), ("host", "local")))(params)
            return jax.tree.map(lambda p, gg: p - lr * gg, params, g), loss
        return lambda *a: jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P(), BATCH, BATCH), out_specs=P()))(*a)
    expect("6.3c-1", make_migrated_step, Status.FAIL, "1 度だけ作ってください")


def standardize(mean_out=None, var_pmean=True):
    def standardize_smap(x, eps):
        def body(x, eps):
            mean = lax.pmean(jnp.mean(x, axis=0), "data")
            var = jnp.mean((x - mean) ** 2, axis=0)
            var = lax.pmean(var, "data") if var_pmean else var
            return (x - mean) / jnp.sqrt(var + eps), mean
        return jax.smap(body, in_axes=(0, None), out_axes=(0, mean_out), axis_name="data")(x, eps)
    return standardize_smap


def test_mean_returned_with_out_axes_0():
    if N == 1:
        expect("6.3c-2", standardize(mean_out=0), Status.PASS, "確かめられません")
    else:
        expect("6.3c-2", standardize(mean_out=0), Status.FAIL, "out_axes=None")


def test_variance_without_pmean():
    if N == 1:
        expect("6.3c-2", standardize(var_pmean=False), Status.PASS, "確かめられません")
    else:
        expect("6.3c-2", standardize(var_pmean=False), Status.FAIL, "分散が各デバイスの中だけの平均")
