"""コンテキスト並列とエキスパート並列（6.8b 節）の図: リングアテンションの各ステップ、エキスパートごとの負荷、容量とドロップされたトークン。

どれも実際に動かした結果（shard_map の出力）から描きます。

- :func:`ring_attention_steps`: held[d][s] = デバイス d がステップ s で使った K/V ブロックの番号
  （因果マスク付きなら、ブロックの組 (i, j) がすべて使う・対角・すべて捨てるのどれかで、色と模様を変える。
  模様があるので白黒で印刷しても区別できる）
- :func:`expert_load`: エキスパートごとに届いたトークンの数、そのうちドロップされた数、容量の線
- :func:`dropped_vs_capacity`: 容量係数ごとの、ドロップされたトークンの数
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ._base import Drawing, _box, _figure, _finish, color

_FULL, _DIAG, _SKIP = "#a0cbe8", "#ffbe7d", "#eeeeee"   # 明るい色に濃い文字
_HATCH = {_FULL: "", _DIAG: "..", _SKIP: "///"}            # 白黒でも区別できる模様（すべて使うは無地）
_BAR = "#4e79a7"


def _light(i: int) -> str:
    """パレットの色を白と半々に混ぜた明るい色（濃い文字が読める）。"""
    h = color(i).lstrip("#")
    r, g, b = (int(h[k:k + 2], 16) for k in (0, 2, 4))
    return "#" + "".join(f"{(v + 255) // 2:02x}" for v in (r, g, b))


def _as_int_grid(held) -> np.ndarray:
    grid = np.asarray(held)
    if grid.ndim != 2 or grid.shape[0] == 0 or grid.shape[1] == 0:
        raise ValueError(f"held must be a 2-D (devices, steps) table, got shape {grid.shape}")
    return grid.astype(int)


def _hatch(ax, x, y, w, h, pattern: str) -> None:
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((x, y), w, h, facecolor="none", edgecolor="#555555", linewidth=0, hatch=pattern))


def ring_attention_steps(held, causal: bool = False, title: str | None = None) -> Drawing:
    """held[d][s] = デバイス d（クエリのブロック d を持つ）がステップ s で受け持った K/V ブロックの番号。
    行がステップ、列がデバイス。causal なら、ブロックの組 (d, j) が j < d（すべて使う）、j == d（対角: 下三角だけ）、
    j > d（すべて捨てる）のどれかで色と模様を変える。"""
    grid = _as_int_grid(held)
    n, steps = grid.shape
    fig, ax = _figure(max(3.2, 0.8 * n + 1.4), 0.5 * steps + 1.4)
    for s in range(steps):
        for d in range(n):
            j = int(grid[d, s])
            if causal:
                face, ink = (_FULL, "black") if j < d else (_DIAG, "black") if j == d else (_SKIP, "#555555")
            else:
                face, ink = _light(j), "black"
            _box(ax, d, s * 0.6, 1, 0.6, face, "", fontsize=8)
            if causal and _HATCH[face]:
                _hatch(ax, d, s * 0.6, 1, 0.6, _HATCH[face])
            ax.text(d + 0.5, s * 0.6 + 0.3, f"K/V {j}", ha="center", va="center", fontsize=8, color=ink,
                    bbox=dict(facecolor=face, edgecolor="none", pad=0.5))
        ax.text(-0.15, s * 0.6 + 0.3, f"ステップ {s}", ha="right", va="center", fontsize=9)
    for d in range(n):
        ax.text(d + 0.5, -0.1, f"D{d}\nQ {d}", ha="center", va="bottom", fontsize=9)
    if causal:
        y = steps * 0.6 + 0.35
        for k, (face, label) in enumerate([(_FULL, "すべて使う（j < i）"), (_DIAG, "対角（下三角だけ）"),
                                           (_SKIP, "すべて捨てる（j > i）")]):
            _box(ax, k * max(n, 3) / 3, y, 0.3, 0.3, face, "")
            if _HATCH[face]:
                _hatch(ax, k * max(n, 3) / 3, y, 0.3, 0.3, _HATCH[face])
            ax.text(k * max(n, 3) / 3 + 0.4, y + 0.15, label, ha="left", va="center", fontsize=8)
    default = "リングアテンション: 各ステップで使う K/V ブロック" + ("（因果マスク）" if causal else "")
    _finish(ax, n, steps * 0.6 + (0.8 if causal else 0), title or default, pad=30)
    return Drawing(fig, f"リングアテンション {n} デバイス × {steps} ステップ" + ("（因果）" if causal else ""))


def expert_load(load: Sequence[int], dropped: Sequence[int] | None = None, capacity: int | None = None,
                title: str | None = None) -> Drawing:
    """load[e] = エキスパート e を選んだトークンの数（ルーターの実際の出力から数えたもの）。
    dropped[e] を渡すと、そのうちドロップされた分を斜線で上に積む。capacity を渡すと、
    エキスパート 1 つが受け取れる数（容量 × 送信元の数）の線を引く。"""
    load = np.asarray(load).astype(int).reshape(-1)
    if load.size == 0 or (load < 0).any():
        raise ValueError("load must be a non-empty list of non-negative counts")
    drop = np.zeros_like(load) if dropped is None else np.asarray(dropped).astype(int).reshape(-1)
    if drop.shape != load.shape or (drop < 0).any() or (drop > load).any():
        raise ValueError("dropped must have one count per expert, between 0 and the load")
    e = load.size
    fig, ax = _figure(max(3.5, 0.6 * e + 2.0), 2.8)
    kept = load - drop
    ax.bar(range(e), kept, color=_BAR, edgecolor="black", label="処理された")
    if dropped is not None:
        ax.bar(range(e), drop, bottom=kept, color="#f4a6a6", edgecolor="#b03030", hatch="//", label="ドロップ")
        ax.legend(fontsize=8, loc="upper left", frameon=False)
    top = max(int(load.max()), capacity or 0, 1)
    if capacity is not None:
        ax.axhline(capacity, color="black", linestyle="--", linewidth=1)
        ax.text(e - 0.45, capacity + 0.02 * top, f"容量 {capacity}", ha="right", va="bottom", fontsize=9,
                bbox=dict(facecolor="white", edgecolor="none", pad=1))
    for i, v in enumerate(load):
        ax.text(i, v + 0.02 * top, str(int(v)), ha="center", va="bottom", fontsize=9)
    ax.set_xticks(range(e), [f"E{i}" for i in range(e)])
    ax.set_ylim(0, top * 1.3 + 1)
    ax.set_xlabel("エキスパート")
    ax.set_ylabel("トークンの数")
    default = f"エキスパートごとの負荷（合計 {int(load.sum())} トークン" + (
        f"、ドロップ {int(drop.sum())}）" if dropped is not None else "）")
    ax.set_title(title or default, fontsize=11)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return Drawing(fig, f"エキスパート {e} 個の負荷" + (f"、ドロップ {int(drop.sum())}" if dropped is not None else ""))


def dropped_vs_capacity(factors: Sequence[float], dropped: Sequence[int], total: int,
                        title: str | None = None) -> Drawing:
    """容量係数 factors[k] のとき dropped[k] 個のトークンがドロップされた（total 個のうち）、を折れ線で描く。"""
    factors = [float(f) for f in factors]
    dropped = [int(d) for d in dropped]
    if not factors or len(factors) != len(dropped):
        raise ValueError("factors and dropped must have the same non-zero length")
    fig, ax = _figure(4.6, 2.8)
    ax.plot(factors, dropped, marker="o", color=color(0))
    for f, d in zip(factors, dropped):
        ax.text(f, d + 0.02 * max(total, 1), str(d), ha="center", va="bottom", fontsize=9)
    ax.set_xlabel("容量係数")
    ax.set_ylabel("ドロップされたトークンの数")
    ax.set_ylim(0, max(max(dropped), 1) * 1.25)
    ax.set_title(title or f"容量係数とドロップされたトークン（全 {total} トークン）", fontsize=11)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return Drawing(fig, f"容量係数 {len(factors)} 通りとドロップされたトークン")
