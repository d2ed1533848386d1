"""ch6.overlap（6.11 節）: collective matmul とバケットごとの psum が、まとめて行う集団通信と同じ値になること。

デバイスの数はセッションの N（conftest の --devices、既定 8）と、その先頭 k 個のデバイスのメッシュ
（``jax.make_mesh((k,), ("x",), devices=jax.devices()[:k])``）で 1、2、3、4、5 も試します。値は小さな整数を
float32 にしたものなので、足す順が違っても結果は完全に一致します。
"""
from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from ch6 import cost, overlap
from ch6.hlo import collectives_in, compiled_text
from tests.checkhelp import N, multi

KS = sorted({k for k in (1, 2, 3, 4, 5, 8, N) if k <= N})
DIRECTIONS = ("one", "two")
jax_test = pytest.mark.slow  # JAX のコンパイルがある（make quick は飛ばす）


def _mesh(k):
    return jax.make_mesh((k,), ("x",), devices=jax.devices()[:k])


def _put(mesh, a, spec):
    return jax.device_put(a, NamedSharding(mesh, spec))


def _ints(rng, shape):
    return rng.integers(-3, 4, shape).astype(np.float32)


def _sm(fn, mesh, in_specs, out_specs):
    return jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs))


# ---------------------------------------------------------------- 純粋な Python（JAX のコンパイルなし）


def test_buckets_group_consecutive_leaves_up_to_the_limit():
    assert overlap.buckets([], 10) == []
    assert overlap.buckets([4, 4, 4], 8) == [[0, 1], [2]]
    assert overlap.buckets([4, 4, 4], 12) == [[0, 1, 2]]
    assert overlap.buckets([3, 3, 3, 3], 7) == [[0, 1], [2, 3]]
    # 上限より大きい葉は、それだけで 1 つのバケット（前後の葉とはまとめない）
    assert overlap.buckets([2, 20, 2, 2], 8) == [[0], [1], [2, 3]]
    assert overlap.buckets([20], 8) == [[0]]
    # ちょうど上限まで入る
    assert overlap.buckets([5, 3, 8], 8) == [[0, 1], [2]]
    # 順は変えない: 後ろの小さな葉を前のバケットへ詰め直さない
    assert overlap.buckets([6, 6, 1], 7) == [[0], [1, 2]]
    with pytest.raises(ValueError, match="bucket_bytes"):
        overlap.buckets([1], 0)
    with pytest.raises(ValueError, match="負"):
        overlap.buckets([1, -1], 4)


@pytest.mark.parametrize("sizes,cap", [([1, 2, 3, 4, 5, 6, 7], 7), ([9, 1, 1, 9, 1], 10), ([1] * 10, 3)])
def test_buckets_cover_every_leaf_once_in_order(sizes, cap):
    got = overlap.buckets(sizes, cap)
    assert [i for b in got for i in b] == list(range(len(sizes)))
    for b in got:
        assert len(b) == 1 or sum(sizes[i] for i in b) <= cap


def test_leaf_buckets_cut_where_the_dtype_changes():
    tree = {"a": jax.ShapeDtypeStruct((2, 2), jnp.float32), "b": jax.ShapeDtypeStruct((3,), jnp.float32),
            "c": jax.ShapeDtypeStruct((1,), jnp.int32), "d": jax.ShapeDtypeStruct((2,), jnp.float32)}
    # 16 + 12 バイトの float32、4 バイトの int32、8 バイトの float32: 上限が大きくても dtype で切る
    assert overlap.leaf_buckets(tree, 10**6) == [[0, 1], [2], [3]]
    assert overlap.leaf_buckets(tree, 20) == [[0], [1], [2], [3]]


