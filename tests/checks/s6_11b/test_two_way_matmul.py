"""6.11b-1 allgather_matmul_two_way: 正しい双方向のリングは通り、一方向のリング・all_gather・送りすぎ・書く行の誤りは
それぞれの言葉で落ちる。向きは 3 デバイス以上、軸の大きさの取り違えは 2 デバイス以上でしか見分けられない。"""
import jax
import jax.numpy as jnp
from jax import lax

from ch6 import Status, overlap
from ch6.checking import CANNOT_TELL
from ch6.overlap import allgather_matmul
from tests.checkhelp import N, boom, expect, not_done


def ring(x, w, axis_name, n_right=None, n_left=None, place_right=None, place_left=None, own=True, size=None):
    n = lax.axis_size(axis_name) if size is None else size
    d = lax.axis_index(axis_name)
    m = x.shape[0]
    n_right = n // 2 if n_right is None else n_right(n)
    n_left = (n - 1) // 2 if n_left is None else n_left(n)
    out = jnp.zeros((n * m, w.shape[1]), x.dtype)
    if own:
        out = lax.dynamic_update_slice_in_dim(out, x @ w, d * m, axis=0)
    right = left = x
    for s in range(1, max(n_right, n_left) + 1):
        if s <= n_right:
            right = lax.ppermute(right, axis_name, [(j, (j + 1) % n) for j in range(n)])
            pos = (d - s) % n if place_right is None else place_right(d, s, n)
            out = lax.dynamic_update_slice_in_dim(out, right @ w, pos * m, axis=0)
        if s <= n_left:
            left = lax.ppermute(left, axis_name, [(j, (j - 1) % n) for j in range(n)])
            pos = (d + s) % n if place_left is None else place_left(d, s, n)
            out = lax.dynamic_update_slice_in_dim(out, left @ w, pos * m, axis=0)
    return out


def reference(x, w, axis_name):
    return ring(x, w, axis_name)


