"""6.4 の問題文から書いた、ありそうな誤答（issue 39）。どれも 1・3・8 デバイスで、その誤りの名前で落ちるか、
そのデバイスの数では見分けられないことを正解の 1 行が言う。"""
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tests.checkhelp import N, expect

# ---- 6.4-1 batched_loss

def test_params_batched_too():
    def batched_loss(sample_loss, params, xs, ys):
        return jnp.mean(jax.vmap(sample_loss, in_axes=(0, 1, 0))(params, xs, ys))
    expect("6.4-1", batched_loss, "fail", "params", "None")


def test_sum_instead_of_mean():
    def batched_loss(sample_loss, params, xs, ys):
        return jnp.sum(jax.vmap(sample_loss, in_axes=(None, 1, 0))(params, xs, ys))
    expect("6.4-1", batched_loss, "fail", "jnp.mean")


# ---- 6.4-2 clipped_mean_grad (利用者ごと)

def user_clipped(clip_samples=False, by_samples=False):
    def clipped_mean_grad(sample_loss, params, batch, users, num_users, max_norm):
        def rows(v, s):
            return v * s.reshape((-1,) + (1,) * (v.ndim - 1))

        def norms(tree, n):
            return jnp.sqrt(sum(jnp.sum(g.reshape(n, -1) ** 2, axis=1) for g in jax.tree.leaves(tree)))
        grads = jax.vmap(jax.grad(sample_loss), in_axes=(None, 0))(params, batch)
        if clip_samples:
            grads = jax.tree.map(lambda g: rows(g, jnp.minimum(1.0, max_norm / norms(grads, users.shape[0]))), grads)
        counts = jax.ops.segment_sum(jnp.ones(users.shape), users, num_segments=num_users)
        user_g = jax.tree.map(lambda g: rows(jax.ops.segment_sum(g, users, num_segments=num_users), 1 / counts), grads)
        clipped = jax.tree.map(lambda g: rows(g, jnp.minimum(1.0, max_norm / norms(user_g, num_users))), user_g)
        total = users.shape[0] if by_samples else num_users
        return jax.tree.map(lambda g: jnp.sum(g, axis=0) / total, clipped)
    return clipped_mean_grad


def test_samples_clipped_as_well():
    expect("6.4-2", user_clipped(clip_samples=True), "fail", "サンプルごとにクリップしてから")


def test_divided_by_the_number_of_samples():
    expect("6.4-2", user_clipped(by_samples=True), "fail", "サンプルの数", "num_users")


# ---- 6.4-3 make_dp_train_step

def dp(spec=P(None, "data"), new_function_each_call=False):
    def make_dp_train_step(loss_fn, optimizer, mesh):
        def one_step(carry, batch):
            params, opt_state = carry
            loss, grads = jax.value_and_grad(loss_fn)(params, *batch)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), loss

        def make_run():
            def run(params, opt_state, xs, ys):
                (params, opt_state), losses = jax.lax.scan(one_step, (params, opt_state), (xs, ys))
                return params, opt_state, losses
            return jax.jit(run)
        run = make_run()
        sharding = NamedSharding(mesh, spec)

        def train_step(params, opt_state, xs, ys):
            f = make_run() if new_function_each_call else run
            return f(params, opt_state, jax.device_put(xs, sharding), jax.device_put(ys, sharding))
        return train_step
    return make_dp_train_step


def test_step_axis_split():
    """xs の 0 軸（ステップ）を分割: 割り切れないデバイスの数でも、1 デバイス（scan のエラー）でも、その軸を言う。"""
    expect("6.4-3", dp(spec=P("data")), "fail", "0 軸（ステップの軸", "P(None, 'data')")


def test_batch_replicated():
    expect("6.4-3", dp(spec=P()), "fail", "'data' 軸で分割されていません")


def test_jit_of_a_new_function_on_every_call():
    expect("6.4-3", dp(new_function_each_call=True), "fail", "トレース")


# ---- 6.4-4 fsdp_shard

def fsdp(rule):
    def fsdp_shard(tree, mesh):
        size = mesh.shape["data"]

        def place(a):
            axis = rule(np.shape(a), size)
            return jax.device_put(a, NamedSharding(mesh, P() if axis is None else P(*[None] * axis, "data")))
        return jax.tree.map(place, tree)
    return fsdp_shard


def longest_if_divisible(shape, size):
    """いちばん長い軸だけを調べる（割り切れなければ複製）。"""
    if not shape:
        return None
    i = max(range(len(shape)), key=lambda i: (shape[i], -i))
    return i if shape[i] % size == 0 else None


def divisible_by_device_count(shape, size):
    d = [i for i, s in enumerate(shape) if s % jax.device_count() == 0]
    return max(d, key=lambda i: (shape[i], -i)) if d else None


def test_only_the_longest_axis_checked():
    if N == 1:
        expect("6.4-4", fsdp(longest_if_divisible), "pass", "割り切れるかの調べ方", "確かめられません")
    else:
        expect("6.4-4", fsdp(longest_if_divisible), "fail", "いちばん長い", "割り切れません")


def test_divisibility_by_the_device_count():
    if N == 1:
        expect("6.4-4", fsdp(divisible_by_device_count), "pass", "確かめられません")
    else:
        expect("6.4-4", fsdp(divisible_by_device_count), "fail", "mesh.shape['data']")
