"""通信と計算を重ねる図（6.11b 節）: collective matmul のリングの表と、重ねたときと重ねないときの時間の帯。

- :func:`ring_schedule`: ``ch6.overlap.trace`` がリングで実際に運んだシャードの番号から、デバイス × ステップの表。
  各マスに、そのステップで掛けたシャードの番号を書く。右回りで届いたものは → と右上がりの斜線、左回りで届いたものは
  ← と右下がりの斜線、そのデバイスがはじめから持つシャードは「元」と書いて斜線なし（白黒でも読める）。
- :func:`overlap_timeline`: ステップごとの行列積の秒と送信の秒（``ch6.cost`` の見積もり）から、重ねないとき
  （行列積の後に送信）と重ねたとき（同じステップの中で同時に進み、遅いほうで次へ）の 2 本の帯。
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ._base import Drawing, _figure

_OWN, _RIGHT, _LEFT = "#f4f4f4", "#a6cee3", "#fdbf6f"


def ring_schedule(arrived, title: str | None = None) -> Drawing:
    """arrived[d][s] = デバイス d がステップ s に掛けたシャードの番号の組（右回りで届いたもの, 左回りで届いたもの）。
    -1 は「なし」。``overlap.trace`` の 1 つ目の戻り値を (デバイス, ステップ, 2) の形にしたもの。ステップ 0 の
    右の欄はそのデバイスがはじめから持つシャード。下に各ステップで送るかどうか（次のステップに届いたものがあるか）を書く。"""
    a = np.asarray(arrived)
    if a.ndim != 3 or a.shape[2] != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"arrived は (デバイス, ステップ, 2) の形です: {a.shape}")
    n, steps, _ = a.shape
    from matplotlib.patches import Rectangle

    cw, ch = 1.6, 0.62
    fig, ax = _figure(max(4.0, 0.95 * cw * steps + 2.0), 0.42 * n + 1.9)
    for d in range(n):
        for s in range(steps):
            right, left = int(a[d, s, 0]), int(a[d, s, 1])
            x, y = s * cw, d * ch
            parts = [(right, "元" if s == 0 else "→", _OWN if s == 0 else _RIGHT, "" if s == 0 else "//")]
            if left >= 0:
                parts.append((left, "←", _LEFT, "\\\\"))
            width = cw / len(parts)
            for k, (shard, mark, face, hatch) in enumerate(parts):
                if shard < 0:
                    continue
                ax.add_patch(Rectangle((x + k * width, y), width, ch, facecolor=face, edgecolor="#333333",
                                       hatch=hatch, linewidth=0.8))
                ax.text(x + (k + 0.5) * width, y + ch / 2, f"{mark}{shard}", ha="center", va="center", fontsize=8,
                        color="#111111", bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.6})
        ax.text(-0.15, d * ch + ch / 2, f"デバイス {d}", ha="right", va="center", fontsize=8)
    for s in range(steps):
        ax.text(s * cw + cw / 2, -0.12, f"ステップ {s}", ha="center", va="bottom", fontsize=8)
        if s + 1 < steps:
            sends = ("→" if (a[:, s + 1, 0] >= 0).any() else "") + ("←" if (a[:, s + 1, 1] >= 0).any() else "")
            note = f"送る {sends}"
        else:
            note = "送らない"
        ax.text(s * cw + cw / 2, n * ch + 0.12, note, ha="center", va="top", fontsize=8)
    ax.text(steps * cw / 2, n * ch + 0.5, "マスの数 = 掛けたシャードの番号（元: はじめから持つ、→ 右回り・/ の斜線、← 左回り・\\ の斜線）",
            ha="center", va="top", fontsize=8)
    ax.set_xlim(-0.05, steps * cw + 0.05)
    ax.set_ylim(n * ch + 0.95, -0.45)
    ax.axis("off")
    ax.set_title(title or f"リングで届いたシャード（{n} デバイス × {steps} ステップ）", fontsize=11, pad=10)
    both = int((a[:, :, 1] >= 0).sum())
    return Drawing(fig, f"リング {n} デバイス × {steps} ステップ、左回りで届いたシャード {both} 個")


def overlap_timeline(step_math: Sequence[float], step_comm: Sequence[float], title: str | None = None,
                     unit: float = 1e-6, unit_name: str = "μs") -> Drawing:
    """step_math[s]・step_comm[s] はステップ s の行列積と送信の秒。上の帯は重ねないとき（行列積、送信、行列積 …）、
    下の帯は重ねたとき（ステップの中で行列積と送信が同時に進み、遅いほうが終わると次のステップ）。
    行列積は斜線なし、送信は × のハッチング、送信が行列積より長くはみ出た部分（見える通信）は黒い枠の太線で囲む。"""
    from matplotlib.patches import Rectangle

    math = [float(v) for v in step_math]
    comm = [float(v) for v in step_comm]
    if not math or len(math) != len(comm) or any(v < 0 or not np.isfinite(v) for v in math + comm):
        raise ValueError("step_math と step_comm は同じ長さの、0 以上の有限の秒の列です")
    serial = sum(math) + sum(comm)
    overlapped = sum(max(m, c) for m, c in zip(math, comm))
    fig, ax = _figure(7.6, 2.6)
    scale = 10.0 / serial

    def box(x0, width, y, face, hatch, label, edge="#333333", lw=0.8):
        if width <= 0:
            return
        ax.add_patch(Rectangle((x0 * scale, y), width * scale, 0.42, facecolor=face, edgecolor=edge, hatch=hatch,
                               linewidth=lw))
        if label and width * scale > 0.45:
            ax.text((x0 + width / 2) * scale, y + 0.21, label, ha="center", va="center", fontsize=7, color="#111111",
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.6})

    t = 0.0
    for s, (m, c) in enumerate(zip(math, comm)):
        box(t, m, 0.0, "#cfe2f3", "", f"積{s}")
        box(t + m, c, 0.0, "#fce5cd", "xx", f"送{s}" if c > 0 else "")
        t += m + c
    t = 0.0
    for s, (m, c) in enumerate(zip(math, comm)):
        box(t, m, 0.75, "#cfe2f3", "", f"積{s}")
        box(t, min(c, m), 1.2, "#fce5cd", "xx", f"送{s}" if c > 0 else "")
        if c > m:
            box(t + m, c - m, 1.2, "#fce5cd", "xx", "", edge="black", lw=2.0)
        t += max(m, c)
    ax.text(-0.1, 0.21, f"重ねない {serial / unit:,.1f} {unit_name}", ha="right", va="center", fontsize=8)
    ax.text(-0.1, 0.96, f"重ねる {overlapped / unit:,.1f} {unit_name}：行列積", ha="right", va="center", fontsize=8)
    ax.text(-0.1, 1.41, "送信", ha="right", va="center", fontsize=8)
    ax.text(5.0, 1.85, "斜線なし = 行列積（積 s）、× のハッチング = 送信（送 s）、太い枠 = 行列積の裏に隠れなかった送信",
            ha="center", va="top", fontsize=8)
    ax.set_xlim(-0.05, 10.1)
    ax.set_ylim(2.0, -0.2)
    ax.axis("off")
    ax.set_title(title or "ステップごとの行列積と送信", fontsize=11)
    return Drawing(fig, f"ステップ {len(math)} 個、重ねない {serial / unit:.1f} {unit_name}、"
                        f"重ねる {overlapped / unit:.1f} {unit_name}")
