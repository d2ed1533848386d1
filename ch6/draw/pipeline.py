"""パイプライン並列の図: ステージ × ティックのスケジュール表と、バブルの割合（測った値と式）。

- :func:`pipeline_schedule`: schedule[s][t] = ステージ s がティック t に処理したもの（マイクロバッチの番号、
  "F3" / "B3" のような文字列、インターリーブなら (マイクロバッチ, 何周目 v) の組。-1・None・"" は空き）。
  in_flight_peak=True なら、各ステージが同時に持つ活性値（F で 1 増え、B で 1 減る）の最大も右に書く。
- :func:`bubble_fractions`: マイクロバッチの数ごとに、表から数えたバブルの割合と式 (S − 1)/(M + S − 1) を重ねる。
"""
from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ._base import Drawing, _figure

# 淡い色（濃い文字が読める）。マイクロバッチの番号で選ぶ
_LIGHT = ["#a6cee3", "#fdbf6f", "#b2df8a", "#fb9a99", "#cab2d6", "#ffff99", "#8dd3c7", "#fccde5",
          "#d9d9d9", "#bebada", "#80b1d3", "#ccebc5", "#ffed6f", "#bc80bd", "#fdb462", "#b3de69"]
_IDLE = "#f4f4f4"
_CELL = re.compile(r"^\s*([A-Za-z]*)\s*(-?\d+)(?:\.(\d+))?\s*$")


def _parse(entry):
    """1 マスの中身 → (種類の文字, マイクロバッチ, 周回) か None（空き）。"""
    if entry is None:
        return None
    if isinstance(entry, tuple) and len(entry) == 2:  # インターリーブ: (マイクロバッチ, 何周目)
        m, v = (int(x) for x in entry)
        return None if m < 0 else ("", m, v)
    if isinstance(entry, (int, np.integer)):
        return None if int(entry) < 0 else ("", int(entry), None)
    text = str(entry)
    if not text.strip() or text.strip() == "-1":
        return None
    m = _CELL.match(text)
    if not m:
        raise ValueError(f"スケジュールのマスを読めません: {entry!r}（数か 'F3'・'B3'・'F3.1' の形）")
    return m.group(1).upper(), int(m.group(2)), None if m.group(3) is None else int(m.group(3))


def schedule_cells(schedule) -> list[list[tuple | None]]:
    """表の各マスを (種類, マイクロバッチ, 周回) か None にした表（図とテストで使う）。"""
    return [[_parse(e) for e in row] for row in schedule]


def busy_fraction(schedule) -> float:
    """表のうち、処理で埋まったマスの割合（1 − バブルの割合）。"""
    cells = schedule_cells(schedule)
    total = sum(len(r) for r in cells)
    return sum(c is not None for r in cells for c in r) / total if total else 0.0


def _in_flight(schedule) -> list[list[int]]:
    """各ステージ・各ティックの後に持っている活性値の数（F で 1 増え、B で 1 減る）。"""
    out = []
    for row in schedule_cells(schedule):
        live, counts = 0, []
        for c in row:
            if c is not None:
                live += {"F": 1, "B": -1}.get(c[0], 0)
            counts.append(live)
        out.append(counts)
    return out


