"""6.2 の問題文から書いた、ありそうな誤答（issue 39）。どれも 1・3・8 デバイスで、その誤りの名前で落ちるか、
そのデバイスの数では見分けられないことを正解の 1 行が言う。"""
import jax
import jax.numpy as jnp
from jax import lax

from tests.checkhelp import N, expect

# ---- 6.2-1 normalize_across_devices

def normalize_by(reduce):
    return lambda xs: jax.pmap(lambda x: x / reduce(jnp.sum(x), "i"), axis_name="i")(xs)


def test_dividing_by_the_mean_of_sums():
    if N == 1:
        expect("6.2-1", normalize_by(lax.pmean), "pass", "lax.pmean で割る誤り", "確かめられません")
    else:
        expect("6.2-1", normalize_by(lax.pmean), "fail", "lax.pmean", "lax.psum")


def test_dividing_by_the_largest_device_sum():
    if N == 1:   # 値は合うが psum がない
        expect("6.2-1", normalize_by(lax.pmax), "fail", "psum がありません")
    else:
        expect("6.2-1", normalize_by(lax.pmax), "fail", "lax.pmax", "合計の最大")


# ---- 6.2-2 sgd_step

def test_gradient_sum_over_the_local_count():
    """勾配の和は psum したが、件数はそのデバイスのもの: 「まとめられていない」ではなく、その名前で言う。"""
    def sgd_step(params, x, y, mask, loss_fn, lr, axis_name):
        g = lax.psum(jax.grad(lambda p: jnp.sum(mask * loss_fn(p, x, y)))(params), axis_name)
        return jax.tree.map(lambda p, gg: p - lr * gg / jnp.sum(mask), params, g)
    msg = expect("6.2-2", sgd_step, "fail", "そのデバイスの有効な件数で割って")
    assert "まとめられていません" not in msg


def test_count_of_all_rows():
    def sgd_step(params, x, y, mask, loss_fn, lr, axis_name):
        g = lax.psum(jax.grad(lambda p: jnp.sum(mask * loss_fn(p, x, y)))(params), axis_name)
        return jax.tree.map(lambda p, gg: p - lr * gg / lax.psum(x.shape[0], axis_name), params, g)
    expect("6.2-2", sgd_step, "fail", "すべての行の数")


# ---- 6.2-3 ring_shift

def ring(dest):
    def ring_shift(xs, shift):
        n = jax.device_count()
        perm = [p for p in (dest(i, shift, n) for i in range(n)) if p is not None]
        return jax.pmap(lambda x: lax.ppermute(x, "r", perm), axis_name="r")(xs)
    return ring_shift


def test_sign_of_a_negative_shift_dropped():
    """abs(shift): shift=-1 は shift=1 と同じ結果になるが、shift を使っていないのではない。"""
    slip = ring(lambda i, s, n: (i, (i + abs(s)) % n))
    if N <= 2:
        expect("6.2-3", slip, "pass", "確かめられません")
    else:
        msg = expect("6.2-3", slip, "fail", "負の shift を正の向きとして扱って")
        assert "使われていません" not in msg


def test_shift_clamped_below_one_turn():
    """min(shift, n - 1): 1 周ちょうどと 1 周を超える shift だけが違う（2 デバイスでも shift を使わない答えと言わない）。"""
    slip = ring(lambda i, s, n: (i, (i + min(s, n - 1)) % n))
    if N == 1:
        expect("6.2-3", slip, "pass", "確かめられません")
    else:
        msg = expect("6.2-3", slip, "fail", f"shift={N}（デバイスの数 {N} 以上）")
        assert "使われていません" not in msg


def test_shift_ignored():
    slip = ring(lambda i, s, n: (i, (i + 1) % n))
    if N == 1:
        expect("6.2-3", slip, "pass", "確かめられません")
    elif N == 2:   # 1 周までの shift はどれも shift=1 と同じ置換: 違うのは 1 周ちょうどの shift だけ
        expect("6.2-3", slip, "fail", "shift=2（デバイスの数 2 以上）")
    else:
        expect("6.2-3", slip, "fail", "引数 shift が使われていません")


def test_last_device_never_sends():
    slip = ring(lambda i, s, n: (i, (i + s) % n) if i < n - 1 else None)
    expect("6.2-3", slip, "fail", "何も届かず", "すべてのデバイスを送信元")


def test_reversed_pairs():
    slip = ring(lambda i, s, n: (i, (i - s) % n))
    if N <= 2:
        expect("6.2-3", slip, "pass", "確かめられません")
    else:
        expect("6.2-3", slip, "fail", "向きが逆")