@pytest.mark.parametrize("n", range(1, 10))
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_schedule_multiplies_every_shard_once_and_sends_what_comes_next(n, direction):
    steps = overlap.schedule(n, direction)
    right, left = overlap.ring_counts(n, direction)
    assert right + left == n - 1 and len(steps) == right + 1
    if direction == "two":
        assert len(steps) == (n // 2 + 1)  # 偶数の n では n/2 回送る（と最初の 1 ステップ）
    for d in range(n):
        held = [c for st in steps for c in st.multiply[d]]
        assert sorted(held) == list(range(n)), (d, held)
        assert steps[0].multiply[d] == (d,)
    for st, nxt in itertools.pairwise(steps):
        for d in range(n):
            for shard, dest in st.send[d]:
                assert shard in st.multiply[d]          # 送るのは、このステップで掛けているシャード
                assert shard in nxt.multiply[dest]      # 送信先は次のステップでそれを掛ける
                assert dest in ((d + 1) % n, (d - 1) % n)
    assert all(st == () for st in steps[-1].send)
    # 送信の数は ppermute の数（one は n − 1、two も合計で n − 1 個のシャード）
    assert sum(len(st.send[0]) for st in steps) == n - 1


@pytest.mark.parametrize("n", range(1, 10))
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_cost_model_counts_the_same_steps_as_the_schedule(n, direction):
    steps = overlap.schedule(n, direction)
    model = cost.ring_steps(n, direction)
    assert len(model) == len(steps)
    for (a, right, left), st in zip(model, steps):
        assert a == len(st.multiply[0]) and right + left == len(st.send[0])
        assert left <= right and (direction == "two" or left == 0)


@pytest.mark.parametrize("n", range(1, 8))
def test_reducescatter_schedule_ends_each_row_shard_at_its_owner(n):
    steps = overlap.schedule(n, "one", "reducescatter")
    assert len(steps) == n
    for d in range(n):
        assert steps[-1].multiply[d] == (d,) and steps[-1].send[d] == ()
        assert sorted(c for st in steps for c in st.multiply[d]) == list(range(n))
    for st, nxt in itertools.pairwise(steps):
        for d in range(n):
            (shard, dest), = st.send[d]
            assert nxt.multiply[dest] == (shard,)  # 受け取った部分和と同じ行のシャードに足す
    with pytest.raises(ValueError, match="one"):
        overlap.schedule(4, "two", "reducescatter")


def test_schedule_refuses_bad_arguments():
    with pytest.raises(ValueError, match="direction"):
        overlap.schedule(4, "both")
    with pytest.raises(ValueError, match="form"):
        overlap.schedule(4, "one", "allreduce")
    with pytest.raises(ValueError, match="1 以上"):
        overlap.ring_counts(0)


# ---------------------------------------------------------------- shard_map の中（JAX）


@jax_test
@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_allgather_matmul_equals_all_gather_then_matmul(k, direction):
    mesh, rng = _mesh(k), np.random.default_rng(k)
    x = _put(mesh, _ints(rng, (2 * k, 6)), P("x"))
    w = _put(mesh, _ints(rng, (6, 3 * k)), P(None, "x"))
    specs = dict(in_specs=(P("x"), P(None, "x")), out_specs=P(None, "x"))
    got = _sm(lambda a, b: overlap.allgather_matmul(a, b, "x", direction), mesh, **specs)(x, w)
    want = _sm(lambda a, b: lax.all_gather(a, "x", tiled=True) @ b, mesh, **specs)(x, w)
    assert got.shape == (2 * k, 3 * k)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, np.asarray(x) @ np.asarray(w))


@jax_test
@pytest.mark.parametrize("k", KS)
def test_matmul_reducescatter_equals_psum_scatter(k):
    mesh, rng = _mesh(k), np.random.default_rng(10 + k)
    x = _put(mesh, _ints(rng, (2 * k, 4 * k)), P(None, "x"))
    w = _put(mesh, _ints(rng, (4 * k, 5)), P("x"))
    specs = dict(in_specs=(P(None, "x"), P("x")), out_specs=P("x"))
    got = _sm(lambda a, b: overlap.matmul_reducescatter(a, b, "x"), mesh, **specs)(x, w)
    want = _sm(lambda a, b: lax.psum_scatter(a @ b, "x", scatter_dimension=0, tiled=True), mesh, **specs)(x, w)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, np.asarray(x) @ np.asarray(w))


@jax_test
@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_the_ring_carries_what_the_schedule_says(k, direction):
    arrived, placed = _sm(lambda: overlap.trace("x", direction), _mesh(k), (), (P("x"), P("x")))()
    steps = overlap.schedule(k, direction)
    want = np.array([[list(st.multiply[d]) + [-1] * (2 - len(st.multiply[d])) for st in steps] for d in range(k)])
    np.testing.assert_array_equal(np.asarray(arrived).reshape(want.shape), want)
    np.testing.assert_array_equal(np.asarray(placed).reshape(want.shape), want)


@jax_test
@pytest.mark.parametrize("k", KS)
def test_the_reducescatter_ring_adds_each_row_shard_once_per_device(k):
    sums = np.asarray(_sm(lambda: overlap.trace("x", "one", "reducescatter"), _mesh(k), (), P("x"))())
    sums = sums.reshape(k, k, k)  # (デバイス, ステップ, 行のシャード)
    for d, (s, st) in itertools.product(range(k), enumerate(overlap.schedule(k, "one", "reducescatter"))):
        want = np.zeros(k)
        want[st.multiply[d][0]] = s + 1
        np.testing.assert_array_equal(sums[d, s], want)


