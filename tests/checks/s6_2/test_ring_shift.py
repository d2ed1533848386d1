"""6.2-3 ring_shift のチェック（ch6/checks/s6_2/ring_shift.py）のテスト。"""
import functools

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from tests.checkhelp import N, boom, expect, not_done


# 6.2-3 --------------------------------------------------------------------------------
def ring_ref(xs, shift):
    n = jax.device_count()
    perm = [(i, (i + shift) % n) for i in range(n)]
    return jax.pmap(lambda x: lax.ppermute(x, "ring", perm), axis_name="ring")(xs)


def ring_alt(xs, shift):
    # 受信先 j から見て送信元 (j - shift) % n を書いても同じ置換
    n = xs.shape[0]
    perm = [((j - shift) % n, j) for j in range(n)]
    return jax.pmap(functools.partial(lax.ppermute, axis_name="r", perm=perm), axis_name="r")(xs)


@pytest.mark.parametrize("fn", [ring_ref, ring_alt])
def test_6_2_3_correct(fn):
    expect("6.2-3", fn, "pass", "ppermute")


def test_6_2_3_wrong():
    backwards = lambda xs, s: ring_ref(xs, -s)  # noqa: E731
    if N > 2:
        expect("6.2-3", backwards, "fail", "向きが逆", "(送信元, 送信先)")
        expect("6.2-3", lambda xs, s: ring_ref(xs, 1), "fail", "shift=-1", "引数 shift が使われていません")
    else:  # 2 デバイス以下では逆向きも同じ置換
        expect("6.2-3", backwards, "pass")
    if N > 1:
        same = lambda xs, s: jax.pmap(lambda x: lax.ppermute(x, "r", [(i, i) for i in range(N)]), axis_name="r")(xs)  # noqa: E731
        expect("6.2-3", same, "fail", "動いていません")
    expect("6.2-3", lambda xs, s: jnp.roll(xs, s, axis=0), "fail", "ppermute がありません", "jnp.roll")
    loop = lambda xs, s: jnp.stack([xs[(i - s) % N] for i in range(N)])  # noqa: E731  Python のループ
    expect("6.2-3", loop, "fail", "ppermute がありません")
    gather = lambda xs, s: jax.pmap(  # noqa: E731
        lambda x: lax.all_gather(x, "r")[(lax.axis_index("r") - s) % N], axis_name="r")(xs)
    expect("6.2-3", gather, "fail", "ppermute がありません", "all_gather")
    expect("6.2-3", lambda xs, s: xs[:, :2], "fail", "形が違います")
    bad_perm = lambda xs, s: jax.pmap(lambda x: lax.ppermute(x, "r", [(0, 0), (0, 0)]), axis_name="r")(xs)  # noqa: E731
    expect("6.2-3", bad_perm, "error", "ValueError")
    expect("6.2-3", not_done, "not_done")
    expect("6.2-3", boom, "error", "ZeroDivisionError")


def test_6_2_3_wrapping_only_once_is_caught():
    # (i + shift) % n の代わりに「はみ出したら n を 1 回引く／足す」: shift が 1, -1, 2 なら通ってしまう
    # （issue 28 item 6: 境目 shift ≥ n を隠し入力に入れる）
    def wrap_once(xs, shift):
        n = jax.device_count()
        dest = [i + shift - n if i + shift >= n else (i + shift + n if i + shift < 0 else i + shift) for i in range(n)]
        perm = [(i, d) for i, d in enumerate(dest) if 0 <= d < n]
        return jax.pmap(lambda x: lax.ppermute(x, "ring", perm), axis_name="ring")(xs)
    if jax.device_count() > 1:
        expect("6.2-3", wrap_once, "fail", f"shift={jax.device_count() + 1}")