def mirrored(x, w, axis_name):  # 左回りを多くしても正しい
    return ring(x, w, axis_name, n_right=lambda n: (n - 1) // 2, n_left=lambda n: n // 2)


def by_sum(x, w, axis_name):  # 行ごとの one-hot を掛けて足していく、別の書き方
    n, d, m = lax.axis_size(axis_name), lax.axis_index(axis_name), x.shape[0]
    def put(c, y):
        return jnp.zeros((n, m, y.shape[1]), y.dtype).at[c].set(y).reshape(n * m, -1)
    out = put(d, jnp.dot(x, w))
    right = left = x
    for s in range(1, n // 2 + 1):
        right = lax.ppermute(right, axis_name, [(j, (j + 1) % n) for j in range(n)])
        out = out + put((d - s) % n, jnp.dot(right, w))
        if s <= (n - 1) // 2:
            left = lax.ppermute(left, axis_name, [(j, (j - 1) % n) for j in range(n)])
            out = out + put((d + s) % n, jnp.dot(left, w))
    return out


def test_reference_and_other_correct_answers_pass():
    msg = expect("6.11b-1", reference, Status.PASS, "一致し")
    assert (CANNOT_TELL in msg) == (N <= 2), msg
    expect("6.11b-1", mirrored, Status.PASS)
    expect("6.11b-1", by_sum, Status.PASS)


def test_calling_the_lessons_library_function_is_named():
    """監査（issue 47）: 本編の overlap.allgather_matmul(..., direction="two") を呼ぶ 1 行が、値も ppermute の組も同じで通っていた。"""
    def one_line(x, w, axis_name):
        return overlap.allgather_matmul(x, w, axis_name, direction="two")

    expect("6.11b-1", one_line, Status.FAIL, "overlap.allgather_matmul を呼んでいます", "自分で書いてください")
    expect("6.11b-1", lambda x, w, a: allgather_matmul(x, w, a, "two"), Status.FAIL, "overlap.allgather_matmul")
    assert overlap.allgather_matmul is allgather_matmul  # チェックの後は元の関数に戻っている


def test_the_lessons_one_way_ring_is_named():
    one_way = lambda x, w, a: ring(x, w, a, n_right=lambda n: n - 1, n_left=lambda n: 0)  # noqa: E731
    if N <= 2:  # 2 デバイスでは一方向も双方向も同じ 1 回の ppermute
        expect("6.11b-1", one_way, Status.PASS, CANNOT_TELL)
    else:
        expect("6.11b-1", one_way, Status.FAIL, "一方向だけ", "右回りと左回り")


def test_all_gather_is_named():
    expect("6.11b-1", lambda x, w, a: lax.all_gather(x, a, tiled=True) @ w, Status.FAIL, "all_gather", "ppermute だけ")


def test_sending_too_much_is_named():
    both_full = lambda x, w, a: ring(x, w, a, n_right=lambda n: n - 1, n_left=lambda n: n - 1)  # noqa: E731
    opposite_twice = lambda x, w, a: ring(x, w, a, n_left=lambda n: n // 2)  # noqa: E731
    if N > 2:
        expect("6.11b-1", both_full, Status.FAIL, "n − 1 回ずつ", "2 度届く")
    if N > 2 and N % 2 == 0:
        expect("6.11b-1", opposite_twice, Status.FAIL, "反対側のシャードを両方向から")


def test_wrong_rows_are_named():
    swapped = lambda x, w, a: ring(x, w, a, place_right=lambda d, s, n: (d + s) % n,  # noqa: E731
                                   place_left=lambda d, s, n: (d - s) % n)
    if N > 2:
        expect("6.11b-1", swapped, Status.FAIL, "入れ替わって")
    if N > 1:
        expect("6.11b-1", lambda x, w, a: ring(x, w, a, own=False), Status.FAIL, "ステップ 0", "行が 0")
    else:
        expect("6.11b-1", lambda x, w, a: ring(x, w, a, own=False), Status.FAIL)
    if N % 2 == 0:  # 右回りも ⌊(n − 1)/2⌋ 回: 反対側のシャードが届かない
        expect("6.11b-1", lambda x, w, a: ring(x, w, a, n_right=lambda n: (n - 1) // 2), Status.FAIL, "反対側", "行が 0")


def no_wrap(x, w, axis_name):  # 組を (j, j + 1)・(j, j − 1) と書き、折り返しの組を落とした
    n, d, m = lax.axis_size(axis_name), lax.axis_index(axis_name), x.shape[0]
    out = lax.dynamic_update_slice_in_dim(jnp.zeros((n * m, w.shape[1]), x.dtype), x @ w, d * m, axis=0)
    right = left = x
    for s in range(1, n // 2 + 1):
        right = lax.ppermute(right, axis_name, [(j, j + 1) for j in range(n - 1)])
        out = lax.dynamic_update_slice_in_dim(out, right @ w, ((d - s) % n) * m, axis=0)
        if s <= (n - 1) // 2:
            left = lax.ppermute(left, axis_name, [(j, j - 1) for j in range(1, n)])
            out = lax.dynamic_update_slice_in_dim(out, left @ w, ((d + s) % n) * m, axis=0)
    return out


def test_missing_wraparound_pairs_are_named():
    """学習者の試行: 折り返しの組のない ppermute が、書く行の誤りと言われていた（8 と 3 デバイス）。"""
    if N > 1:
        expect("6.11b-1", no_wrap, Status.FAIL, "(n − 1, 0)", "0 を受け取ります", "(j, (j ± 1) % n)")
    else:
        expect("6.11b-1", no_wrap, Status.PASS, CANNOT_TELL)


def test_too_few_steps_are_counted():
    """学習者の試行: range(1, n // 2) のステップ（3 デバイスでは ppermute が 0 回）が、書く行の誤りと言われていた。"""
    short = lambda x, w, a: ring(x, w, a, n_right=lambda n: n // 2 - 1, n_left=lambda n: n // 2 - 1)  # noqa: E731
    if N % 2 == 0:  # n が偶数: ちょうど反対側の行だけが 0
        expect("6.11b-1", short, Status.FAIL, "反対側", "行が 0")
    elif N > 1:
        expect("6.11b-1", short, Status.FAIL, f"ppermute が {2 * (N // 2 - 1)} 回", f"n − 1 = {N - 1} 回",
               "range(1, n // 2 + 1)")
    else:
        expect("6.11b-1", short, Status.PASS, CANNOT_TELL)


def test_one_ppermute_for_both_directions_is_explained():
    def both_at_once(x, w, axis_name):
        n = lax.axis_size(axis_name)
        pairs = [(j, (j + 1) % n) for j in range(n)] + [(j, (j - 1) % n) for j in range(n)]
        return jnp.tile(lax.ppermute(x, axis_name, pairs) @ w, (n, 1))
    msg = expect("6.11b-1", both_at_once, Status.FAIL, "向きごとに別の lax.ppermute")
    assert "ValueError" not in msg


def test_shape_and_axis_mistakes():
    if N > 1:
        expect("6.11b-1", lambda x, w, a: x @ w, Status.FAIL, "1 デバイス分の行")
    else:  # 1 デバイスでは x @ w が答えそのもの
        expect("6.11b-1", lambda x, w, a: x @ w, Status.PASS, CANNOT_TELL)
    expect("6.11b-1", lambda x, w, a: ring(x, w, "x"), Status.FAIL, "axis_name 以外の軸の名前")
    global_count = lambda x, w, a: ring(x, w, a, size=jax.device_count())  # noqa: E731
    if N == 1:
        expect("6.11b-1", global_count, Status.PASS, CANNOT_TELL)
    else:
        expect("6.11b-1", global_count, Status.FAIL, "2 次元のメッシュ", "lax.axis_size(axis_name)")


def test_not_done_and_learner_error():
    expect("6.11b-1", not_done, Status.NOT_DONE)
    expect("6.11b-1", boom, Status.ERROR, "ZeroDivisionError")


def fori_steps(x, w, axis_name):
    """正しい値を lax.fori_loop で: 右回りと左回りのステップを 1 つずつのループに。ループの中の ppermute は jaxpr に
    1 回だけ現れ、回数を数えられない（学習者の試行: 「右回り 1 回、左回り 1 回でした」と言われていた）。"""
    n, d, m = lax.axis_size(axis_name), lax.axis_index(axis_name), x.shape[0]
    right = [(j, (j + 1) % n) for j in range(n)]
    left = [(j, (j - 1) % n) for j in range(n)]
    out = lax.dynamic_update_slice_in_dim(jnp.zeros((n * m, w.shape[1]), x.dtype), x @ w, d * m, 0)

    def step(perm, sign):
        def body(s, carry):
            acc, shard = carry
            shard = lax.ppermute(shard, axis_name, perm)
            return lax.dynamic_update_slice_in_dim(acc, shard @ w, ((d - sign * s) % n) * m, 0), shard
        return body

    out, _ = lax.fori_loop(1, n // 2 + 1, step(right, 1), (out, x))
    out, _ = lax.fori_loop(1, (n - 1) // 2 + 1, step(left, -1), (out, x))
    return out


def test_a_loop_around_ppermute_is_named():
    if N == 1:
        expect("6.11b-1", fori_steps, Status.PASS)  # ppermute を送らない: 確かめることがない
    else:
        expect("6.11b-1", fori_steps, Status.FAIL, "lax.fori_loop", "Python の for")
