"""プロファイル（6.11a 節）の図: 記録した、または測ったトレースの演算から描きます（``ch6.profile``）。

- :func:`op_timeline`: 1 回の実行の演算を、ch6.profile の分類ごとの行に区間で並べた時間軸
- :func:`category_bars`: いくつかのトレースの、1 回の実行あたりの時間を分類ごとに積み上げた横棒

分類ごとに塗りと斜線の模様を変え、行の名前や棒の中の文字でも分類を書きます（白黒でも読める）。
"""
from __future__ import annotations

from ._base import Drawing, _figure, color

_HATCH = {"行列積": "", "その他の融合": "//", "コピー・レイアウト": "..", "集団通信": "xx", "制御": "\\\\",
          "その他": "++", "空き（演算のない時間）": "--"}


def _categories():
    from ..profile import CATEGORIES, IDLE

    return list(CATEGORIES) + [IDLE]


def _style(category: str) -> dict:
    order = _categories()
    i = order.index(category) if category in order else len(order)
    return dict(facecolor=color(i), hatch=_HATCH.get(category, ""), edgecolor="black", linewidth=0.3)


def op_timeline(prof, step: int = 0, title: str | None = None, start: float = 0.0,
                end: float | None = None) -> Drawing:
    """prof（``ch6.profile.Profile``）の step 回目の実行の演算を、分類ごとの行に区間（正味の時間で塗る）で
    並べる。横軸は実行の開始からのマイクロ秒。start / end（マイクロ秒）で一部を拡大する。"""
    from matplotlib.patches import Rectangle

    ops = prof.step_ops(step)
    if not ops:
        raise ValueError(f"このトレースには {step} 回目の実行の演算がありません")
    t0 = prof.steps[step][1] if prof.steps else ops[0].start
    span = (prof.steps[step][2] if prof.steps else ops[-1].start + ops[-1].duration - t0)
    end = span if end is None else min(end, span)
    used = [c for c in _categories() if any(o.category == c for o in ops)]
    fig, ax = _figure(9.0, 0.55 * len(used) + 1.4)
    for row, category in enumerate(used):
        for o in ops:
            if o.category != category:
                continue
            a, b = o.start - t0, o.start - t0 + o.duration
            if b < start or a > end:
                continue
            ax.add_patch(Rectangle((max(a, start), row + 0.1), min(b, end) - max(a, start), 0.8,
                                   **_style(category)))
        ax.text(start - (end - start) * 0.01, row + 0.5, category, ha="right", va="center", fontsize=9)
    ax.set_xlim(start, end)
    ax.set_ylim(len(used), 0)
    ax.set_yticks([])
    ax.set_xlabel("実行の開始からの時間（マイクロ秒）")
    device = prof.meta.get("device_kind") or prof.device
    ax.set_title(title or f"{device} の演算（{prof.meta.get('scenario', '')}、{step + 1} 回目の実行）", fontsize=11)
    total = sum(o.self_time for o in ops)
    return Drawing(fig, f"演算の時間軸 {prof.meta.get('scenario', '')} 実行 {step + 1} 回目: 演算 {len(ops)} 個、"
                        f"分類 {'・'.join(used)}、実行 {span:.0f} マイクロ秒のうち演算 {total:.0f} マイクロ秒")


def category_bars(profiles: dict, title: str | None = None, unit: str = "ms") -> Drawing:
    """profiles は {ラベル: Profile}。1 回の実行あたりの時間を分類ごとに積み上げた横棒（上から与えた順）。
    unit は "ms" か "マイクロ秒"。"""
    scale = {"ms": 1e-3, "マイクロ秒": 1.0}[unit]
    rows = {label: p.by_category() for label, p in profiles.items()}
    used = [c for c in _categories() if any(r.get(c, 0) > 0 for r in rows.values())]
    fig, ax = _figure(9.0, 0.7 * len(rows) + 2.2)
    longest = max(sum(r.values()) for r in rows.values()) * scale
    for y, r in enumerate(rows.values()):
        x = 0.0
        for c in used:
            w = r.get(c, 0.0) * scale
            if w <= 0:
                continue
            ax.barh(y, w, left=x, height=0.6, **_style(c))
            if w > 0.16 * longest:
                ax.text(x + w / 2, y, c, ha="center", va="center", fontsize=7,
                        bbox=dict(facecolor="white", edgecolor="none", pad=0.6, alpha=0.85))
            x += w
        ax.text(x + longest * 0.01, y, f"{x:.2f} {unit}", ha="left", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), list(rows))
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, longest * 1.18)
    ax.set_xlabel(f"1 回の実行あたりの時間（{unit}）")
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(**_style(c), label=c) for c in used], loc="upper center", fontsize=8,
              ncol=min(4, len(used)), bbox_to_anchor=(0.5, -0.16), frameon=False)
    ax.set_title(title or "分類ごとの時間（トレースの演算の、正味の時間の和）", fontsize=11)
    parts = "、".join(f"{label} {sum(r.values()) * scale:.2f} {unit}" for label, r in rows.items())
    return Drawing(fig, f"分類ごとの時間 {parts}。分類は {'・'.join(used)}")
