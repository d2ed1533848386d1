"""6.3b-2 ring_all_gather のチェック（ch6/checks/s6_3b/ring_all_gather.py）のテスト。"""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from tests.checkhelp import N, multi, not_done
from tests.checks.s6_3b.common import assert_fail, assert_pass, run


def ring_all_gather(block):
    return _ring_of(block, lax.axis_size("x"))


def _ring_of(block, n):
    """n 個のデバイスのリングで右へ送って集める（n を何から取るかだけが答えごとに違う）。"""
    me = lax.axis_index("x")
    right = [(i, (i + 1) % n) for i in range(n)]
    c = block.shape[1]
    out = jnp.zeros((block.shape[0], n * c), block.dtype)
    out = lax.dynamic_update_slice_in_dim(out, block, me * c, axis=1)
    cur = block
    for k in range(1, n):
        cur = lax.ppermute(cur, "x", right)
        out = lax.dynamic_update_slice_in_dim(out, cur, ((me - k) % n) * c, axis=1)
    return out


def ring_all_gather_left(block):
    # 逆向き（左へ送る）リングで、集めたブロックを最後に並べ替える
    n = lax.axis_size("x")
    me = lax.axis_index("x")
    left = [(i, (i - 1) % n) for i in range(n)]
    got = [block]
    for _ in range(1, n):
        got.append(lax.ppermute(got[-1], "x", left))
    stacked = jnp.stack(got)  # stacked[k] はデバイス (me + k) % n のブロック
    order = (jnp.arange(n) - me) % n
    return jnp.concatenate(list(stacked[order]), axis=1) if n > 1 else block


def ring_unordered(block):
    # 受け取った順に並べてしまう（持ち主の番号で置いていない）
    n = lax.axis_size("x")
    right = [(i, (i + 1) % n) for i in range(n)]
    got, cur = [block], block
    for _ in range(1, n):
        cur = lax.ppermute(cur, "x", right)
        got.append(cur)
    return jnp.concatenate(got, axis=1)


def ring_with_all_gather(block):
    return lax.all_gather(block, "x", axis=1, tiled=True)


def ring_with_psum(block):
    n = lax.axis_size("x")
    me = lax.axis_index("x")
    c = block.shape[1]
    out = jnp.zeros((block.shape[0], n * c), block.dtype)
    return lax.psum(lax.dynamic_update_slice_in_dim(out, block, me * c, axis=1), "x")


def ring_untiled(block):
    return lax.all_gather(block, "x")


def ring_only_own(block):
    n = lax.axis_size("x")
    return jnp.tile(block, (1, n))


def ring_one_round_too_many(block):
    # n 回送る（最後の 1 回は自分のブロックが戻ってくるだけ）: 値は同じでも通信が 1 回多い
    n = lax.axis_size("x")
    me = lax.axis_index("x")
    right = [(i, (i + 1) % n) for i in range(n)]
    c = block.shape[1]
    out = lax.dynamic_update_slice_in_dim(jnp.zeros((block.shape[0], n * c), block.dtype), block, me * c, axis=1)
    cur = block
    for k in range(1, n + 1):
        cur = lax.ppermute(cur, "x", right)
        out = lax.dynamic_update_slice_in_dim(out, cur, ((me - k) % n) * c, axis=1)
    return out


def ring_crash(block):
    return lax.ppermute(block, "x", [(0, 1), (0, 2)])


def test_ring_right():
    assert_pass(run("6.3b-2", ring_all_gather))
    assert_pass(run("6.3b-2", ring_all_gather_left))


def test_ring_wrong():
    assert_fail(run("6.3b-2", ring_with_all_gather), "all_gather", "ppermute")
    assert_fail(run("6.3b-2", ring_with_psum), "ppermute 以外", "psum")
    assert_fail(run("6.3b-2", not_done), status="not_done")


@multi
def test_ring_wrong_multi():
    assert_fail(run("6.3b-2", ring_unordered), "並び順")
    assert_fail(run("6.3b-2", ring_untiled), "tiled=False", "axis=1")
    assert_fail(run("6.3b-2", ring_only_own), "値が違います")
    assert_fail(run("6.3b-2", ring_crash), "解答のコードの中", status="error")
    assert_fail(run("6.3b-2", ring_one_round_too_many), f"ppermute を {N} 回", f"{N - 1} 回", "range(1, n)")


def ring_rows(block):
    # ブロックを行方向（axis=0）につないでしまう
    n = lax.axis_size("x")
    right = [(i, (i + 1) % n) for i in range(n)]
    got, cur = [block], block
    for _ in range(1, n):
        cur = lax.ppermute(cur, "x", right)
        got.append(cur)
    return jnp.concatenate(got, axis=0)


@multi
def test_ring_joined_along_rows_is_named():
    assert_fail(run("6.3b-2", ring_rows), "axis=0", "axis=1")


def _ring_global_count(block):
    # lax.axis_size("x") の代わりに全デバイスの数を使う: 1 次元のメッシュでは区別できない（issue 28 item 6）
    import jax

    return _ring_of(block, jax.device_count())


def test_ring_with_the_global_device_count_fails_on_a_2d_mesh():
    """x 軸がデバイスの数より小さいメッシュは、奇数個や 2 個でも一部のデバイスで作る。1 個では作れないと正解の 1 行が言う。"""
    if N == 1:
        r = run("6.3b-2", _ring_global_count)
        assert r.status == "pass" and "確かめられません" in r.message, r.message
        return
    assert_fail(run("6.3b-2", _ring_global_count), "lax.axis_size('x')", "y 軸")


def test_mesh_with_a_smaller_x_axis_exists_for_every_count():
    from ch6.checks.s6_3b.ring_all_gather import axis_size_mesh_shape
    assert axis_size_mesh_shape(1) is None
    for n in range(2, 9):
        a, b, used = axis_size_mesh_shape(n)
        assert a < n and a * b == used <= n and b >= 1, (n, a, b, used)


def test_pass_line_names_the_mesh_it_tried():
    r = run("6.3b-2", ring_all_gather)
    assert r.status == "pass"
    assert ("確かめられません" in r.message) == (N == 1), r.message
    assert ("y 軸" in r.message) == (N > 1), r.message
