"""DP-SGD の勾配（サンプルごとに切り詰めてから平均）の参照と、よくある誤りの値。6.1-4 と 6.4-2 が共有します。

``per`` はサンプルごとの勾配の pytree（NumPy の配列、どの葉も先頭がサンプルの軸）です。
3 つとも ``@recorded``（学習者版では本体がなく、記録した値を引く）です。チェックの ``@recorded`` の関数の中で、
隠し入力から作った ``per`` でだけ呼びます。
"""
from __future__ import annotations

import numpy as np

from ..recorded import recorded


def _tree_map(f, *trees):
    import jax

    return jax.tree.map(f, *trees)


def _rows(v: np.ndarray, s: np.ndarray) -> np.ndarray:
    """(B,) の倍率 s を葉 v (B, ...) の各サンプルに掛ける。"""
    return v * s.reshape((-1,) + (1,) * (v.ndim - 1))


@recorded
def sample_norms(per) -> np.ndarray:
    """サンプルごとの勾配全体（すべての葉をまとめた 1 本のベクトル）のノルム (B,)。"""
    import jax

    return np.sqrt(sum((v.reshape(len(v), -1) ** 2).sum(1) for v in jax.tree.leaves(per)))


@recorded
def clipped_mean(per, max_norm: float):
    """正解: 各サンプルの勾配を min(1, max_norm / ノルム) 倍してから、サンプルについて平均する。"""
    scale = np.minimum(1.0, max_norm / sample_norms(per))
    return _tree_map(lambda v: _rows(v, scale).mean(0), per)


@recorded
def clipping_mistakes(per, max_norm: float) -> dict[str, object]:
    """よくある誤りの値。キー: no_clip（切り詰めない）、clip_after_mean（平均してから切り詰める）、
    per_leaf（葉ごとのノルムで切り詰める）、scale_all（小さい勾配まで max_norm にそろえる）、sum（平均でなく合計）。"""
    import jax

    mean = _tree_map(lambda v: v.mean(0), per)
    mean_norm = float(np.sqrt(sum((v ** 2).sum() for v in jax.tree.leaves(mean))))
    per_leaf = _tree_map(lambda v: _rows(v, np.minimum(1.0, max_norm / np.sqrt((v.reshape(len(v), -1) ** 2).sum(1))))
                         .mean(0), per)
    scale_all = max_norm / sample_norms(per)
    n = len(jax.tree.leaves(per)[0])
    return {
        "no_clip": mean,
        "clip_after_mean": _tree_map(lambda v: v * min(1.0, max_norm / mean_norm), mean),
        "per_leaf": per_leaf,
        "scale_all": _tree_map(lambda v: _rows(v, scale_all).mean(0), per),
        "sum": _tree_map(lambda v: v * n, clipped_mean(per, max_norm)),
    }
