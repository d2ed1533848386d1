"""生成するモデルを動かす（6.10 節）の図: 連続バッチ処理のスロットの占有。

実際に動かした連続バッチ処理のループが記録した表から描きます。

- :func:`slot_occupancy`: occ[t][s] = ステップ t にスロット s を使っていた要求の番号（空きは -1）。
  要求ごとに塗りと斜線の模様を変え、番号を書き込む（白黒でも読める）
"""
from __future__ import annotations

import numpy as np

from ._base import Drawing, _figure, _finish, color, ink

_HATCHES = ("", "//", "..", "xx", "\\\\", "++", "oo", "--")


def slot_occupancy(occ, title: str | None = None) -> Drawing:
    """occ は (ステップ, スロット) の整数の表。値は要求の番号、-1 は空き。横軸がステップ、縦軸がスロット。"""
    from matplotlib.patches import Rectangle

    grid = np.asarray(occ)
    if grid.ndim != 2 or grid.size == 0:
        raise ValueError(f"occ must be a 2-D (steps, slots) table, got shape {grid.shape}")
    grid = grid.astype(int)
    if (grid < -1).any():
        raise ValueError("occ の値は要求の番号（0 以上）か、空きの -1 です")
    steps, slots = grid.shape
    w = 0.45
    fig, ax = _figure(max(4.0, w * steps + 1.6), 0.55 * slots + 1.5)
    for s in range(slots):
        t = 0
        while t < steps:                       # 同じ要求が続く区間を 1 つの帯に
            r = int(grid[t, s])
            end = t
            while end + 1 < steps and grid[end + 1, s] == r:
                end += 1
            x, width = t * w, (end - t + 1) * w
            if r < 0:
                ax.add_patch(Rectangle((x, s * 0.6), width, 0.6, facecolor="white", edgecolor="#999999", lw=0.6))
            else:
                face = color(r)
                ax.add_patch(Rectangle((x, s * 0.6), width, 0.6, facecolor=face, edgecolor="black", lw=1,
                                       hatch=_HATCHES[r % len(_HATCHES)]))
                ax.text(x + width / 2, s * 0.6 + 0.3, f"要求 {r}", ha="center", va="center", fontsize=8,
                        color=ink(face), bbox=dict(facecolor=face, edgecolor="none", pad=0.5))
            t = end + 1
        ax.text(-0.1, s * 0.6 + 0.3, f"スロット {s}", ha="right", va="center", fontsize=9)
    for t in range(0, steps, max(1, steps // 8)):
        ax.text(t * w + w / 2, slots * 0.6 + 0.15, str(t), ha="center", va="top", fontsize=8)
    ax.text(steps * w / 2, slots * 0.6 + 0.5, "デコードのステップ", ha="center", va="top", fontsize=9)
    used = int((grid >= 0).sum())
    _finish(ax, steps * w, slots * 0.6 + 0.6, title or "スロットの占有（要求の番号がない区間は空き）")
    return Drawing(fig, f"スロットの占有 {slots} スロット × {steps} ステップ、要求 {len(set(grid[grid >= 0].tolist()))} 件、"
                        f"占有率 {used / grid.size:.0%}")
