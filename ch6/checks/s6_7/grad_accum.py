"""6.7-2 accumulated_value_and_grad: マイクロバッチを lax.scan で回す勾配累積（損失も、pytree のバッチも）。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, call, exercise, is_close, traced_eqns
from .common import pair, rng, show, tanh_model

_B = 12


def _scan_lengths(fn, loss_fn, params, batch, k) -> tuple[list[int], int]:
    """k を閉包に入れてトレースした jaxpr の (scan の長さの列, 式の数)。"""
    eqns = traced_eqns(lambda p, b: fn(loss_fn, p, b, k), params, batch)
    return [int(e.params["length"]) for e in eqns if e.primitive.name == "scan"], len(eqns)


def _grads_match(got, want, scale: float = 1.0) -> bool:
    import jax

    try:
        if jax.tree.structure(got) != jax.tree.structure(want):
            return False
    except Exception:
        return False
    return all(is_close(g, scale * np.asarray(w), rtol=1e-4, atol=1e-6)
               for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)))


@exercise("6.7-2", "accumulated_value_and_grad")
def check_accumulated_value_and_grad(fn):
    import jax

    r = rng(2)
    params, batch, loss_fn = tanh_model(r, _B, 5, 7)
    want_loss, want_grads = jax.value_and_grad(loss_fn)(params, batch)
    for k in (1, 3, 4, _B):  # k = 1（マイクロバッチ 1 つ）と k = B（1 件ずつ）の端も
        out = call(fn, loss_fn, params, batch, k)
        loss, grads = pair(out, "accumulated_value_and_grad", "（loss, grads）")
        if not is_close(loss, want_loss, rtol=1e-4, atol=1e-6):
            if k > 1 and is_close(loss, k * np.asarray(want_loss), rtol=1e-4, atol=1e-6):
                raise Fail(f"損失を k で割っていないので、k = {k} で損失が {k} 倍になりました。損失の和を k で割って平均にします。")
            raise Fail(f"k = {k} の損失は {float(want_loss):.5g} のはずが {show(loss)} でした。"
                       "返すのはバッチ全体の平均の損失（マイクロバッチの損失の平均）です。")
        if _grads_match(grads, want_grads):
            continue
        if k > 1 and _grads_match(grads, want_grads, scale=k):
            raise Fail(f"勾配を k で割っていないので、k = {k} で勾配が {k} 倍になりました。勾配の和を k で割ります。")
        if _grads_match(grads, want_grads, scale=k / _B):
            raise Fail(f"k = {k} の勾配が {_B // k} 分の 1 で、勾配の和をバッチの大きさ {_B} で割っています。"
                       "マイクロバッチの勾配はすでに平均なので、和を k で割ります。")
        try:
            same_tree = jax.tree.structure(grads) == jax.tree.structure(want_grads)
        except Exception:
            same_tree = False
        if not same_tree:
            raise Fail(f"勾配は params と同じ形の pytree のはずが、{type(grads).__name__} でした。"
                       "value_and_grad の勾配を jax.tree.map で足し合わせます。")
        size = _B // k
        last = jax.tree.map(lambda a, size=size: a[-size:], batch)  # 前から順に切ったときの最後のマイクロバッチ
        if k > 1 and _grads_match(grads, jax.grad(loss_fn)(params, last)):
            raise Fail(f"k = {k} の勾配が最後のマイクロバッチの勾配だけでした。scan のキャリーで k 個の勾配を足してから k で割ります。")
        raise Fail(f"k = {k} の勾配がバッチ全体の勾配と一致しませんでした。どのマイクロバッチの勾配も足してから k で割ります。")
    lengths, size4 = _scan_lengths(fn, loss_fn, params, batch, 4)
    _, size2 = _scan_lengths(fn, loss_fn, params, batch, 2)
    if not lengths and size4 == size2:
        raise Fail("jaxpr に scan がなく、k を変えても式の数が同じなので、マイクロバッチを 1 つずつ回していません。"
                   "活性値を減らすには、バッチ全体や vmap で同時に計算せず、lax.scan で 1 つずつ回してください。")
    if not lengths:
        raise Fail("jaxpr に scan がないので、マイクロバッチを Python で回しています。lax.scan の中に 1 回分を書きます。")
    if 4 not in lengths:
        shown = sorted(set(lengths))
        if _B // 4 in lengths:
            raise Fail(f"k = 4 の scan の長さが {_B // 4}（B/k）で、マイクロバッチの数と大きさを取り違えています。"
                       "reshape(k, B // k, …) にして、k 個のマイクロバッチを scan で順に処理します。")
        if _B in lengths:
            raise Fail(f"scan が 1 件ずつ回っているので、k = 4 の scan の長さが {shown} でした。scan はマイクロバッチ k 個を回します。")
        raise Fail(f"k = 4 の scan の長さが {shown} でした。scan はマイクロバッチ k 個を回します。")
    if size4 != size2:
        raise Fail(f"k = 2 と k = 4 で jaxpr の式の数が {size2} から {size4} に変わったので、Python のループがマイクロバッチを"
                   "並べています。lax.scan の中に 1 回分を書きます。")
    return f"隠しの辞書のバッチ {_B} 件で、k = 1, 3, 4, {_B} の損失と勾配が一致し、scan の長さは k でした。"
