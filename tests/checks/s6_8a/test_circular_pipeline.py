"""6.8a-1 circular_tick: 正しい 1 ティックは通り、ppermute の組の誤りと値の誤りはそれぞれの言葉で落ちる。
向きの誤りは 3 デバイス以上、戻す組の欠けは 2 デバイス以上でしか見分けられない（1 デバイスでは同じ計算）。
デバイスの数を jax.device_count() で読む誤りは、2 デバイス以上（奇数なら 1 つ少ないデバイスの 2 次元のメッシュ）で
見分けられる。見分けられないデバイスの数では、誤りの答えも通り、✅ の行がそのことを言う。
V と S を取り違える誤り（V で割る、S でクリップ、t < V まで新しい入力、w.shape[0] を S に）は、どのデバイスの数でも落ちる。"""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ch6 import Status
from ch6.checking import CANNOT_TELL
from ch6.checks.s6_8a.circular_pipeline import hidden_inputs, reference
from ch6.recorded import RECORDED_DEVICES, input_devices
from tests.checkhelp import boom, expect, not_done

N = input_devices()  # チェックが隠し入力を作るデバイスの数（9 個以上では 8）


def make_tick(perm_of=lambda n: [(i, (i + 1) % n) for i in range(n)], round_of=None, fresh_always=False,
              swap=False, first_weight=False, fresh_until=None):
    def tick(w, state, x_fresh, t, axis_name):
        n = lax.axis_size(axis_name)
        d = lax.axis_index(axis_name)
        k = t - d if round_of is None else round_of(t, d)
        v = jnp.clip(k // n, 0, w.shape[0] - 1)
        take = (d == 0) if fresh_always else (d == 0) & (t < (n if fresh_until is None else fresh_until(n)))
        x_in = jnp.where(take, x_fresh, state)
        y = jnp.tanh(x_in @ (w[0] if first_weight else w[v]))
        new = lax.ppermute(y, axis_name, perm_of(n))
        return (y, new) if swap else (new, y)
    return tick


def with_offset(tick, eps):
    """tick の出力 y に一定の誤差 eps を足す（TPU の近似の誤差の代わり。送る state には足さないので層を重ねても増えない）。"""
    def shifted(w, state, x_fresh, t, axis_name):
        new, y = tick(w, state, x_fresh, t, axis_name)
        return new, y + eps
    return shifted


def with_select(w, state, x_fresh, t, axis_name):  # 別の正しい書き方: lax.select と lax.dynamic_index_in_dim
    n = lax.axis_size(axis_name)
    d = lax.axis_index(axis_name)
    v = jnp.clip((t - d) // n, 0, w.shape[0] - 1)
    x_in = lax.select(jnp.broadcast_to((d == 0) & (t < n), state.shape), x_fresh, state)
    y = jnp.tanh(x_in @ lax.dynamic_index_in_dim(w, v, keepdims=False))
    return [lax.ppermute(y, axis_name, [(i, (i + 1) % n) for i in range(n)]), y]


def hardcoded_axis(w, state, x_fresh, t, axis_name):
    return make_tick()(w, state, x_fresh, t, "stage")


def global_count(w, state, x_fresh, t, axis_name):  # 軸の大きさでなく全デバイスの数
    n = jax.device_count()
    d = lax.axis_index(axis_name)
    v = jnp.clip((t - d) // n, 0, w.shape[0] - 1)
    x_in = jnp.where((d == 0) & (t < n), x_fresh, state)
    y = jnp.tanh(x_in @ w[v])
    return lax.ppermute(y, axis_name, [(i, (i + 1) % n) for i in range(n)]), y


def python_and(w, state, x_fresh, t, axis_name):  # トレーサに Python の and
    n = lax.axis_size(axis_name)
    d = lax.axis_index(axis_name)
    v = jnp.clip((t - d) // n, 0, w.shape[0] - 1)
    x_in = jnp.where(d == 0 and t < n, x_fresh, state)
    y = jnp.tanh(x_in @ w[v])
    return lax.ppermute(y, axis_name, [(i, (i + 1) % n) for i in range(n)]), y


def true_division(w, state, x_fresh, t, axis_name):  # 周の番号を / で
    n = lax.axis_size(axis_name)
    d = lax.axis_index(axis_name)
    v = jnp.clip((t - d) / n, 0, w.shape[0] - 1)
    x_in = jnp.where((d == 0) & (t < n), x_fresh, state)
    y = jnp.tanh(x_in @ w[v])
    return lax.ppermute(y, axis_name, [(i, (i + 1) % n) for i in range(n)]), y


def test_reference_simulator_is_the_unsplit_model():
    # チェックの隠し入力で（学習者版では、作るときに記録した値を引く）: 1..8 デバイスの 1 次元と 2 次元のメッシュ
    for n in range(1, RECORDED_DEVICES + 1):
        v, _, _, w_dev, xs, w2, xs2 = hidden_inputs(n)
        for w, x in ((w_dev, xs), (w2, xs2)) if w2 is not None else ((w_dev, xs),):
            want = x.astype(np.float64)
            for j in range(v * len(w)):  # 層 j = v·S + d はデバイス d の w[d, v]
                want = np.tanh(want @ w[j % len(w), j // len(w)])
            assert np.allclose(reference(w, x), want)


def test_reference_and_other_correct_answers_pass():
    msg = expect("6.8a-1", make_tick(), Status.PASS, "最後の周の出力", *(["のメッシュ"] if N > 1 else []))
    assert (CANNOT_TELL in msg) == (N <= 2), msg  # 1 デバイスと 2 デバイスでは、確かめられないことを言う
    expect("6.8a-1", with_select, Status.PASS)


def passes_saying_it_cannot_tell(fn, *words):
    """このデバイスの数では見分けられない誤り: ✅ になり、その行が確かめられないことを言う。"""
    return expect("6.8a-1", fn, Status.PASS, CANNOT_TELL, *words)


def test_wrong_direction_is_named():
    reverse = make_tick(perm_of=lambda n: [(i, (i - 1) % n) for i in range(n)])
    if N <= 2:  # 右隣と左隣が同じデバイス（1 デバイスでは自分）
        passes_saying_it_cannot_tell(reverse, "ppermute の向き")
    elif N == 3:  # 逆向きと 2 つ先が同じ組
        expect("6.8a-1", reverse, Status.FAIL, "逆向きに送る組", "2 つ先へ送る組とも同じ")
    else:
        expect("6.8a-1", reverse, Status.FAIL, "向きが逆", "デバイス 0 の送信先が 1 になるはずが")


def test_missing_wrap_around_is_named():
    no_wrap = make_tick(perm_of=lambda n: [(i, i + 1) for i in range(n - 1)])
    if N == 1:  # 組が 1 つもない ppermute は、1 デバイスでは何もしない ppermute と同じ値
        expect("6.8a-1", no_wrap, Status.FAIL)
        return
    msg = expect("6.8a-1", no_wrap, Status.FAIL, f"最後のデバイス {N - 1} から 0 へ戻す組がありません")
    assert "…" not in msg and "なし" not in msg  # 省略した同じに見える列ではなく、違う位置を文で言う


def test_two_hops_and_other_perms_are_named():
    two_hops = make_tick(perm_of=lambda n: [(i, (i + 2) % n) for i in range(n)])
    if N == 1:
        passes_saying_it_cannot_tell(two_hops)
    elif N == 3:
        expect("6.8a-1", two_hops, Status.FAIL, "2 つ先へ送る組とも同じ")
    elif N == 2:  # 2 つ先は自分
        expect("6.8a-1", two_hops, Status.FAIL, "デバイス 0 の送信先が 1 になるはずが 0 でした")
    else:
        expect("6.8a-1", two_hops, Status.FAIL, "2 つ先")
    if N > 1:
        expect("6.8a-1", make_tick(perm_of=lambda n: [(i, i) for i in range(n)]), Status.FAIL,
               "ppermute の組で、デバイス 0 の送信先が 1 になるはずが 0 でした")


def test_no_ppermute_is_named():
    def no_send(w, state, x_fresh, t, axis_name):  # 送らずに自分の出力を次の state にする
        d = lax.axis_index(axis_name)
        x_in = jnp.where((d == 0) & (t < lax.axis_size(axis_name)), x_fresh, state)
        y = jnp.tanh(x_in @ w[0])
        return y, y
    expect("6.8a-1", no_send, Status.FAIL, "ppermute がないので")


def test_all_gather_instead_of_ppermute_is_named():
    def gather_send(w, state, x_fresh, t, axis_name):  # 値は正しい: 全員の y を集めて、1 つ前のデバイスの行を取る
        n, d = lax.axis_size(axis_name), lax.axis_index(axis_name)
        v = jnp.clip((t - d) // n, 0, w.shape[0] - 1)
        x_in = jnp.where((d == 0) & (t < n), x_fresh, state)
        y = jnp.tanh(x_in @ w[v])
        return lax.all_gather(y, axis_name)[(d - 1) % n], y
    expect("6.8a-1", gather_send, Status.FAIL, "ppermute の代わりに all_gather", "n − 1 倍")


def test_global_round_is_named():
    if N == 1:  # d = 0 なので t と t − d が同じ
        passes_saying_it_cannot_tell(make_tick(round_of=lambda t, d: t), "d による周のずれ")
        return
    expect("6.8a-1", make_tick(round_of=lambda t, d: t), Status.FAIL, "(t − d) // S")


def test_fresh_input_every_tick_is_named():
    expect("6.8a-1", make_tick(fresh_always=True), Status.FAIL, "どのティックでも x_fresh")


def test_first_weight_every_round_is_named():
    expect("6.8a-1", make_tick(first_weight=True), Status.FAIL, "w[0]")


def test_swapped_return_is_named():
    if N == 1:  # 送っても自分に戻るので、入れ替えても同じ
        passes_saying_it_cannot_tell(make_tick(swap=True), "戻り値の順")
        return
    expect("6.8a-1", make_tick(swap=True), Status.FAIL, "戻り値の順が逆", "(ppermute の結果, y)")


def test_round_off_by_d_or_by_one_is_named():
    if N == 1:  # d = 0 なので t + d も t − d も t
        passes_saying_it_cannot_tell(make_tick(round_of=lambda t, d: t + d))
    else:
        expect("6.8a-1", make_tick(round_of=lambda t, d: t + d), Status.FAIL, "(t + d) // S", "(t − d) // S")
    expect("6.8a-1", make_tick(round_of=lambda t, d: t - d + 1), Status.FAIL, "1 ティック早く")
    expect("6.8a-1", make_tick(round_of=lambda t, d: t - d - 1), Status.FAIL, "1 ティック遅れて")
    # TPU v5e の誤差つきでも（そこでは自分の誤りとの差が 2.1e-5 で、正しい値の許容誤差の外だった）
    expect("6.8a-1", with_offset(make_tick(round_of=lambda t, d: t - d - 1), 3e-5), Status.FAIL, "1 ティック遅れて")


def test_fresh_input_off_by_one_is_named():
    msg = expect("6.8a-1", make_tick(fresh_until=lambda n: n + 1), Status.FAIL, "ティック S にも", "t < S")
    assert "どのティックでも" not in msg
    if N > 1:  # 1 デバイスでは t < 0 になり、新しい入力を 1 度も取らない（名前は言わない）
        expect("6.8a-1", make_tick(fresh_until=lambda n: n - 1), Status.FAIL, "S − 2 まで", "t < S")


def test_the_lessons_gpipe_tick_is_named():
    def gpipe_tick(w, state, x_fresh, t, axis_name):  # 本編の GPipe の 1 ティックを写した: 毎回 x_fresh、w[0]
        n = lax.axis_size(axis_name)
        x_in = jnp.where(lax.axis_index(axis_name) == 0, x_fresh, state)
        y = jnp.tanh(x_in @ w[0])
        return lax.ppermute(y, axis_name, [(i, (i + 1) % n) for i in range(n)]), y
    expect("6.8a-1", gpipe_tick, Status.FAIL, "本編の GPipe", "w[v]")


def test_wrong_structure_and_hardcoded_axis():
    msg = expect("6.8a-1", lambda w, s, x, t, a: make_tick()(w, s, x, t, a)[0], Status.FAIL, "2 つ組", "配列 1 つ")
    assert "Tracer" not in msg
    msg = expect("6.8a-1", lambda w, s, x, t, a: (make_tick()(w, s, x, t, a)[0], x[None]), Status.FAIL,
                 "y の形は", "の配列でした")
    assert "Tracer" not in msg
    expect("6.8a-1", hardcoded_axis, Status.FAIL, "axis_name 以外の軸の名前")
    # editor2_b: 「tupleでした」「NoneTypeでした」ではなく、日本語で終わる説明の後に「でした」
    expect("6.8a-1", lambda w, s, x, t, a: (s, s, s), Status.FAIL, "長さ 3 の組（tuple）でした")
    expect("6.8a-1", lambda w, s, x, t, a: None, Status.FAIL, "NoneType の値でした")


def test_global_device_count_is_named_on_a_2d_mesh():
    if N == 1:  # 2 次元のメッシュを作れない
        passes_saying_it_cannot_tell(global_count, "軸の大きさの取り違え")
        return
    if jax.device_count() > N:  # 9 個以上: 1 次元のメッシュも先頭の 8 個なので、そこで組の誤りとして落ちる
        expect("6.8a-1", global_count, Status.FAIL, f"デバイス {N - 1} の送信先が 0 になるはずが {N} でした")
        return
    expect("6.8a-1", global_count, Status.FAIL, "2 次元のメッシュで合いません", "lax.axis_size(axis_name)")


def vs_tick(round_by_v=False, n_from_w=False, fresh_until_v=False, clip_to_s=False):
    """V（w.shape[0]）と S（軸の大きさ）を取り違えた 1 ティック。"""
    def tick(w, state, x_fresh, t, axis_name):
        v_count = w.shape[0]
        n = v_count if n_from_w else lax.axis_size(axis_name)
        d = lax.axis_index(axis_name)
        v = jnp.clip((t - d) // (v_count if round_by_v else n), 0, (n if clip_to_s else v_count) - 1)
        x_in = jnp.where((d == 0) & (t < (v_count if fresh_until_v else n)), x_fresh, state)
        y = jnp.tanh(x_in @ w[v])
        return lax.ppermute(y, axis_name, [(i, (i + 1) % n) for i in range(n)]), y
    return tick


def test_mixing_v_and_s_is_rejected_at_every_device_count():
    # 隠しの V はどのデバイスの数でも S と違うので、V と S を取り違えるとどこでも落ちる。1 デバイスでは V で割るのも
    # S − 1 = 0 でクリップするのも「どの周でも w[0]」と同じ値になり、そう言う
    first = ("どの周でも w[0]",) if N == 1 else None
    expect("6.8a-1", vs_tick(round_by_v=True), Status.FAIL, *(first or ("V（w.shape[0]）で割って",)))
    expect("6.8a-1", vs_tick(n_from_w=True), Status.FAIL, "w.shape[0]", "lax.axis_size(axis_name)")
    # 3 デバイスでは V = S + 1、4 デバイスでは V = S − 1 なので、t < V は「ティック S にも」「S − 2 まで」と同じ値になる
    fresh_words = {1: ("どのティックでも x_fresh",), 3: ("ティック S にも",), 4: ("S − 2 まで",)}.get(
        N, ("t < V（w.shape[0]）",))
    expect("6.8a-1", vs_tick(fresh_until_v=True), Status.FAIL, *fresh_words)
    if N < 3:  # S < V: S − 1 でクリップすると、使えない周が出る
        expect("6.8a-1", vs_tick(clip_to_s=True), Status.FAIL, *(first or ("0 … S − 1 にクリップ",)))
    elif N == 3:
        expect("6.8a-1", vs_tick(clip_to_s=True), Status.FAIL, "0 … S − 1 にクリップ")


def test_jax_errors_are_explained_in_japanese():
    msg = expect("6.8a-1", python_and, Status.FAIL, "トレーサ", "(d == 0) & (t < n)")
    assert "TracerBoolConversionError" not in msg
    expect("6.8a-1", true_division, Status.FAIL, "//")


def test_not_done_and_learner_error():
    expect("6.8a-1", not_done, Status.NOT_DONE)
    expect("6.8a-1", boom, Status.ERROR, "ZeroDivisionError")
