"""6.3c-2 standardize_smap のチェック（ch6/checks/s6_3c/standardize_smap.py）のテスト。"""
import jax
import jax.numpy as jnp
import pytest
from jax import lax
from jax.sharding import PartitionSpec as P

from ch6.checking import CANNOT_TELL, cannot_tell
from tests.checkhelp import N, boom, expect, not_done


# 6.3c-2 -------------------------------------------------------------------------------
def _body(x, eps):
    mean = lax.pmean(jnp.mean(x, axis=0), "data")
    var = lax.pmean(jnp.mean((x - mean) ** 2, axis=0), "data")
    return (x - mean) / jnp.sqrt(var + eps), mean


def std_ref(x, eps):
    return jax.smap(_body, in_axes=(0, None), out_axes=(0, None), axis_name="data")(x, eps)


def std_shard_map(x, eps):
    # 同じ指定を shard_map で（メッシュは set_mesh で与えられたもの）
    return jax.shard_map(_body, in_specs=(P("data"), P()), out_specs=(P("data"), P()))(x, eps)


def std_jit(x, eps):
    return jax.jit(jax.smap(_body, in_axes=(0, None), out_axes=(0, None), axis_name="data"))(x, eps)


def std_moments(x, eps):
    # 分散を E[x²] − mean² で求めても、数値は許容誤差の中で同じ。返すのはリストでもよい
    def body(x):
        mean = lax.pmean(x.mean(axis=0), "data")
        var = lax.pmean((x * x).mean(axis=0), "data") - mean ** 2
        return [(x - mean) / jnp.sqrt(var + eps), mean]
    return list(jax.smap(body, in_axes=0, out_axes=[0, None], axis_name="data")(x))


@pytest.mark.parametrize("fn", [std_ref, std_shard_map, std_jit, std_moments])
def test_6_3c_2_correct(fn):
    expect("6.3c-2", fn, "pass", "複製")


def _smap(body):
    return lambda x, eps: jax.smap(body, in_axes=(0, None), out_axes=(0, None), axis_name="data")(x, eps)


def std_local(x, eps):
    def body(x, eps):
        mean = jnp.mean(x, axis=0)
        var = jnp.mean((x - mean) ** 2, axis=0)
        return (x - mean) / jnp.sqrt(var + eps), lax.pmean(mean, "data")
    return _smap(body)(x, eps)


def std_no_eps(x, eps):
    def body(x, eps):
        mean = lax.pmean(jnp.mean(x, axis=0), "data")
        var = lax.pmean(jnp.mean((x - mean) ** 2, axis=0), "data")
        return (x - mean) / jnp.sqrt(var), mean
    return _smap(body)(x, eps)


def std_mean_of_local_var(x, eps):
    def body(x, eps):
        mean = lax.pmean(jnp.mean(x, axis=0), "data")
        var = lax.pmean(jnp.var(x, axis=0), "data")  # 自分の平均からのずれ
        return (x - mean) / jnp.sqrt(var + eps), mean
    return _smap(body)(x, eps)


def std_mean_concatenated(x, eps):
    return jax.smap(_body, in_axes=(0, None), out_axes=(0, 0), axis_name="data")(x, eps)


def std_plain(x, eps):
    mean = x.mean(axis=0)
    return (x - mean) / jnp.sqrt(x.var(axis=0) + eps), mean


def std_gather(x, eps):
    def body(x, eps):
        full = lax.all_gather(x, "data", tiled=True)
        mean = full.mean(axis=0)
        return (x - mean) / jnp.sqrt(full.var(axis=0) + eps), mean
    # all_gather の結果は「デバイスごと」の型なので、check_vma=False でないと out_specs=P() と合わない
    return jax.shard_map(body, in_specs=(P("data"), P()), out_specs=(P("data"), P()), check_vma=False)(x, eps)


def std_own_set_mesh(x, eps):
    with jax.set_mesh(jax.make_mesh((N,), ("data",))):
        return std_ref(x, eps)


def std_gather_stats(x, eps):
    # 値は同じ: 平均だけを all_gather（全デバイスで同じ値の型）で集めてから jnp.mean で平均する
    def body(x, eps):
        mean = jnp.mean(lax.all_gather(jnp.mean(x, axis=0), "data", to="invarying"), axis=0)
        var = lax.pmean(jnp.mean((x - mean) ** 2, axis=0), "data")
        return (x - mean) / jnp.sqrt(var + eps), mean
    return _smap(body)(x, eps)


def test_6_3c_2_gathering_the_statistics_is_caught():
    """回帰（ミューテーションの生き残り）: 平均を all_gather(…, to="invarying") + jnp.mean で作ると、jaxpr の名前が
    all_gather_invariant なので、値も pmean（分散）もそろって通っていた。"""
    expect("6.3c-2", std_gather_stats, "fail", "all_gather", "統計量も集めずに")


def test_6_3c_2_wrong():
    if N > 1:
        expect("6.3c-2", std_local, "fail", "各デバイスの中だけ")
        expect("6.3c-2", std_mean_of_local_var, "fail", "各デバイスの中の平均")
        expect("6.3c-2", std_mean_concatenated, "fail", "out_axes=None")
    expect("6.3c-2", std_no_eps, "fail", "eps")
    expect("6.3c-2", std_plain, "fail", "shard_map")
    expect("6.3c-2", std_gather, "fail", "all_gather")
    expect("6.3c-2", std_own_set_mesh, "fail", "set_mesh")
    expect("6.3c-2", lambda x, eps: std_ref(x, eps)[0], "fail", "2 つ組")
    replicated_z = lambda x, eps: jax.smap(_body, in_axes=(0, None), out_axes=(None, None), axis_name="data")(x, eps)  # noqa: E731
    expect("6.3c-2", replicated_z, "error", "out_specs")  # 型の上の検査なので 1 デバイスでも
    expect("6.3c-2", not_done, "not_done")
    expect("6.3c-2", boom, "error", "ZeroDivisionError")
    expect("6.3c-2", jnp.ones(3), "fail", "関数を渡してください")


def test_6_3c_2_says_what_one_device_cannot_tell():
    """デバイス 1 個では、統計量を各デバイスの中だけで求めた答えも mean を out_axes=0 で返す答えも解答例と同じ値・形・
    シャーディングになる（tools/mutate.py が少ないデバイスで試して見つけた）。✅ の行がそう断り、2 個以上では断らない。"""
    msg = expect("6.3c-2", std_ref, "pass")
    if N > 1:
        assert CANNOT_TELL not in msg
        return
    assert cannot_tell("全デバイスでの平均と mean の複製") in msg
    for fn in (std_local, std_mean_concatenated):
        expect("6.3c-2", fn, "pass", CANNOT_TELL)
