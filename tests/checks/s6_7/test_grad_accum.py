"""6.7-2 accumulated_value_and_grad: 参照と別の正解は通り、和のまま、最後のマイクロバッチだけ、Python のループ、
1 サンプルずつの scan、勾配だけを返す答え、vmap で同時に計算する答え、マイクロバッチの数と大きさの取り違え、
勾配をバッチの大きさで割る答えはそれぞれの言葉で落ちる。"""
import jax
import jax.numpy as jnp
import pytest
from jax import lax

from tests.checkhelp import boom, expect, not_done, run_check


def _split(batch, k):
    return jax.tree.map(lambda a: a.reshape(k, a.shape[0] // k, *a.shape[1:]), batch)


def ref(loss_fn, params, batch, k):
    def body(total, mb):
        return jax.tree.map(jnp.add, total, jax.value_and_grad(loss_fn)(params, mb)), None

    zero = (jnp.zeros(()), jax.tree.map(jnp.zeros_like, params))
    total, _ = lax.scan(body, zero, _split(batch, k))
    return jax.tree.map(lambda a: a / k, total)


def strided(loss_fn, params, batch, k):
    # 別の正解: 飛び飛びに分け（i 番目のマイクロバッチは i, i+k, ...）、割ってから足す
    micro = jax.tree.map(lambda a: jnp.swapaxes(a.reshape(a.shape[0] // k, k, *a.shape[1:]), 0, 1), batch)

    def body(total, mb):
        loss, g = jax.value_and_grad(loss_fn)(params, mb)
        return (total[0] + loss / k, jax.tree.map(lambda t, x: t + x / k, total[1], g)), None

    out, _ = lax.scan(body, (0.0, jax.tree.map(jnp.zeros_like, params)), micro)
    return list(out)


@pytest.mark.parametrize("fn", [ref, strided, jax.jit(ref, static_argnums=(0, 3))])
def test_correct(fn):
    expect("6.7-2", fn, "pass", "scan の長さは k")


def summed(loss_fn, params, batch, k):
    out = ref(loss_fn, params, batch, k)
    return out[0] * k, jax.tree.map(lambda g: g * k, out[1])


def grads_summed(loss_fn, params, batch, k):
    out = ref(loss_fn, params, batch, k)
    return out[0], jax.tree.map(lambda g: g * k, out[1])


def last_only(loss_fn, params, batch, k):
    loss, _ = ref(loss_fn, params, batch, k)
    last = jax.tree.map(lambda a: a[-1], _split(batch, k))
    return loss, jax.grad(loss_fn)(params, last)


def python_loop(loss_fn, params, batch, k):
    parts = [jax.value_and_grad(loss_fn)(params, jax.tree.map(lambda a: a[i], _split(batch, k))) for i in range(k)]  # noqa: B023  その場で使う
    return jax.tree.map(lambda *xs: sum(xs) / k, *parts)


def per_sample_scan(loss_fn, params, batch, k):
    one = jax.tree.map(lambda a: a[:, None], batch)  # 1 サンプルずつ（k を使わない）
    n = jax.tree.leaves(batch)[0].shape[0]
    return ref(loss_fn, params, jax.tree.map(lambda a: a.reshape(n, *a.shape[2:]), one), n)


def no_scan(loss_fn, params, batch, k):
    return jax.value_and_grad(loss_fn)(params, batch)


def test_wrong_answers_are_named():
    expect("6.7-2", summed, "fail", "損失を k で割っていない", "損失が 3 倍")
    expect("6.7-2", grads_summed, "fail", "勾配を k で割っていない", "勾配が 3 倍")
    expect("6.7-2", last_only, "fail", "最後のマイクロバッチの勾配だけ")
    expect("6.7-2", python_loop, "fail", "scan がない", "Python で回して")
    expect("6.7-2", per_sample_scan, "fail", "1 件ずつ回って", "scan の長さが [12]")
    expect("6.7-2", no_scan, "fail", "scan がなく", "1 つずつ回していません")

    def strided_last_only(loss_fn, params, batch, k):
        loss, _ = ref(loss_fn, params, batch, k)
        return loss, jax.grad(loss_fn)(params, jax.tree.map(lambda a: a[k - 1::k], batch))
    expect("6.7-2", strided_last_only, "fail", "一致しませんでした", "足してから k で割ります")

    def wrong_loss(loss_fn, params, batch, k):
        loss, grads = ref(loss_fn, params, batch, k)
        return loss + 1.0, grads
    expect("6.7-2", wrong_loss, "fail", "のはずが", "平均の損失")
    expect("6.7-2", lambda f, p, b, k: ref(f, p, b, k)[1], "fail", "2 つ組")
    expect("6.7-2", lambda f, p, b, k: (ref(f, p, b, k)[0], [0.0]), "fail", "同じ形の pytree")


def _scan_sum(loss_fn, params, micro, divide):
    def body(total, mb):
        return jax.tree.map(jnp.add, total, jax.value_and_grad(loss_fn)(params, mb)), None

    zero = (jnp.zeros(()), jax.tree.map(jnp.zeros_like, params))
    (loss, grads), _ = lax.scan(body, zero, micro)
    return loss / divide[0], jax.tree.map(lambda g: g / divide[1], grads)


def test_fresh_slips_from_the_statement():
    # vmap でマイクロバッチを同時に計算する（値は合うが、scan がない）
    def vmapped(loss_fn, params, batch, k):
        loss, grads = jax.vmap(lambda mb: jax.value_and_grad(loss_fn)(params, mb))(_split(batch, k))
        return loss.mean(), jax.tree.map(lambda g: g.mean(0), grads)
    expect("6.7-2", vmapped, "fail", "scan がなく", "1 つずつ回していません")

    # reshape(B // k, k, …): マイクロバッチの数と大きさを取り違え、scan の長さが B/k（値は合う）
    def swapped(loss_fn, params, batch, k):
        n = jax.tree.leaves(batch)[0].shape[0] // k
        micro = jax.tree.map(lambda a: a.reshape(n, k, *a.shape[1:]), batch)
        return _scan_sum(loss_fn, params, micro, (n, n))
    expect("6.7-2", swapped, "fail", "scan の長さが 3（B/k）", "数と大きさを取り違えて")

    # 勾配の和をバッチの大きさ B で割る
    def by_batch_size(loss_fn, params, batch, k):
        return _scan_sum(loss_fn, params, _split(batch, k), (k, jax.tree.leaves(batch)[0].shape[0]))
    expect("6.7-2", by_batch_size, "fail", "バッチの大きさ 12 で割って")


def test_python_loop_inside_scan_of_length_k_is_caught_by_size():
    def loop_in_scan(loss_fn, params, batch, k):
        out = python_loop(loss_fn, params, batch, k)
        _ = lax.scan(lambda c, x: (c, None), 0.0, jnp.zeros(k))  # 見せかけの scan
        return out
    expect("6.7-2", loop_in_scan, "fail", "jaxpr の式の数", "Python のループ")


def test_not_done_and_learner_error():
    expect("6.7-2", not_done, "not_done", "関数の本体に答えを書いてから")
    expect("6.7-2", boom, "error", "ZeroDivisionError")


def test_the_accumulate_6_7_3_hands_to_learners_is_not_a_6_7_2_answer():
    # 6.7-3 のチェックが学習者の関数に渡す accumulate（学習者版にも入る）は、本編 4.4 節の accumulated_grad と同じ働き
    # だけをする: それを 6.7-2 の答えとして出しても通らない（issue 47 の 4: 学習者版に 6.7-2 の答えを置かない）
    from ch6.checks.s6_7.common import lesson_accumulate

    r = run_check("6.7-2", lesson_accumulate)
    assert r.status == "fail", r.message