def pipeline_schedule(schedule, title: str | None = None, stage_label: str = "ステージ",
                      in_flight_peak: bool = False) -> Drawing:
    """ステージ × ティックの表。文字はマイクロバッチの番号（F/B つきなら、逆伝播 B のマスは下に濃い帯。インターリーブなら
    番号の下に小さく v=何周目）。空き（バブル）は文字のない薄いマス。右に各ステージの空きの数を書き、in_flight_peak=True
    なら同時に持つ活性値の最大も書く。"""
    from matplotlib.patches import Rectangle

    cells = schedule_cells(schedule)
    n_stage = len(cells)
    n_tick = max((len(r) for r in cells), default=0)
    if n_stage == 0 or n_tick == 0:
        raise ValueError("スケジュールが空です")
    cw = 0.62 if n_tick > 24 else 0.75
    fig, ax = _figure(max(4.0, cw * 0.55 * n_tick + (3.4 if in_flight_peak else 2.2)), 0.42 * n_stage + 1.4)
    fs = 7 if n_tick > 24 else 8
    has_backward = False
    peaks = _in_flight(schedule)
    for s, row in enumerate(cells):
        idle = 0
        for t in range(n_tick):
            c = row[t] if t < len(row) else None
            if c is None:
                idle += 1
                ax.add_patch(Rectangle((t, s), 1, 1, facecolor=_IDLE, edgecolor="#bbbbbb", linewidth=0.6))
                continue
            kind, m, v = c
            ax.add_patch(Rectangle((t, s), 1, 1, facecolor=_LIGHT[m % len(_LIGHT)], edgecolor="#333333",
                                   linewidth=0.8))
            if kind == "B":  # 逆伝播: 下に濃い帯
                ax.add_patch(Rectangle((t, s + 0.8), 1, 0.2, facecolor="#333333", edgecolor="#333333",
                                       linewidth=0.8))
                has_backward = True
            label = f"{kind}{m}" if kind else str(m)
            if v is None:
                ax.text(t + 0.5, s + (0.42 if kind == "B" else 0.5), label, ha="center", va="center",
                        fontsize=fs, color="#111111")
            else:  # 番号と周を別の行に（「3.1」のような小数に見えないように）
                ax.text(t + 0.5, s + 0.36, label, ha="center", va="center", fontsize=fs, color="#111111")
                ax.text(t + 0.5, s + 0.74, f"v={v}", ha="center", va="center", fontsize=fs - 2, color="#111111")
        side = f"空き {idle}"
        if in_flight_peak:
            side += f"・活性値 最大 {max(peaks[s], default=0)}"
        ax.text(n_tick + 0.3, s + 0.5, side, ha="left", va="center", fontsize=8, color="#111111")
        ax.text(-0.2, s + 0.5, f"{stage_label} {s}", ha="right", va="center", fontsize=8, color="#111111")
    step = 1 if n_tick <= 16 else 2 if n_tick <= 40 else 5
    for t in range(0, n_tick, step):
        ax.text(t + 0.5, -0.15, str(t), ha="center", va="bottom", fontsize=7, color="#333333")
    note = "ティック →（文字のないマスは空き＝バブル、下に濃い帯は逆伝播 B）" if has_backward else "ティック →（文字のないマスは空き＝バブル）"
    ax.text(n_tick / 2, n_stage + 0.35, note, ha="center", va="top", fontsize=9, color="#111111")
    ax.set_xlim(-0.05, n_tick + 0.05)
    ax.set_ylim(n_stage + 0.9, -0.6)
    ax.set_aspect("equal" if n_tick <= 40 else "auto")
    ax.axis("off")
    bubble = 1 - busy_fraction(schedule)
    ax.set_title(title or f"パイプラインのスケジュール（{n_stage} ステージ × {n_tick} ティック）", fontsize=11, pad=14)
    caption = f"スケジュール {n_stage} ステージ × {n_tick} ティック、バブル {bubble:.3f}"
    if in_flight_peak:
        caption += "、活性値の最大 " + " ".join(str(max(p, default=0)) for p in peaks)
    return Drawing(fig, caption)


def bubble_fractions(micro: Sequence[int], measured: Sequence[float], n_stages: int,
                     title: str | None = None, n_virtual: int = 1) -> Drawing:
    """マイクロバッチの数 M ごとに、実際の表から数えたバブルの割合（点）と式 (S − 1)/(V·M + S − 1)（線）。"""
    micro = [int(m) for m in micro]
    measured = [float(b) for b in measured]
    if len(micro) != len(measured) or not micro:
        raise ValueError(f"M の数 {len(micro)} と測った値の数 {len(measured)} が合いません")
    s, v = int(n_stages), int(n_virtual)
    fig, ax = _figure(5.2, 3.2)
    grid = np.arange(1, max(micro) + 1)
    ax.set_xlim(0.5, max(micro) * 1.12 + 0.5)
    ax.plot(grid, (s - 1) / (v * grid + s - 1), color="#1f4e79", linewidth=1.5,
            label=f"式 (S − 1)/(M + S − 1)、S = {s}" if v == 1 else f"式 (S − 1)/(V·M + S − 1)、S = {s}、V = {v}")
    ax.plot(micro, measured, "o", color="#c0504d", markersize=7, label="表から数えた値")
    for m, b in zip(micro, measured):
        ax.annotate(f"{b:.2f}", (m, b), textcoords="offset points", xytext=(6, 6), fontsize=8, color="#111111")
    ax.set_xlabel("マイクロバッチの数 M")
    ax.set_ylabel("バブルの割合")
    ax.set_ylim(-0.03, 1.03)
    ax.grid(True, color="#dddddd")
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title(title or f"バブルの割合とマイクロバッチの数（{s} ステージ）", fontsize=11)
    pairs = ", ".join(f"M={m}: {b:.3f}" for m, b in zip(micro, measured))
    return Drawing(fig, f"バブルの割合 S={s} {pairs}")
