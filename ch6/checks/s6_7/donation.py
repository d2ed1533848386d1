"""6.7-4 make_momentum_update: params と velocity を譲渡する、モーメンタムつき SGD の jit した更新。"""
from __future__ import annotations

from ...checking import Fail, LearnerError, call, exercise, f32, is_close
from .common import pair, rng, tree_bytes


def _tree(r):
    return {"w": f32(r.normal(size=(7, 5))), "layer": {"b": f32(r.normal(size=(5,))), "s": f32(r.normal(size=(3, 4)))}}


def _numpy_step(p, v, g, lr, beta):
    import jax

    v2 = jax.tree.map(lambda a, b: beta * a + b, v, g)
    return jax.tree.map(lambda a, b: a - lr * b, p, v2), v2


def _matches(got, want) -> bool:
    import jax

    try:
        if jax.tree.structure(got) != jax.tree.structure(want):
            return False
    except Exception:
        return False
    return all(is_close(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)))


def _deleted(tree) -> bool:
    import jax

    return all(getattr(a, "is_deleted", lambda: False)() for a in jax.tree.leaves(tree))


def _any_deleted(tree) -> bool:
    import jax

    return any(getattr(a, "is_deleted", lambda: False)() for a in jax.tree.leaves(tree))


@exercise("6.7-4", "make_momentum_update")
def check_momentum_update(fn):
    import jax

    r = rng(4)
    lr, beta = float(r.uniform(0.05, 0.2)), float(r.uniform(0.5, 0.95))
    p0, v0, g0, g1 = _tree(r), _tree(r), _tree(r), _tree(r)
    update = call(fn, lr, beta)
    if not callable(update) or not hasattr(update, "lower"):
        raise Fail(f"make_momentum_update は jax.jit した関数を返すはずですが、{type(update).__name__} が返りました"
                   "（.lower がありません）。jax.jit(update, donate_argnums=...) を返しましょう。")
    want_alias = tree_bytes(p0) + tree_bytes(v0)
    dev = lambda t: jax.device_put(t)  # noqa: E731  毎回新しいバッファ（譲渡すると消えるので）
    try:
        lowered = update.lower(dev(p0), dev(v0), dev(g0))
        mem = lowered.compile().memory_analysis()
    except Exception as exc:  # 学習者の関数のトレースやコンパイルの中の例外
        raise LearnerError(exc) from exc
    alias = int(mem.alias_size_in_bytes)
    try:
        donated = jax.tree.map(lambda a: bool(a.donated), lowered.args_info)[0]  # 位置引数ごとの「譲渡したか」
    except Exception:
        donated = None
    if isinstance(donated, (tuple, list)) and len(donated) == 3 and any(jax.tree.leaves(donated[2])):
        raise Fail("grads まで譲渡されています（donate_argnums に 2 番目の grads が入っています）。"
                   "譲渡するのは params と velocity の (0, 1) だけにします。")
    if alias == 0:
        raise Fail(f"共有分（alias_size_in_bytes）が 0 です（期待 {want_alias:,} バイト以上）。"
                   "jax.jit(update, donate_argnums=(0, 1)) で params と velocity を譲渡しましょう。")
    if alias < want_alias:
        part = "params だけ" if alias == tree_bytes(p0) else "一部だけ"
        raise Fail(f"共有分が {alias:,} バイトで、params と velocity の和 {want_alias:,} バイトに足りません（{part}が譲渡されています）。"
                   "donate_argnums=(0, 1) で両方を譲渡しましょう。")
    p, v, g = dev(p0), dev(v0), dev(g0)
    out = call(update, p, v, g)
    new_p, new_v = pair(out, "update", "（新しい params, 新しい velocity）")
    want_p, want_v = _numpy_step(p0, v0, g0, lr, beta)
    if _matches(new_p, want_v) and _matches(new_v, want_p):
        raise Fail("update の返り値の順番が逆です: 期待 (新しい params, 新しい velocity)。")
    if not _matches(new_v, want_v):
        raise Fail("新しい velocity が違います。v' = beta * v + g です（lr は掛けません）。")
    if not _matches(new_p, want_p):
        wrong = jax.tree.map(lambda a, b: a - lr * b, p0, g0)
        if _matches(new_p, wrong):
            raise Fail("新しい params が p - lr * g になっています。モーメンタムでは新しい velocity を使い、p' = p - lr * v' です。")
        raise Fail("新しい params が違います。p' = p - lr * v'（v' は新しい velocity）です。")
    if _any_deleted(g):
        raise Fail("grads まで譲渡されています（呼んだ後に grads が消えました）。donate_argnums は params と velocity の (0, 1) だけにします。")
    if not (_deleted(p) and _deleted(v)):
        raise Fail("呼んだ後も、渡した params と velocity が消えていません。donate_argnums=(0, 1) で譲渡しましょう。")
    # 2 回目: 返ってきた値をそのまま渡す（velocity が次のステップへ運ばれる）
    out2 = call(update, new_p, new_v, dev(g1))
    p2, v2 = pair(out2, "update", "（新しい params, 新しい velocity）")
    want_p2, want_v2 = _numpy_step(want_p, want_v, g1, lr, beta)
    if not (_matches(p2, want_p2) and _matches(v2, want_v2)):
        raise Fail("2 回目の更新が違います。返した velocity を次の呼び出しに渡したとき、v' = beta * v + g が続くようにします。")
    return (f"隠しの pytree（{want_alias // 2:,} バイト × 2）で 2 ステップの値が一致し、共有分 {alias:,} バイトが "
            "params と velocity を覆い、grads は消えずに残りました。")
