"""6.9 節（仕上げ）の図: 損失の曲線（1 デバイスとメッシュ、中断して再開した続き）。

- :func:`loss_curves`: ``[(ラベル, 最初のステップ, 損失の列), ...]`` を、線の種類と印を変えて重ね、
  凡例に線の種類と印も示す（色だけに頼らない）。基準の曲線との差が許容誤差の中にあることを確かめて副題に書く。
"""
from __future__ import annotations

from collections.abc import Sequence

from ._base import Drawing, _figure, color

_STYLES = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ("-", "v"), ("--", "x")]


def loss_curves(curves: Sequence[tuple[str, int, Sequence[float]]], title: str | None = None,
                reference: int = 0, tolerance: float | None = None) -> Drawing:
    """損失の曲線を重ねた図。curves の各要素は (ラベル, 最初のステップ, 損失の列)。

    tolerance を渡すと、reference 番目の曲線と同じステップのほかの曲線の差がどれも tolerance 未満であることを
    確かめて（超えたら ValueError）副題に書きます。差そのものは書きません（下の桁は CPU の命令セットや
    足し算の順で変わるので、図が機械によって変わらないように）。"""
    curves = [(str(label), int(start), [float(v) for v in values]) for label, start, values in curves]
    if not curves or any(not values for _, _, values in curves):
        raise ValueError("曲線が空です（ラベル, 最初のステップ, 損失の列）を 1 つ以上渡してください")
    fig, ax = _figure(6.4, 3.6)
    base_label, base_start, base = curves[reference]
    worst = 0.0
    for i, (label, start, values) in enumerate(curves):
        line, marker = _STYLES[i % len(_STYLES)]
        steps = list(range(start + 1, start + 1 + len(values)))
        every = max(1, len(values) // 8)
        ax.plot(steps, values, linestyle=line, marker=marker, markevery=every, markersize=5,
                color=color(i), markerfacecolor="white" if i % 2 else color(i), linewidth=1.6 if i else 2.6,
                label=label)
        if i != reference:
            for s, v in zip(steps, values):
                k = s - base_start - 1
                if 0 <= k < len(base):
                    worst = max(worst, abs(v - base[k]))
    ax.set_xlabel("ステップ")
    ax.set_ylabel("損失（交差エントロピー）")
    ax.grid(True, linewidth=0.4, alpha=0.5)
    last = max(start + len(values) for _, start, values in curves)
    ax.set_xlim(0.5, last + 0.5)
    ax.legend(loc="upper right", fontsize=8, frameon=True)   # 凡例は線の種類と印も示す（色だけに頼らない）
    if tolerance is not None and worst >= tolerance:
        raise ValueError(f"「{base_label}」との差の最大 {worst:.3g} が tolerance {tolerance:g} 以上です")
    sub = f"「{base_label}」との差はどのステップでも {tolerance:g} 未満" if tolerance is not None else ""
    ax.set_title("\n".join(t for t in (title or "損失の曲線", sub) if t), fontsize=11)
    fig.tight_layout()
    caption = "損失の曲線: " + "、".join(f"{label}（ステップ {start + 1}〜{start + len(values)}、"
                                    f"最後 {values[-1]:.2f}）" for label, start, values in curves)
    return Drawing(fig, caption)
