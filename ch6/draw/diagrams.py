"""流れと軸の図: 処理の段階の帯、vmap の in_axes / out_axes、判断の流れ図。"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ._base import DPI, Drawing, _box, _figure, _finish, color, ink  # noqa: F401

# ---------------------------------------------------------------- 段階の帯

def timeline(stages: Sequence[tuple[str, str]], title: str | None = None) -> Drawing:
    """stages = [(段階の名前, 種類)]。種類ごとに色を決め（"通信" は暖色、"計算" は寒色）、左から順に並べる。"""
    kinds = {k: i for i, k in enumerate(dict.fromkeys(kind for _, kind in stages))}
    fig, ax = _figure(max(3.0, 1.3 * len(stages) + 0.6), 1.6)
    for i, (name, kind) in enumerate(stages):
        _box(ax, i * 1.2, 0, 1.1, 0.8, color(kinds[kind] * 3 + 1), name, fontsize=9)
        ax.text(i * 1.2 + 0.55, 0.95, kind, ha="center", va="top", fontsize=8)
    _finish(ax, len(stages) * 1.2, 1.2, title)
    return Drawing(fig, "段階: " + " → ".join(n for n, _ in stages))


# ---------------------------------------------------------------- vmap のバッチ軸（in_axes / out_axes）

def vmap_axes(inputs: Sequence[tuple[str, object]], in_axes, output: tuple[str, object], out_axes: int = 0,
              title: str | None = None, limit: int = 12) -> Drawing:
    """vmap が引数のどの軸をバッチにし、出力のどの軸にバッチを置いたかを、実際の配列の形から描く。

    inputs = [(名前, 配列), ...]、in_axes = 引数ごとの軸（整数 1 つなら全部の引数に同じ軸、None は全サンプル共通）、
    output = (名前, vmap の出力), out_axes = 出力のバッチの軸。0〜2 次元の配列を、要素 1 つを 1 マスにした格子で描き、
    バッチの軸に沿った b 番目の切り口の各マスにサンプルの番号 b を書き、その色で塗る（共通の引数は白で番号なし）。1 つの軸に limit マスより多ければ、
    先頭の limit マスだけを描いて「…」を添える。バッチの大きさが引数と出力で食い違えば ValueError。"""
    inputs = list(inputs)
    axes = list(in_axes) if isinstance(in_axes, (tuple, list)) else [in_axes] * len(inputs)
    if len(axes) != len(inputs):
        raise ValueError(f"in_axes has {len(axes)} entries for {len(inputs)} inputs")
    panels = [(name, tuple(np.shape(x)), ax, f"in_axes={ax}") for (name, x), ax in zip(inputs, axes)]
    panels.append((output[0], tuple(np.shape(output[1])), out_axes, f"out_axes={out_axes}"))
    sizes = set()
    for name, shape, ax, _ in panels:
        if len(shape) > 2:
            raise ValueError(f"{name}: only arrays of 0 to 2 dimensions can be drawn, got shape {shape}")
        if ax is None:
            continue
        if not shape or not -len(shape) <= ax < len(shape):
            raise ValueError(f"{name}: axis {ax} is out of range for shape {shape}")
        sizes.add(shape[ax % len(shape)])
    if len(sizes) != 1:
        raise ValueError(f"the batch sizes disagree: {sorted(sizes)}")
    batch = sizes.pop()
    cell, gap, head, arrow = 0.3, 0.6, 1.1, 1.0          # 単位はインチ
    grids = []
    for name, shape, ax, note in panels:
        rows, cols = shape if len(shape) == 2 else ((1, shape[0]) if len(shape) == 1 else (1, 1))
        grids.append((name, shape, ax, note, min(rows, limit), min(cols, limit), rows > limit, cols > limit))
    widths = [max(g[5] * cell, 1.3) for g in grids]
    heights = [g[4] * cell for g in grids]
    # 引数のパネルを gap ずつあけて並べ、出力のパネルの前には矢印の幅 arrow をあける
    lefts, x = [], 0.0
    for k, w in enumerate(widths):
        if k == len(grids) - 1:
            x += arrow - gap
        lefts.append(x)
        x += w + gap
    total_w = x - gap
    total_h = head + max(heights) + 0.45
    fig, ax_ = _figure(total_w + 0.3, total_h + 0.5)
    for k, ((name, shape, bax, note, rows, cols, more_r, more_c), w, x0) in enumerate(zip(grids, widths, lefts)):
        left = x0 + (w - cols * cell) / 2
        if k == len(grids) - 1:                           # 出力の前に矢印
            prev_end = lefts[k - 1] + widths[k - 1] if k else 0.0
            y = head + heights[k] / 2
            ax_.annotate("", xy=(left - 0.08, y), xytext=(prev_end + 0.08, y), arrowprops=dict(arrowstyle="->", lw=1.5))
            ax_.text((prev_end + left) / 2, y - 0.06, "vmap", ha="center", va="bottom", fontsize=9)
        ax_.text(x0 + w / 2, head - 0.08, f"{name}\n形 {shape}\n{note}", ha="center", va="bottom", fontsize=8,
                 linespacing=1.15)
        bdim = None if bax is None else bax % len(shape)
        for r in range(rows):
            for c in range(cols):
                if bdim is None:
                    face, label = "#ffffff", ""
                else:
                    b = (r, c)[bdim] if len(shape) == 2 else c
                    face, label = color(b), str(b)
                _box(ax_, left + c * cell, head + r * cell, cell, cell, face, label, fontsize=7)
        if more_c:
            ax_.text(left + cols * cell + 0.05, head + rows * cell / 2, "…", ha="left", va="center", fontsize=9)
        if more_r:
            ax_.text(left + cols * cell / 2, head + rows * cell + 0.02, "…", ha="center", va="top", fontsize=9, rotation=90)
    shown = min(batch, limit)
    legend = f"マスの数字 = サンプルの番号（0〜{batch - 1}）、数字のないマス = 全サンプル共通"
    if batch > limit:
        legend += f"（描いたのは先頭の {shown} 個）"
    ax_.text(total_w / 2, total_h - 0.05, legend, ha="center", va="top", fontsize=8)
    _finish(ax_, total_w, total_h + 0.25, title or f"vmap のバッチ軸（バッチ {batch}）")
    return Drawing(fig, "vmap: " + "、".join(f"{n} {note}" for n, _, _, note, *_ in grids))


# ---------------------------------------------------------------- 判断の流れ図

_FLOW_FILLS = [("#fff4d6", "#b8860b"), ("#dcebff", "#2f5d9f"), ("#eeeeee", "#777777"), ("#e3f4e1", "#3d7a3a"),
               ("#fde2e4", "#a8324a")]
# 種類ごとの枠線（白黒でも種類がわかるように、色に加えて線の形と太さを変える）
_FLOW_LINES = [("-", 1.4), ("-", 3.0), ("--", 1.6), (":", 2.2), ("-.", 1.8)]


def flowchart(nodes: Sequence[tuple[str, str, str, tuple[float, float]]],
              edges: Sequence[tuple[str, str, str]], title: str | None = None,
              box: tuple[float, float] = (2.3, 0.9), dashed: Sequence[tuple[str, str]] = ()) -> Drawing:
    """判断の流れ図を、節と矢印の表から描く（6.5 の「どれを使うか」など）。

    nodes = [(名前, 箱の文字, 種類, (x, y)), ...]。(x, y) は箱の中心（単位はインチ、y は下向き）。
    種類ごとに枠線の形と塗りを決め（出てきた順に、細い実線・太い実線・破線・点線・一点鎖線。塗りは淡い黄・青・
    灰・緑・赤で、白黒でも枠線で種類がわかる）、図の下に種類の凡例を同じ枠で置く。
    edges = [(から, へ, ラベル), ...]。下の段へは箱の下端から上端へ、同じ高さなら横の辺どうしを結ぶ。
    dashed に (から, へ) を入れた矢印は破線（本筋ではない道）。知らない名前の矢印は ValueError。"""
    from matplotlib.patches import FancyBboxPatch

    pos = {name: (float(x), float(y)) for name, _, _, (x, y) in nodes}
    if len(pos) != len(nodes):
        raise ValueError("node names must be unique")
    for a, b, _ in edges:
        if a not in pos or b not in pos:
            raise ValueError(f"edge {a!r} -> {b!r} names an unknown node")
    kinds = list(dict.fromkeys(kind for _, _, kind, _ in nodes))
    if len(kinds) > len(_FLOW_FILLS):
        raise ValueError(f"at most {len(_FLOW_FILLS)} kinds of node, got {len(kinds)}")
    w, h = box
    xs = [x for x, _ in pos.values()]
    ys = [y for _, y in pos.values()]
    left, right = min(xs) - w / 2, max(xs) + w / 2
    top, bottom = min(ys) - h / 2, max(ys) + h / 2
    legend_h = 0.45
    fig, ax = _figure(right - left + 0.3, bottom - top + legend_h + 0.6)
    for name, text, kind, _ in nodes:
        x, y = pos[name]
        face, edge = _FLOW_FILLS[kinds.index(kind)]
        style, lw = _FLOW_LINES[kinds.index(kind)]
        ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0,rounding_size=0.12",
                                    facecolor=face, edgecolor=edge, linewidth=lw, linestyle=style))
        ax.text(x, y, text, ha="center", va="center", fontsize=11, linespacing=1.2)
    dashed = {tuple(e) for e in dashed}
    for a, b, label in edges:
        (x0, y0), (x1, y1) = pos[a], pos[b]
        if abs(y1 - y0) < 1e-6:                      # 同じ高さ: 横の辺どうし
            sx = 1 if x1 > x0 else -1
            start, end = (x0 + sx * w / 2, y0), (x1 - sx * w / 2, y1)
        else:                                        # 下（または上）の段へ: 下端から上端へ
            sy = 1 if y1 > y0 else -1
            start, end = (x0, y0 + sy * h / 2), (x1, y1 - sy * h / 2)
        ax.annotate("", xy=end, xytext=start,
                    arrowprops=dict(arrowstyle="-|>", lw=1.3, color="#444444",
                                    linestyle="--" if (a, b) in dashed else "-"))
        if label:
            mx, my = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
            ax.text(mx, my, label, ha="center", va="center", fontsize=10, color="#333333",
                    bbox=dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none"))
    # 凡例: 種類ごとの枠（箱と同じ線の形・太さ・塗り）
    lx, ly = left, bottom + 0.25
    for kind in kinds:
        face, edge = _FLOW_FILLS[kinds.index(kind)]
        style, lw = _FLOW_LINES[kinds.index(kind)]
        ax.add_patch(FancyBboxPatch((lx, ly), 0.45, 0.26, boxstyle="round,pad=0,rounding_size=0.05",
                                    facecolor=face, edgecolor=edge, linewidth=lw, linestyle=style))
        ax.text(lx + 0.55, ly + 0.13, kind, ha="left", va="center", fontsize=10)
        lx += 0.75 + 0.2 * len(kind) + 0.3
    ax.set_xlim(left - 0.1, right + 0.1)
    ax.set_ylim(bottom + legend_h + 0.1, top - 0.1)
    ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=12)
    return Drawing(fig, "流れ図: " + "、".join(text.split("\n")[0] for _, text, _, _ in nodes))
