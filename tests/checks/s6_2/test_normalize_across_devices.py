"""6.2-1 normalize_across_devices のチェック（ch6/checks/s6_2/normalize_across_devices.py）のテスト。"""
import jax
import jax.numpy as jnp
import pytest
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tests.checkhelp import N, boom, expect, not_done


# 6.2-1 --------------------------------------------------------------------------------
def normalize_ref(xs):
    return jax.pmap(lambda x: x / lax.psum(x.sum(), "i"), axis_name="i")(xs)


def normalize_alt(xs):
    # 各デバイスの行ベクトルを psum してから合計しても同じ
    return jax.pmap(lambda x: x / jnp.sum(lax.psum(x, "d")), axis_name="d")(xs)


@pytest.mark.parametrize("fn", [normalize_ref, normalize_alt, jax.jit(normalize_ref)])
def test_6_2_1_correct(fn):
    expect("6.2-1", fn, "pass", "psum")


def test_6_2_1_wrong():
    local = lambda xs: jax.pmap(lambda x: x / x.sum())(xs)  # noqa: E731
    expect("6.2-1", local, "fail", "psum")
    if N > 1:
        expect("6.2-1", local, "fail", "各デバイスの中だけ")
    expect("6.2-1", lambda xs: xs / xs.sum(), "fail", "psum がありません")
    loop = lambda xs: jnp.stack([x / sum(r.sum() for r in xs) for x in xs])  # noqa: E731  Python のループ
    expect("6.2-1", loop, "fail", "psum がありません")
    # 決め打ちの出力（5 デバイスでは隠し入力が (5, 3) から始まるので、形で見つかる）
    expect("6.2-1", lambda xs: jnp.ones((N, 5)) / (5 * N), "fail", "値が違います" if N != 5 else "形が違います")
    transposed = lambda xs: jax.pmap(lambda x: x / lax.psum(x.sum(), "i"), axis_name="i", out_axes=1)(xs)  # noqa: E731
    expect("6.2-1", transposed, "fail", "転置", "out_axes")
    wrong_name = lambda xs: jax.pmap(lambda x: x / lax.psum(x.sum(), "j"), axis_name="i")(xs)  # noqa: E731
    expect("6.2-1", wrong_name, "error", "NameError")
    if N > 1:
        pmean = lambda xs: jax.pmap(lambda x: x / lax.pmean(x.sum(), "i"), axis_name="i")(xs)  # noqa: E731
        expect("6.2-1", pmean, "fail", "lax.pmean）で割って")
    expect("6.2-1", not_done, "not_done", "関数の本体に答えを書いてから")
    expect("6.2-1", boom, "error", "ZeroDivisionError")
    expect("6.2-1", "normalize", "fail", "関数を渡してください")


def test_6_2_1_shard_map_with_psum_is_accepted():
    # issue 13 の回帰: shard_map の中の lax.psum は jaxpr で psum_invariant と呼ばれる。これも psum として認める
    def with_shard_map(xs):
        mesh = jax.make_mesh((jax.device_count(),), ("i",))
        xs = jax.device_put(xs, NamedSharding(mesh, P("i")))
        return jax.shard_map(lambda x: x / lax.psum(x.sum(), "i"), mesh=mesh, in_specs=P("i"), out_specs=P("i"))(xs)

    expect("6.2-1", with_shard_map, "pass", "psum")