@jax_test
@multi
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_allgather_matmul_compiles_to_collective_permutes_only(direction):
    mesh, rng = _mesh(N), np.random.default_rng(0)
    x = _put(mesh, _ints(rng, (N, 4)), P("x"))
    w = _put(mesh, _ints(rng, (4, 2 * N)), P(None, "x"))
    f = _sm(lambda a, b: overlap.allgather_matmul(a, b, "x", direction), mesh, (P("x"), P(None, "x")), P(None, "x"))
    found = collectives_in(compiled_text(f, x, w))
    assert found == {"collective-permute": N - 1}, found
    g = _sm(lambda a, b: overlap.matmul_reducescatter(a, b, "x"), mesh, (P(None, "x"), P("x")), P("x"))
    xr, wr = _put(mesh, _ints(rng, (N, 2 * N)), P(None, "x")), _put(mesh, _ints(rng, (2 * N, 3)), P("x"))
    assert collectives_in(compiled_text(g, xr, wr)) == {"collective-permute": N - 1}


def _grads(rng, k):
    """デバイスごとに違う勾配の木（先頭の軸が k、shard_map の中で [0] を取る）。"""
    shapes = {"w1": (3, 4), "b1": (4,), "w2": (4, 2), "b2": (2,), "scale": ()}
    tree = {name: _ints(rng, (k, *s)) for name, s in shapes.items()}
    tree["steps"] = rng.integers(0, 5, (k, 2)).astype(np.int32)
    return tree


@jax_test
@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("bucket_bytes", [1, 24, 40, 80])
def test_bucketed_psum_equals_psum_of_the_tree(k, bucket_bytes):
    mesh = _mesh(k)
    tree = jax.tree.map(lambda a: _put(mesh, a, P("x")), _grads(np.random.default_rng(k), k))

    def run(reduce):
        def body(t):
            return jax.tree.map(lambda a: a[None], reduce(jax.tree.map(lambda a: a[0], t)))
        return _sm(body, mesh, P("x"), P("x"))(tree)

    got = run(lambda t: overlap.bucketed_psum(t, "x", bucket_bytes))
    want = run(lambda t: lax.psum(t, "x"))
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


@jax_test
@multi
@pytest.mark.parametrize("bucket_bytes", [1, 24, 40, 80])
def test_bucketed_psum_issues_one_all_reduce_per_bucket(bucket_bytes):
    mesh = _mesh(N)
    tree = jax.tree.map(lambda a: _put(mesh, a, P("x")), _grads(np.random.default_rng(0), N))
    local = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape[1:], a.dtype), tree)
    n_buckets = len(overlap.leaf_buckets(local, bucket_bytes))
    f = _sm(lambda t: overlap.bucketed_psum(jax.tree.map(lambda a: a[0], t), "x", bucket_bytes), mesh, P("x"), P())
    assert collectives_in(overlap.uncombined_text(f, tree)) == {"all-reduce": n_buckets}
    # 既定のコンパイルでは XLA が all-reduce をまとめることがある（数は増えない）
    assert collectives_in(compiled_text(f, tree))["all-reduce"] <= n_buckets
    assert n_buckets == {1: 6, 24: 5, 40: 4, 80: 3}[bucket_bytes]


def test_leaf_buckets_of_the_test_gradients():
    # 1 デバイス分の葉を jax.tree の順（名前順）に: b1 16、b2 8、scale 4 バイト（float32）| steps 8（int32）|
    # w1 48、w2 32（float32）。dtype が変わる steps の前後で必ず切る
    local = {"w1": jax.ShapeDtypeStruct((3, 4), jnp.float32), "b1": jax.ShapeDtypeStruct((4,), jnp.float32),
             "w2": jax.ShapeDtypeStruct((4, 2), jnp.float32), "b2": jax.ShapeDtypeStruct((2,), jnp.float32),
             "scale": jax.ShapeDtypeStruct((), jnp.float32), "steps": jax.ShapeDtypeStruct((2,), jnp.int32)}
    assert overlap.leaf_buckets(local, 1) == [[0], [1], [2], [3], [4], [5]]
    assert overlap.leaf_buckets(local, 24) == [[0, 1], [2], [3], [4], [5]]   # 16 + 8 = 24 まで
    assert overlap.leaf_buckets(local, 40) == [[0, 1, 2], [3], [4], [5]]     # 28、w1 の 48 は上限より大きい
    assert overlap.leaf_buckets(local, 80) == [[0, 1, 2], [3], [4, 5]]       # 48 + 32 = 80 まで
