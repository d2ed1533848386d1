"""メッシュとシャーディングの図: メッシュ、1 つ・複数の配列のシャード、複数プロセスのグローバルメッシュ。"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ._base import DPI, Drawing, _box, _figure, _finish, color  # noqa: F401

# ---------------------------------------------------------------- メッシュ

def mesh(m, title: str | None = None) -> Drawing:
    """メッシュの格子: 各マスにデバイス番号。行が最初の軸、列が 2 番目の軸（1 次元なら 1 行）。
    デバイスが複数のプロセスにまたがるときは、プロセスごとに色を分けて「プロセス p」と書く。"""
    devs = np.asarray(m.devices)
    names = tuple(m.axis_names)
    grid = devs.reshape(1, -1) if devs.ndim == 1 else devs.reshape(devs.shape[0], -1)
    rows, cols = grid.shape
    procs = sorted({d.process_index for d in devs.flat})
    fig, ax = _figure(max(2.5, 0.9 * cols + 1.2), max(1.4, 0.9 * rows + 1.0))
    for r in range(rows):
        for c in range(cols):
            d = grid[r, c]
            face = color(procs.index(d.process_index)) if len(procs) > 1 else color(d.id)
            label = f"D{d.id}" + (f"\nP{d.process_index}" if len(procs) > 1 else "")
            _box(ax, c, r, 1, 1, face, label)
    sizes = "×".join(f"{n}={s}" for n, s in zip(names, devs.shape))
    if devs.ndim == 1:
        ax.text(cols / 2, rows + 0.25, f"軸 {names[0]}（{cols}）→", ha="center", va="top", fontsize=10)
    else:
        ax.text(cols / 2, rows + 0.25, f"軸 {names[1]}（{cols}）→", ha="center", va="top", fontsize=10)
        ax.text(-0.15, rows / 2, f"軸 {names[0]}\n（{rows}）\n↓", ha="right", va="center", fontsize=10)
    extra = f"、{len(procs)} プロセス" if len(procs) > 1 else ""
    _finish(ax, cols, rows + 0.6, title or f"メッシュ {sizes}（デバイス {devs.size} 個{extra}）")
    return Drawing(fig, f"メッシュ {sizes}")


# ---------------------------------------------------------------- シャーディングされた配列

def _spec_text(x) -> str:
    spec = getattr(getattr(x, "sharding", None), "spec", None)
    if spec is None:
        return type(getattr(x, "sharding", None)).__name__
    return "P(" + ", ".join(repr(e) for e in spec) + ")"  # P('data',) ではなく P('data')


def shard_layout(x) -> dict[tuple[int, int, int, int], list[int]]:
    """2 次元に見た配列の各ブロック (行の始め, 行の終わり, 列の始め, 列の終わり) -> それを持つデバイス番号。"""
    shape = tuple(x.shape)
    rows, cols = (shape + (1, 1))[:2] if len(shape) < 2 else shape[:2]
    if len(shape) == 1:
        rows, cols = 1, shape[0]
    layout: dict[tuple[int, int, int, int], list[int]] = {}
    for s in x.addressable_shards:
        idx = tuple(s.index) + (slice(None),) * 2
        if len(shape) == 1:
            rs, cs = slice(0, 1), idx[0]
        else:
            rs, cs = idx[0], idx[1]
        r0, r1, _ = rs.indices(rows)
        c0, c1, _ = cs.indices(cols)
        layout.setdefault((r0, r1, c0, c1), []).append(s.device.id)
    return {k: sorted(v) for k, v in sorted(layout.items())}


def sharding(x, title: str | None = None) -> Drawing:
    """配列の全体を長方形で描き、各ブロックをそれを持つデバイスの色で塗る（複製なら全デバイスの番号を書く）。
    1 次元の配列は 1 行、3 次元以上は最初の 2 軸で描く。"""
    shape = tuple(x.shape)
    layout = shard_layout(x)
    rows = 1 if len(shape) == 1 else shape[0]
    cols = shape[0] if len(shape) == 1 else (shape[1] if len(shape) > 1 else 1)
    width = 4.0
    height = max(0.8, min(3.0, width * rows / max(cols, 1))) if len(shape) > 1 else 0.8
    fig, ax = _figure(width + 0.6, height + 1.0)
    for (r0, r1, c0, c1), devs in layout.items():
        x0, x1 = width * c0 / cols, width * c1 / cols
        y0, y1 = height * r0 / rows, height * r1 / rows
        label = ",".join(f"D{d}" for d in devs) if len(devs) <= 4 else f"D{devs[0]}…D{devs[-1]}（{len(devs)} 個）"
        _box(ax, x0, y0, x1 - x0, y1 - y0, color(devs[0]), label, fontsize=9)
    _finish(ax, width, height, title or f"{_spec_text(x)}  形 {shape}")
    return Drawing(fig, f"配列 {shape} {_spec_text(x)}")


# ---------------------------------------------------------------- 複数の配列のシャーディングを並べる

def shardings(items: Sequence[tuple[str, object]], title: str | None = None, ncols: int | None = None) -> Drawing:
    """複数の配列のシャーディングを並べて描く（行列積の入力と出力、層ごとのパラメータなど）。

    items = [(ラベル, 配列), ...]。各パネルの上にラベル・spec・形を書き、ブロックをそれを持つデバイスの色で
    塗る（:func:`sharding` と同じく ``addressable_shards`` から）。ncols 個ごとに次の行へ折り返す（既定は 1 行）。
    パネルの大きさは配列の縦横比をおおまかに表す（極端な比は切り詰める）。"""
    items = list(items)
    ncols = len(items) if not ncols else int(ncols)
    scale = 0.9                              # 1 単位 = 0.9 インチ
    pw, gap, head = 1.6, 0.35, 0.85          # パネルの幅、パネルの間、見出しの高さ（単位）
    tall = 1.2                               # パネルの高さの上限（単位）
    char = 0.07 / scale                      # 8 ポイントの文字 1 つのおおよその幅（単位）
    dims = []
    for _, x in items:
        shape = tuple(x.shape)
        rows, cols = (1, shape[0]) if len(shape) == 1 else (shape[0], shape[1]) if len(shape) > 1 else (1, 1)
        h = 0.4 if len(shape) < 2 else float(np.clip(pw * rows / max(cols, 1), 1.1, tall))
        dims.append((rows, cols, h))
    grid_rows = [list(range(i, min(i + ncols, len(items)))) for i in range(0, len(items), ncols)]
    row_h = [max(dims[i][2] for i in r) + head for r in grid_rows]
    total_w = ncols * pw + (ncols - 1) * gap
    total_h = sum(row_h)
    fig, ax = _figure(scale * total_w + 0.4, scale * total_h + 0.6)
    y = 0.0
    for r, idx in enumerate(grid_rows):
        for c, i in enumerate(idx):
            label, x = items[i]
            rows, cols, h = dims[i]
            px, py = c * (pw + gap), y + head
            ax.text(px + pw / 2, py - 0.06, f"{label}\n{_spec_text(x)}\n形 {tuple(x.shape)}",
                    ha="center", va="bottom", fontsize=8, linespacing=1.15)
            for (r0, r1, c0, c1), devs in shard_layout(x).items():
                x0, x1 = px + pw * c0 / cols, px + pw * c1 / cols
                y0, y1 = py + h * r0 / rows, py + h * r1 / rows
                w, hh = x1 - x0, y1 - y0
                _box(ax, x0, y0, w, hh, color(devs[0]), "")
                text = ",".join(f"D{d}" for d in devs) if len(devs) <= 4 else f"D{devs[0]}…D{devs[-1]}（{len(devs)} 個）"
                for size in (8, 7, 6):           # 入る大きさで横書き、入らなければ縦書き、それでも無理なら色だけ
                    need = char * size / 8 * (len(text) + 1)
                    if need <= w and 2.2 * char * size / 8 <= hh:
                        ax.text(x0 + w / 2, y0 + hh / 2, text, ha="center", va="center", fontsize=size, color="white")
                        break
                    if need <= hh and 2.2 * char * size / 8 <= w:
                        ax.text(x0 + w / 2, y0 + hh / 2, text, ha="center", va="center", fontsize=size, color="white",
                                rotation=90)
                        break
        y += row_h[r]
    _finish(ax, total_w, total_h, title)
    return Drawing(fig, "シャーディング: " + "、".join(label for label, _ in items))


# ---------------------------------------------------------------- プロセス → デバイス → グローバルメッシュ

def process_grid(device_ids: Sequence[int], process_of: Sequence[int], axis_names: Sequence[str],
                 shape: Sequence[int], rows: dict[int, tuple[int, int]] | None = None,
                 valid_rows: int | None = None, title: str | None = None) -> Drawing:
    """複数プロセスのグローバルメッシュを、各プロセスが報告した値から描く（別のプロセスの Mesh は
    このカーネルに持ってこられないので、デバイス番号と持ち主のプロセス番号の列を受け取る）。

    device_ids: メッシュの順（``mesh.devices.flat``）のデバイス番号。process_of: 同じ順の ``process_index``。
    上の段にプロセス、中の段にメッシュの格子（各マスにデバイス番号、プロセスごとに色分け）を描く。
    rows（デバイス番号 -> グローバル配列の行の範囲 (始め, 終わり)）を渡すと、下の段に配列の行を横に並べ、
    各範囲をそれを持つデバイスのプロセスの色で塗る。valid_rows より後ろの行はパディングとして斜線で示す。"""
    from matplotlib.patches import Rectangle

    ids = [int(i) for i in device_ids]
    owner = dict(zip(ids, (int(p) for p in process_of)))
    if len(ids) != len(owner) or len(ids) != int(np.prod(shape)):
        raise ValueError(f"device_ids ({len(ids)}) と process_of と shape {tuple(shape)} の大きさが合いません")
    names = tuple(axis_names)
    grid = np.asarray(ids).reshape(1, -1) if len(shape) == 1 else np.asarray(ids).reshape(shape[0], -1)
    n_rows, cols = grid.shape
    procs = sorted(set(owner.values()))
    top = 1.1                                         # プロセスの段の高さ（格子は top から）
    strip = 0.0 if rows is None else 1.4              # 行の段の高さ
    fig, ax = _figure(max(3.2, 1.0 * cols + 1.6), 1.0 * n_rows + top + strip + 1.0)
    # 上の段: プロセス（幅を等分）。格子が 1 行なら、各プロセスから自分のデバイスへ線を引く
    w = cols / len(procs)
    for k, p in enumerate(procs):
        mine = [d for d in ids if owner[d] == p]
        _box(ax, k * w + 0.05, 0, w - 0.1, 0.6, color(k), f"プロセス {p}\nデバイス {len(mine)} 個", fontsize=8)
        if k == 0:
            ax.text(-0.15, 0.3, "プロセス", ha="right", va="center", fontsize=9)
        if n_rows == 1:
            for c in range(cols):
                if owner[int(grid[0, c])] == p:
                    ax.plot([k * w + w / 2, c + 0.5], [0.6, top], color="gray", lw=0.8)
    # 中の段: メッシュの格子
    for r in range(n_rows):
        for c in range(cols):
            d = int(grid[r, c])
            _box(ax, c, top + r, 1, 1, color(procs.index(owner[d])), f"D{d}\nP{owner[d]}", fontsize=9)
    y_axis = top + n_rows + 0.05
    if n_rows == 1:
        ax.text(-0.15, top + 0.5, "デバイス", ha="right", va="center", fontsize=9)
    if len(shape) == 1:
        ax.text(cols / 2, y_axis, f"軸 {names[0]}（{cols}）→", ha="center", va="top", fontsize=9)
    else:
        ax.text(cols / 2, y_axis, f"軸 {names[1]}（{cols}）→", ha="center", va="top", fontsize=9)
        ax.text(-0.15, top + n_rows / 2, f"軸 {names[0]}\n（{n_rows}）\n↓", ha="right", va="center", fontsize=9)
    # 下の段: グローバル配列の行と、それを持つデバイス
    if rows is not None:
        y0 = top + n_rows + 0.5
        total = max(stop for _, stop in rows.values())
        blocks: dict[tuple[int, int], list[int]] = {}
        for d, (start, stop) in sorted(rows.items()):
            blocks.setdefault((int(start), int(stop)), []).append(int(d))
        for (start, stop), devs in sorted(blocks.items()):
            x0, x1 = cols * start / total, cols * stop / total
            label = ",".join(f"D{d}" for d in devs) + f"\n{start}:{stop}"
            _box(ax, x0, y0, x1 - x0, 0.7, color(procs.index(owner[devs[0]])), label, fontsize=8)
        ax.text(-0.15, y0 + 0.35, "行", ha="right", va="center", fontsize=9)
        note = f"グローバル配列の行 0:{total} と、それを持つデバイス"
        if valid_rows is not None and valid_rows < total:
            x0 = cols * valid_rows / total
            ax.add_patch(Rectangle((x0, y0), cols - x0, 0.7, facecolor="none", edgecolor="black", hatch="////"))
            note += f"\n斜線はパディング {total - valid_rows} 行（{valid_rows}:{total}）"
        ax.text(0, y0 + 0.8, note, ha="left", va="top", fontsize=8)
    sizes = "×".join(f"{n}={s}" for n, s in zip(names, shape))
    _finish(ax, cols, top + n_rows + strip + 0.2,
            title or f"グローバルメッシュ {sizes}（{len(procs)} プロセス、デバイス {len(ids)} 個）")
    return Drawing(fig, f"グローバルメッシュ {sizes}、{len(procs)} プロセス")
