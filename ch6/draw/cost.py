"""コストとメモリの図（6.7 節）: ルーフライン、デバイス数と見積もったステップ時間、メモリの内訳、判断の表。

どれも数値を受け取るだけで、数値はノートブックが本物のコンパイル結果（cost_analysis、memory_analysis、
HLO の集団通信）と公表値の表（ch6.hardware）とコストのモデル（ch6.cost）から作ります。

- :func:`roofline`: チップごとの屋根（min(最大性能, 演算強度 × 帯域)）と、測った計算の演算強度
- :func:`step_times`: デバイス数ごとの見積もったステップ時間（見積もりごとの線、名前は線の端に直接書く）
- :func:`memory_bars`: 配置や再計算の方針ごとの、1 デバイスのメモリの内訳（積み上げ棒、予算の線）
- :func:`decision`: 方式ごとの「収まるか」と「見積もった時間」の表、選んだ方式に印
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ._base import Drawing, _figure, color

_STYLES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "D", "v", "P")
_HATCHES = ("", "//", "..", "xx")


def roofline(chips: Sequence[tuple[str, float, float]], points: Sequence[tuple[str, float]],
             title: str | None = None) -> Drawing:
    """chips は (名前, 最大性能 FLOP/s, メモリ帯域 バイト/秒) の列、points は (ラベル, 演算強度 FLOP/バイト) の列。
    横軸が演算強度、縦軸が達成できる性能（両対数）。チップごとに線の種類と印を変え、名前は屋根の右端に直接書く。
    各チップのリッジポイントに印をつけ、計算は縦の点線と、その演算強度での各屋根の高さの白抜きの印で示す。"""
    if not chips or not points:
        raise ValueError("chips と points は 1 つ以上必要です")
    intens = [float(i) for _, i in points]
    if any(not np.isfinite(i) or i <= 0 for i in intens):
        raise ValueError(f"演算強度は正の有限の数です: {intens}")
    ridges = [f / b for _, f, b in chips]
    lo = min(min(intens), min(ridges)) / 4
    hi = max(max(intens), max(ridges)) * 6
    xs = np.geomspace(lo, hi, 200)
    fig, ax = _figure(7.2, 4.4)
    for k, (name, peak, bw) in enumerate(chips):
        style, marker = _STYLES[k % len(_STYLES)], _MARKERS[k % len(_MARKERS)]
        ax.plot(xs, np.minimum(peak, xs * bw), color=color(k), lw=1.8, ls=style)
        ax.plot([peak / bw], [peak], marker=marker, color=color(k), ms=6, mec="black", mew=0.6, ls="none")
        for i in intens:
            ax.plot([i], [min(peak, i * bw)], marker=marker, color="black", ms=5, mfc="white", ls="none")
        ax.text(hi, peak, f" {name}", va="center", ha="left", fontsize=8, color="#222222")
    for _label, i in points:
        ax.axvline(i, color="#555555", ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ymin = min(min(i * b for i in intens) for _, _, b in chips) / 3
    ax.set_ylim(ymin, max(p for _, p, _ in chips) * 3)
    for label, i in points:
        ax.text(i * 1.08, ymin * 1.3, label, rotation=90, va="bottom", ha="left", fontsize=8, color="#222222")
    ax.set_xlabel("演算強度（FLOP / バイト）")
    ax.set_ylabel("達成できる性能（FLOP/s）")
    ax.grid(True, which="major", color="#dddddd", lw=0.6)
    ax.set_title(title or "ルーフライン：点線は計算の演算強度、塗った印はリッジポイント", fontsize=11)
    fig.tight_layout()
    names = "・".join(name for name, _, _ in chips)
    return Drawing(fig, f"ルーフライン {names}（計算 {len(points)} 個）")


def step_times(counts: Sequence[int], curves: Mapping[str, Sequence[float]],
               title: str | None = None, mark: int | None = None) -> Drawing:
    """counts はデバイス数の列、curves は 線の名前 → counts と同じ長さの秒の列。
    線ごとに線の種類と印を変え、名前は右端に直接書く。mark を渡すと、そのデバイス数に縦線を引く。"""
    counts = [int(c) for c in counts]
    if not counts or not curves:
        raise ValueError("counts と curves は 1 つ以上必要です")
    for name, vals in curves.items():
        if len(vals) != len(counts):
            raise ValueError(f"{name}: 値が {len(vals)} 個あります（デバイス数は {len(counts)} 個）")
    fig, ax = _figure(7.2, 4.2)
    ends = []
    for k, (name, vals) in enumerate(curves.items()):
        ys = np.array(vals, dtype=float) * 1e3
        # 印は先の線ほど大きく描く: 線が重なっても、後の小さな印が前の大きな印の中に見える
        ax.plot(counts, ys, color=color(k), marker=_MARKERS[k % len(_MARKERS)], ms=max(9 - 1.5 * k, 3),
                mec="black", mew=0.5, lw=1.6, ls=_STYLES[k % len(_STYLES)], zorder=2 + k)
        ends.append((float(np.log10(ys[-1])), k, name))
    # 右端の名前が重ならないように、縦に少しずつずらす（縦軸の幅の 6 % 以上離す、対数の軸）。
    # ずらした名前も線と結びつくように、線の端から細い引き出し線を引き、名前の前に線と同じ印と線の種類を描く
    # （色に頼らず、白黒でも読める）
    ends.sort()
    logs = np.log10(np.array([v for vals in curves.values() for v in vals], dtype=float) * 1e3)
    gap = 0.06 * max(float(logs.max() - logs.min()), 0.5)
    placed: list[float] = []
    for y, _, _ in ends:
        placed.append(max(y, placed[-1] + gap) if placed else y)
    x_end, x_key0, x_key1 = counts[-1], counts[-1] * 1.3, counts[-1] * 1.9
    for (y_end, k, name), y in zip(ends, placed):
        ax.plot([x_end * 1.05, x_key0], [10**y_end, 10**y], color="#777777", lw=0.6, clip_on=False)
        ax.plot([x_key0, x_key1], [10**y, 10**y], color=color(k), lw=1.6, ls=_STYLES[k % len(_STYLES)],
                clip_on=False)
        ax.plot([(x_key0 * x_key1) ** 0.5], [10**y], color=color(k), marker=_MARKERS[k % len(_MARKERS)], ms=5,
                mec="black", mew=0.5, ls="none", clip_on=False)
        ax.text(x_key1 * 1.05, 10**y, name, va="center", ha="left", fontsize=8, color="#222222")
    if mark is not None:
        ax.axvline(mark, color="#555555", ls=":", lw=1)
        ax.text(mark, 1.0, f" 今: {mark} デバイス", transform=ax.get_xaxis_transform(), va="top",
                fontsize=8, color="#222222")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(counts)
    ax.set_xticklabels([str(c) for c in counts])
    ax.set_xlim(counts[0] / 1.3, counts[-1] * 9)
    ax.set_xlabel("デバイスの数")
    ax.set_ylabel("1 ステップの見積もり（ミリ秒）")
    ax.grid(True, which="major", color="#dddddd", lw=0.6)
    ax.set_title(title or "デバイスの数と見積もったステップ時間", fontsize=11)
    fig.tight_layout()
    return Drawing(fig, f"ステップ時間 {'・'.join(curves)}（{counts[0]}〜{counts[-1]} デバイス）")


_PARTS = ("引数", "出力", "一時領域")


def memory_bars(rows: Sequence[tuple[str, Mapping[str, float]]], title: str | None = None,
                budget: float | None = None, parts: Sequence[str] = _PARTS) -> Drawing:
    """rows は (ラベル, {内訳の名前: バイト}) の列。内訳を parts の順に積み上げた横棒を描き、
    棒の右に合計を書く。budget を渡すと予算の縦線を引く。"""
    if not rows:
        raise ValueError("rows は 1 つ以上必要です")
    n = len(rows)
    fig, ax = _figure(6.8, 0.55 * n + 1.6)
    totals = []
    for r, (label, sizes) in enumerate(rows):
        left = 0.0
        for k, part in enumerate(parts):
            v = float(sizes.get(part, 0.0))
            if v < 0:
                raise ValueError(f"{label}: {part} が負です（{v}）")
            ax.barh(r, v / 1e6, left=left / 1e6, color=color(k), edgecolor="black", lw=0.6,
                    hatch=_HATCHES[k % len(_HATCHES)], label=part if r == 0 else None)
            left += v
        totals.append(left)
        ax.text(left / 1e6, r, f" {left / 1e6:.2f} MB", va="center", ha="left", fontsize=8, color="#222222")
    ax.set_yticks(range(n))
    ax.set_yticklabels([label for label, _ in rows], fontsize=9)
    ax.invert_yaxis()
    right = max(totals + ([budget] if budget else [])) / 1e6
    ax.set_xlim(0, right * 1.3 if right > 0 else 1)
    if budget is not None:
        ax.axvline(budget / 1e6, color="#c0392b", ls="--", lw=1.2)
        ax.text(budget / 1e6, -0.6, f"予算 {budget / 1e6:.2f} MB", color="#c0392b", fontsize=8, ha="center")
    ax.set_xlabel("1 デバイスのメモリ（MB = 100 万バイト）")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, axis="x", color="#dddddd", lw=0.6)
    ax.set_title(title or "1 デバイスのメモリの内訳", fontsize=11, pad=14 if budget is not None else 6)
    fig.tight_layout()
    return Drawing(fig, f"メモリ {'・'.join(label for label, _ in rows)}")


def decision(rows: Sequence[tuple[str, float, float]], capacity: float, chosen: str | None,
             title: str | None = None) -> Drawing:
    """rows は (方式, 1 デバイスのメモリ バイト, 見積もった秒)。capacity は 1 デバイスの容量（バイト）。
    左にメモリ（対数の軸、容量の線つき）、右に見積もった時間を並べる。収まらない方式は灰色に斜線、
    chosen には ★ をつける。"""
    if not rows:
        raise ValueError("rows は 1 つ以上必要です")
    names = [r[0] for r in rows]
    if chosen is not None and chosen not in names:
        raise ValueError(f"chosen={chosen!r} は rows にありません: {names}")
    if any(not r[1] > 0 for r in rows):
        raise ValueError("メモリは正の数です（対数の軸に描きます）")
    import matplotlib_fontja  # noqa: F401
    from matplotlib import rcParams
    from matplotlib.figure import Figure

    _figure(1, 1)  # フォントの登録
    rcParams["font.family"] = "IPAexGothic"
    n = len(rows)
    fig = Figure(figsize=(8.0, 0.5 * n + 1.9))
    ax_m, ax_t = fig.subplots(1, 2, sharey=True)
    for r, (name, mem, sec) in enumerate(rows):
        fits = mem <= capacity
        face, hatch = (color(0), "") if fits else ("#dddddd", "xx")
        ax_m.barh(r, mem / 1e9, color=face, edgecolor="black", lw=0.6, hatch=hatch)
        ax_m.text(mem / 1e9, r, f" {mem / 1e9:.1f} GB" + ("" if fits else " 収まらない"), va="center",
                  fontsize=8, color="#222222")
        ax_t.barh(r, sec * 1e3, color=face, edgecolor="black", lw=0.6, hatch=hatch)
        star = " ★" if name == chosen else ""
        ax_t.text(sec * 1e3, r, f" {sec * 1e3:,.0f} ms{star}", va="center", fontsize=8, color="#222222")
    ax_m.axvline(capacity / 1e9, color="black", ls="--", lw=1.2)
    ax_m.text(capacity / 1e9, -0.7, f"容量 {capacity / 1e9:.0f} GB", color="#222222", fontsize=8, ha="center")
    ax_m.set_yticks(range(n))
    ax_m.set_yticklabels(names, fontsize=9)
    ax_m.invert_yaxis()
    ax_m.set_xscale("log")
    mems = [r[1] / 1e9 for r in rows] + [capacity / 1e9]
    ax_m.set_xlim(min(mems) / 3, max(mems) * 12)
    t_max = max(r[2] for r in rows) * 1e3
    ax_t.set_xlim(0, t_max * 1.6 if t_max > 0 else 1)
    ax_m.set_xlabel("1 デバイスのメモリ（GB、対数）")
    ax_t.set_xlabel("見積もったステップ時間（ミリ秒）")
    for ax in (ax_m, ax_t):
        ax.grid(True, axis="x", which="major", color="#dddddd", lw=0.6)
    fig.suptitle(title or "方式ごとのメモリと見積もった時間（★ が選んだ方式）", fontsize=11)
    fig.tight_layout()
    return Drawing(fig, f"判断 {'・'.join(names)}（選んだ方式: {chosen or 'なし'}）")
