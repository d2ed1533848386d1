"""デバイスごとの値の図: 集団通信の前後（値を送ったデバイスをマスの番号と色で示す）、続けた段階、リングの各ステップ。

白黒でも読めるように、色だけでは何も伝えない: 送ったデバイスはマスの右下の「D 番号」、全デバイスの値を合わせた
値は斜線、何も受け取らなかったマスは白で番号なし、リングで新しく届いたシャードは [ ] で示す（色は同じことを重ねるだけ）。"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ._base import DPI, Drawing, _box, _figure, _finish, color, ink  # noqa: F401

# ---------------------------------------------------------------- デバイスごとの値

def _value_text(v) -> str:
    v = float(v)
    if v == int(v) and abs(v) < 1e6:
        return str(int(v))
    return f"{v:.3g}"


MIXED = "#d9d9d9"  # 全デバイスの値を合わせた値（和・平均・最大）のマスの色
NOTHING = "#ffffff"  # 何も受け取らなかったマス（origin が負）の色


def _sender_text(v) -> str:
    return "なし" if int(v) < 0 else str(int(v))


def _sender_color(v: int) -> str:
    return NOTHING if v < 0 else color(v)


def _legend(ax, total_w: float, n: int, mixed: bool, nothing: bool = False) -> None:
    """図の下に凡例を 1 行で書く（白黒でも読める印で）。"""
    text = ("右下の D 番号は値を送ったデバイス" + ("、斜線は全デバイスの値を合わせたもの" if mixed else "")
            + ("、番号のないマスは何も受け取らなかったマス" if nothing else ""))
    ax.text(total_w / 2, n + 0.25, text, ha="center", va="top", fontsize=9)


def _cell(ax, x, y, value, sender) -> None:
    """1 つのマス。sender はデバイスの番号（右下に D 番号を書き、その色で塗る）、負なら何も受け取らなかった
    マス（白、番号なし）、None なら全デバイスの値を合わせた値（灰色に斜線）。"""
    from matplotlib.patches import Rectangle

    if sender is None:
        _box(ax, x, y, 1, 1, MIXED, "", fontsize=9)
        ax.add_patch(Rectangle((x, y), 1, 1, facecolor="none", edgecolor="#8c8c8c", hatch="///", linewidth=0))
        ax.add_patch(Rectangle((x, y), 1, 1, facecolor="none", edgecolor="black", linewidth=1))
        ax.text(x + 0.5, y + 0.5, _value_text(value), ha="center", va="center", fontsize=9, color="#1a1a1a",
                bbox=dict(boxstyle="round,pad=0.1", facecolor=MIXED, edgecolor="none"))
        return
    face = _sender_color(sender)
    _box(ax, x, y, 1, 1, face, _value_text(value), fontsize=9)
    if sender >= 0:
        ax.text(x + 0.95, y + 0.95, f"D{int(sender)}", ha="right", va="bottom", fontsize=6, color=ink(face))


def device_values(before, after=None, op: str = "", title: str | None = None,
                  labels: tuple[str, str] = ("前", "後"), origin=None) -> Drawing:
    """デバイスごとの値の表（行がデバイス、列が要素）。after を渡すと、集団通信 op の前と後を左右に並べる。
    before/after は (デバイス数, k) か (デバイス数,) の配列。

    色の決まりは、前後の図のすべてで 1 つ: **マスの色は、その値を送ったデバイスの色**。「前」のマスは
    それを持つデバイスの色。「後」のマスは origin（after と同じ形、origin[r][c] = そのマスの値を送ったデバイスの
    番号。負なら何も受け取らなかったマスで白）があればその色、なければ灰色（和・平均・最大のように、
    全デバイスの値を合わせた値）。
    title を省くと「op の前と後」と色の凡例が入る。"""
    panels = [np.atleast_2d(np.asarray(before).reshape(len(before), -1))]
    if after is not None:
        panels.append(np.asarray(after).reshape(len(after), -1))
    n = panels[0].shape[0]
    senders = [[[r] * panels[0].shape[1] for r in range(n)]]
    if after is not None:
        a = panels[1]
        if origin is None:
            senders.append([[None] * a.shape[1] for _ in range(n)])
        else:
            o = np.asarray(origin).reshape(a.shape).astype(int)
            senders.append([list(row) for row in o])
    widths = [p.shape[1] for p in panels]
    gap = max(1.6, 0.2 * len(op) + 0.6)
    total_w = sum(widths) + gap * (len(panels) - 1)
    fig, ax = _figure(max(4.2, 0.55 * total_w + 1.2), 0.45 * n + 1.5)
    x = 0.0
    for k, p in enumerate(panels):
        for r in range(n):
            for c in range(p.shape[1]):
                if len(panels) > 1:
                    _cell(ax, x + c, r, p[r, c], senders[k][r][c])
                else:
                    _box(ax, x + c, r, 1, 1, color(r), _value_text(p[r, c]), fontsize=9)
        if len(panels) > 1:
            ax.text(x + p.shape[1] / 2, -0.15, labels[k], ha="center", va="bottom", fontsize=10)
        x += p.shape[1] + gap
    for r in range(n):
        ax.text(-0.15, r + 0.5, f"D{r}", ha="right", va="center", fontsize=9)
    if len(panels) > 1:
        ax.annotate("", xy=(widths[0] + gap - 0.2, n / 2), xytext=(widths[0] + 0.2, n / 2),
                    arrowprops=dict(arrowstyle="->", lw=1.5))
        ax.text(widths[0] + gap / 2, n / 2 - 0.3, op, ha="center", va="bottom", fontsize=10)
        _legend(ax, total_w, n, origin is None, origin is not None and bool((np.asarray(origin) < 0).any()))
        _finish(ax, total_w, n + 0.8, title or f"{op} の前と後", pad=20)
        if origin is None:
            return Drawing(fig, f"デバイスごとの値 {op}（後は全デバイスの値を合わせたもの）".strip())
        o = np.asarray(origin).reshape(panels[1].shape).astype(int)
        if o.shape[1] == 1:
            src = "デバイスごとの送信元 " + ",".join(_sender_text(v) for v in o[:, 0])
        else:
            src = "D0 が受け取ったマスの送信元 " + ",".join(_sender_text(v) for v in o[0])
        return Drawing(fig, f"デバイスごとの値 {op}（{src}）".strip())
    _finish(ax, total_w, n, title or "デバイスごとの値", pad=6)
    return Drawing(fig, f"デバイスごとの値 {op}".strip())


# ---------------------------------------------------------------- 値の送信元

def device_values_from(before, after, origin, op: str = "", title: str | None = None,
                       labels: tuple[str, str] = ("前", "後")) -> Drawing:
    """device_values(before, after, op, origin=origin) と同じ: 「後」の各マスを、その値を送ったデバイスの色で塗る。
    origin は、同じ集団通信に lax.axis_index を通して求める（ppermute なら値がどこから来たか、all_gather なら
    すべてのデバイスの値が届いたことが色でわかる）。"""
    return device_values(before, after, op=op, title=title, labels=labels, origin=origin)


# ---------------------------------------------------------------- 集団通信を続けたときの段階

def device_stages(stages, ops: Sequence[str], labels: Sequence[str] | None = None,
                  title: str | None = None, origins: Sequence | None = None) -> Drawing:
    """集団通信を続けて行うときの「デバイスごとの値」を、左から段階の順に並べる（device_values の多段版）。

    stages[k] は k 段目の値で、(デバイス数, m_k) か (デバイス数,) の配列（行がデバイス）。ops[k] は
    stages[k] から stages[k + 1] への矢印に書く名前（len(ops) == len(stages) - 1）。labels は各段の見出しで、
    省略すると「前」、途中は「<op> の後」、最後は「後」。例: all-reduce = reduce-scatter + all-gather を
    ``device_stages([x, part, y], ["psum_scatter", "all_gather"])`` で 1 枚に描く。
    色の決まりは device_values と同じ（値を送ったデバイスの色）: 最初の段は持つデバイスの色、2 段目からは
    origins[k - 1]（stages[k] と同じ形の送信元の番号、None なら灰色 = 全デバイスの値を合わせたもの）。"""
    panels = [np.asarray(s).reshape(len(s), -1) for s in stages]
    ops = list(ops)
    if len(panels) < 2 or len(ops) != len(panels) - 1:
        raise ValueError(f"段階 {len(panels)} 個には矢印の名前が {max(len(panels) - 1, 1)} 個必要です（受け取ったのは {len(ops)} 個）")
    n = panels[0].shape[0]
    if any(p.shape[0] != n for p in panels):
        raise ValueError(f"どの段階も行（デバイス）の数が同じでなければなりません: {[p.shape[0] for p in panels]}")
    if labels is None:
        labels = ["前"] + [f"{op} の後" for op in ops[:-1]] + ["後"]
    # 矢印の幅は、その上に書く名前の長さに合わせる（全角は 2 文字分）
    gaps = [max(1.6, 0.2 * sum(2 if ord(ch) > 0x2E7F else 1 for ch in op) + 0.6) for op in ops]
    total_w = sum(p.shape[1] for p in panels) + sum(gaps)
    fig, ax = _figure(max(4.2, 0.55 * total_w + 1.2), 0.45 * n + 1.5)
    for r in range(n):
        ax.text(-0.15, r + 0.5, f"D{r}", ha="right", va="center", fontsize=9)
    origins = list(origins) if origins is not None else [None] * len(ops)
    if len(origins) != len(ops):
        raise ValueError(f"origins には 2 段目から後の {len(ops)} 段ぶんが必要です（受け取ったのは {len(origins)} 個）")
    mixed = False
    x = 0.0
    for k, p in enumerate(panels):
        o = None if k == 0 or origins[k - 1] is None else np.asarray(origins[k - 1]).reshape(p.shape).astype(int)
        mixed = mixed or (k > 0 and o is None)
        for r in range(n):
            for c in range(p.shape[1]):
                _cell(ax, x + c, r, p[r, c], r if k == 0 else (None if o is None else o[r, c]))
        ax.text(x + p.shape[1] / 2, -0.15, labels[k], ha="center", va="bottom", fontsize=10)
        x += p.shape[1]
        if k < len(ops):
            ax.annotate("", xy=(x + gaps[k] - 0.2, n / 2), xytext=(x + 0.2, n / 2),
                        arrowprops=dict(arrowstyle="->", lw=1.5))
            ax.text(x + gaps[k] / 2, n / 2 - 0.3, ops[k], ha="center", va="bottom", fontsize=10)
            x += gaps[k]
    _legend(ax, total_w, n, mixed)
    _finish(ax, total_w, n + 0.8, title or "、".join(ops) + " の各段階", pad=20)
    return Drawing(fig, "デバイスごとの値 " + " → ".join(ops))


# ---------------------------------------------------------------- リングのステップ

def ring_steps(held: Sequence[Sequence[Sequence[int]]], title: str | None = None) -> Drawing:
    """held[s][d] = ステップ s でデバイス d が持っているシャードの番号（= 持ち主のデバイスの番号）の列。
    行がステップ、列がデバイス。各マスにはシャードの番号を並べ、そのステップで新しく届いたシャードを送り出した
    持ち主のデバイスの色で塗り、その番号を [ ] で囲む（白黒でも新しく届いたシャードがわかる）。"""
    steps, n = len(held), len(held[0])
    def label(s, d):
        new = {b for b in held[s][d] if s > 0 and b not in held[s - 1][d]}
        return " ".join(f"[{b}]" if b in new else str(b) for b in held[s][d])

    labels = [[label(s, d) for d in range(n)] for s in range(steps)]
    # マスの幅は、いちばん長い文字列が枠からはみ出さない大きさにする（1 文字 ≈ 0.085 単位、font 8）
    cw = max(1.0, 0.085 * max(len(t) for row in labels for t in row) + 0.25)
    fig, ax = _figure(max(3.0, 0.9 * n * cw + 1.4), 0.55 * steps + 1.2)
    for s in range(steps):
        for d in range(n):
            blocks = list(held[s][d])
            new = [b for b in blocks if s == 0 or b not in held[s - 1][d]]
            face = color(new[-1]) if new else "#dddddd"
            _box(ax, d * cw, s * 0.6, cw, 0.6, face, labels[s][d], fontsize=8)
        ax.text(-0.15, s * 0.6 + 0.3, f"{s} 回目" if s else "最初", ha="right", va="center", fontsize=9)
    for d in range(n):
        ax.text(d * cw + cw / 2, -0.1, f"D{d}", ha="center", va="bottom", fontsize=9)
    _finish(ax, n * cw, steps * 0.6, title or "リングの各ステップで持っているシャード（[ ] は新しく届いたシャード）", pad=20)
    return Drawing(fig, f"リング {n} デバイス × {steps} ステップ")
