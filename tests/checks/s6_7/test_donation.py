"""6.7-4 make_momentum_update: 参照と別の正解は通り、譲渡なし、params だけ、grads も譲渡、jit しない、
順番が逆、モーメンタムを使わない更新はそれぞれの言葉で落ちる。"""
import jax
import pytest

from tests.checkhelp import boom, expect, not_done


def _update(lr, beta):
    def update(params, velocity, grads):
        velocity = jax.tree.map(lambda v, g: beta * v + g, velocity, grads)
        return jax.tree.map(lambda p, v: p - lr * v, params, velocity), velocity
    return update


def ref(lr, beta):
    return jax.jit(_update(lr, beta), donate_argnums=(0, 1))


def by_name(lr, beta):
    # 別の正解: 名前で譲渡し、リストで返す
    def update(params, velocity, grads):
        p, v = _update(lr, beta)(params, velocity, grads)
        return [p, v]
    return jax.jit(update, donate_argnames=("params", "velocity"))


@pytest.mark.parametrize("fn", [ref, by_name])
def test_correct(fn):
    expect("6.7-4", fn, "pass", "正解", "grads は消えずに")


def test_wrong_answers_are_named():
    expect("6.7-4", lambda lr, beta: jax.jit(_update(lr, beta)), "fail", "共有分", "が 0 です")
    expect("6.7-4", lambda lr, beta: jax.jit(_update(lr, beta), donate_argnums=0), "fail", "params だけ")
    expect("6.7-4", lambda lr, beta: jax.jit(_update(lr, beta), donate_argnums=(0, 1, 2)), "fail", "grads まで譲渡")
    expect("6.7-4", lambda lr, beta: _update(lr, beta), "fail", ".lower がありません")

    def swapped(lr, beta):
        return jax.jit(lambda p, v, g: _update(lr, beta)(p, v, g)[::-1], donate_argnums=(0, 1))
    expect("6.7-4", swapped, "fail", "順番が逆")

    def plain_sgd(lr, beta):
        def update(p, v, g):
            return jax.tree.map(lambda a, b: a - lr * b, p, g), jax.tree.map(lambda a, b: beta * a + b, v, g)
        return jax.jit(update, donate_argnums=(0, 1))
    expect("6.7-4", plain_sgd, "fail", "p - lr * g")

    def lr_in_velocity(lr, beta):
        def update(p, v, g):
            v = jax.tree.map(lambda a, b: beta * a + lr * b, v, g)
            return jax.tree.map(lambda a, b: a - b, p, v), v
        return jax.jit(update, donate_argnums=(0, 1))
    expect("6.7-4", lr_in_velocity, "fail", "velocity が違います")


def test_not_done_and_learner_error():
    expect("6.7-4", not_done, "not_done", "まだ解答されていません")
    expect("6.7-4", boom, "error", "ZeroDivisionError")
    expect("6.7-4", lambda lr, beta: jax.jit(lambda p, v, g: 1 / 0, donate_argnums=(0, 1)), "error", "ZeroDivisionError")
