"""SGD の 1 ステップで起きやすい誤りを、返ってきたパラメータから見分けます。6.2-2 と 6.3c-1 が共有します。

どの関数も NumPy の値（dict の葉は配列かスカラー）を受け取り、誤りに当てはまればその理由の 1 行、当てはまらなければ
``None`` を返します。正しい更新は ``new = params - lr * grads``（grads は全データの平均勾配）です。
"""
from __future__ import annotations

import numpy as np

from ..checking import is_close

KEYS = ("w", "b")


def as_vector(tree) -> np.ndarray:
    """dict {'w', 'b'} を 1 本のベクトルに（比較用）。"""
    return np.concatenate([np.ravel(np.asarray(tree[k], np.float64)) for k in KEYS])


def step_with(params, grads, lr: float) -> dict:
    """params - lr * grads（dict のまま）。"""
    return {k: np.asarray(params[k], np.float64) - lr * np.asarray(grads[k], np.float64) for k in KEYS}


def fitted_rate(params, got, grads) -> float | None:
    """got - params = -c * grads となる c（最小二乗）。got がこの形で書けなければ None。"""
    d, g = as_vector(got) - as_vector(params), as_vector(grads)
    gg = float(g @ g)
    if gg == 0.0:
        return None
    c = -float(d @ g) / gg
    return c if is_close(d, -c * g, rtol=1e-3, atol=1e-5) else None


def update_mistake(params, got, grads, lr: float, *, device_grads=None, rtol: float = 1e-4,
                   atol: float = 1e-5) -> str | None:
    """返ってきた新しいパラメータ got が、よくある誤りのどれかに当たるなら、その説明（1 行）。

    - 勾配そのものを返した（params を更新していない）
    - 符号が逆（params + lr * grads）
    - デバイスの勾配を pmax で最大にした（device_grads: デバイスごとの勾配の dict のリスト）
    - 学習率が引数 lr と違う（ノートブックの定数を使った、など）
    - params がそのまま返った
    """
    g, p, new = as_vector(grads), as_vector(params), as_vector(got)
    if is_close(new, g, rtol=rtol, atol=atol):
        return "戻り値の 'w' と 'b' が勾配と一致し、更新したパラメータではありません。params - lr * grads を返してください。"
    if is_close(new, p, rtol=rtol, atol=atol):
        return "パラメータが更新されずにそのまま返りました。params - lr * grads を返してください。"
    if is_close(new, p + lr * g, rtol=rtol, atol=atol):
        return "更新が params + lr * grads で、符号が逆です。損失を下げる向きは勾配の逆なので params - lr * grads です。"
    if device_grads is not None and len(device_grads) > 1:
        peak = np.max(np.stack([as_vector(dg) for dg in device_grads]), axis=0)
        if is_close(new, p - lr * peak, rtol=rtol, atol=atol):
            return "勾配を lax.pmax（要素ごとの最大）でまとめています。全データの勾配は、デバイスの勾配の和（psum）から作ります。"
    c = fitted_rate(params, got, grads)
    if c is not None and not np.isclose(c, lr, rtol=1e-3):
        return f"学習率は引数 lr の {lr:g} のはずが、更新は学習率 {c:.3g} 相当でした。引数の lr を使ってください。"
    return None
