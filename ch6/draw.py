"""本物のオブジェクト（メッシュ、シャーディングされた配列、集団通信の前後の値）から図を描く。

どの関数も :class:`Drawing` を返します。ノートブックのセルの最後に置くと PNG で表示され、
``.texts`` で図の中の文字（デバイス番号、仕様、ラベル）を確かめられます（テストが使う）。
日本語のラベルは matplotlib-fontja の IPAex ゴシック（パッケージに同梱、システムのフォント不要）で描きます。
PNG は小さく（数十 KB）、同じ入力なら同じバイト列になります（作成ソフトの版などのメタデータを入れない）。

- :func:`mesh`: メッシュ → デバイス番号の格子と軸の名前（複数プロセスならプロセスごとに色分け）
- :func:`sharding`: シャーディングされた配列 → どのデバイスがどのブロックを持つか（``addressable_shards`` から）
- :func:`device_values`: 集団通信の前と後の「デバイスごとの値」の表
- :func:`ring_steps`: リングの各ステップで、どのデバイスがどのブロックを持っているか
- :func:`timeline`: 処理の段階（集める → 計算 → 配る …）の帯
- :func:`process_grid`: 各プロセスが報告した値から、プロセス → デバイス → グローバルメッシュ（と配列の行）
- :func:`flowchart`: 節（問い・選ぶもの …）と矢印の表から、判断の流れ図
"""
from __future__ import annotations

import io
from typing import Sequence

import numpy as np

# 色はデバイス番号で決める（どの図でも同じデバイスは同じ色）
_PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
            "#9c755f", "#bab0ac", "#86bcb6", "#d37295", "#8cd17d", "#f1ce63", "#a0cbe8", "#ffbe7d"]
DPI = 80


def color(i: int) -> str:
    return _PALETTE[int(i) % len(_PALETTE)]


class Drawing:
    """描いた図: PNG のバイト列と、図の中の文字。Jupyter では PNG として表示される。"""

    def __init__(self, fig, caption: str):
        self.caption = caption
        self.texts = [t.get_text() for t in fig.findobj(lambda o: hasattr(o, "get_text")) if t.get_text()]
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
        self.png = buf.getvalue()

    def _repr_png_(self) -> bytes:
        return self.png

    def __repr__(self) -> str:
        return f"<図: {self.caption}>"


def _figure(width: float, height: float):
    """pyplot を通さない Figure（バックエンドやインライン表示の状態に左右されず、二重に表示されない）。"""
    import matplotlib_fontja  # noqa: F401  日本語フォント（IPAex ゴシック）を登録する
    from matplotlib import rcParams
    from matplotlib.figure import Figure

    rcParams["font.family"] = "IPAexGothic"
    fig = Figure(figsize=(width, height))
    return fig, fig.add_subplot()


def _box(ax, x, y, w, h, face, label, fontsize=10, text_color="white"):
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((x, y), w, h, facecolor=face, edgecolor="black", linewidth=1))
    if label:
        ax.text(x + w / 2, y + h / 2, label, ha="center", va="center", fontsize=fontsize, color=text_color)


def _finish(ax, width, height, title, pad: float = 6):
    ax.set_xlim(-0.05, width + 0.05)
    ax.set_ylim(height + 0.05, -0.05)
    ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=11, pad=pad)


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


# ---------------------------------------------------------------- デバイスごとの値

def _value_text(v) -> str:
    v = float(v)
    if v == int(v) and abs(v) < 1e6:
        return str(int(v))
    return f"{v:.3g}"


def device_values(before, after=None, op: str = "", title: str | None = None,
                  labels: tuple[str, str] = ("前", "後")) -> Drawing:
    """デバイスごとの値の表（行がデバイス、列が要素）。after を渡すと、集団通信 op の前と後を左右に並べる。
    before/after は (デバイス数, k) か (デバイス数,) の配列。"""
    panels = [np.atleast_2d(np.asarray(before).reshape(len(before), -1))]
    if after is not None:
        panels.append(np.asarray(after).reshape(len(after), -1))
    n = panels[0].shape[0]
    widths = [p.shape[1] for p in panels]
    gap = 1.6
    total_w = sum(widths) + gap * (len(panels) - 1)
    fig, ax = _figure(max(3.0, 0.55 * total_w + 1.2), 0.45 * n + 1.2)
    x = 0.0
    for k, p in enumerate(panels):
        for r in range(n):
            for c in range(p.shape[1]):
                _box(ax, x + c, r, 1, 1, color(r), _value_text(p[r, c]), fontsize=9)
        if len(panels) > 1:
            ax.text(x + p.shape[1] / 2, -0.15, labels[k], ha="center", va="bottom", fontsize=10)
        x += p.shape[1] + gap
    title_pad = 20 if len(panels) > 1 else 6
    for r in range(n):
        ax.text(-0.15, r + 0.5, f"D{r}", ha="right", va="center", fontsize=9)
    if len(panels) > 1:
        ax.annotate("", xy=(widths[0] + gap - 0.2, n / 2), xytext=(widths[0] + 0.2, n / 2),
                    arrowprops=dict(arrowstyle="->", lw=1.5))
        ax.text(widths[0] + gap / 2, n / 2 - 0.3, op, ha="center", va="bottom", fontsize=10)
    _finish(ax, total_w, n, title, pad=title_pad)
    return Drawing(fig, f"デバイスごとの値 {op}".strip())


# ---------------------------------------------------------------- リングのステップ

def ring_steps(held: Sequence[Sequence[Sequence[int]]], title: str | None = None) -> Drawing:
    """held[s][d] = ステップ s でデバイス d が持っているブロックの番号の列。行がステップ、列がデバイス。
    各マスにはブロック番号を並べ、そのステップで新しく受け取ったブロックを太字にする。"""
    steps, n = len(held), len(held[0])
    fig, ax = _figure(max(3.0, 0.9 * n + 1.4), 0.55 * steps + 1.2)
    for s in range(steps):
        for d in range(n):
            blocks = list(held[s][d])
            new = [b for b in blocks if s == 0 or b not in held[s - 1][d]]
            face = color(new[-1]) if new else "#dddddd"
            _box(ax, d, s * 0.6, 1, 0.6, face, " ".join(str(b) for b in blocks), fontsize=8)
        ax.text(-0.15, s * 0.6 + 0.3, f"{s} 回目" if s else "最初", ha="right", va="center", fontsize=9)
    for d in range(n):
        ax.text(d + 0.5, -0.1, f"D{d}", ha="center", va="bottom", fontsize=9)
    _finish(ax, n, steps * 0.6, title or "リングの各ステップで持っているブロック", pad=20)
    return Drawing(fig, f"リング {n} デバイス × {steps} ステップ")


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


# ---------------------------------------------------------------- 値の送り元

def device_values_from(before, after, origin, op: str = "", title: str | None = None,
                       labels: tuple[str, str] = ("前", "後")) -> Drawing:
    """device_values と同じ前後の表で、「後」の各マスを、その値を送ったデバイスの色で塗る。
    origin は after と同じ形で、origin[r][c] = そのマスの値を送ったデバイスの番号。ノートブックでは、同じ集団通信に
    lax.axis_index を通して求める（ppermute なら値がどこから来たか、all_gather なら全員の値が届いたことが色でわかる）。"""
    b = np.atleast_2d(np.asarray(before).reshape(len(before), -1))
    a = np.asarray(after).reshape(len(after), -1)
    o = np.asarray(origin).reshape(a.shape).astype(int)
    n = b.shape[0]
    gap = 1.6
    total_w = b.shape[1] + gap + a.shape[1]
    fig, ax = _figure(max(3.0, 0.55 * total_w + 1.2), 0.45 * n + 1.2)
    for r in range(n):
        ax.text(-0.15, r + 0.5, f"D{r}", ha="right", va="center", fontsize=9)
        for c in range(b.shape[1]):
            _box(ax, c, r, 1, 1, color(r), _value_text(b[r, c]), fontsize=9)
        for c in range(a.shape[1]):
            _box(ax, b.shape[1] + gap + c, r, 1, 1, color(o[r, c]), _value_text(a[r, c]), fontsize=9)
    ax.text(b.shape[1] / 2, -0.15, labels[0], ha="center", va="bottom", fontsize=10)
    ax.text(b.shape[1] + gap + a.shape[1] / 2, -0.15, labels[1], ha="center", va="bottom", fontsize=10)
    ax.annotate("", xy=(b.shape[1] + gap - 0.2, n / 2), xytext=(b.shape[1] + 0.2, n / 2),
                arrowprops=dict(arrowstyle="->", lw=1.5))
    ax.text(b.shape[1] + gap / 2, n / 2 - 0.3, op, ha="center", va="bottom", fontsize=10)
    _finish(ax, total_w, n, title or f"{op}：「{labels[1]}」の色は値を送ったデバイス".lstrip("："), pad=20)
    sources = ",".join(str(int(v)) for v in o[:, 0])
    return Drawing(fig, f"デバイスごとの値 {op}（送り元 {sources}…）".strip())


# ---------------------------------------------------------------- 集団通信を続けたときの段階

def device_stages(stages, ops: Sequence[str], labels: Sequence[str] | None = None,
                  title: str | None = None) -> Drawing:
    """集団通信を続けて行うときの「デバイスごとの値」を、左から段階の順に並べる（device_values の多段版）。

    stages[k] は k 段目の値で、(デバイス数, m_k) か (デバイス数,) の配列（行がデバイス）。ops[k] は
    stages[k] から stages[k + 1] への矢印に書く名前（len(ops) == len(stages) - 1）。labels は各段の見出しで、
    省略すると「前」、途中は「<op> の後」、最後は「後」。例: all-reduce = reduce-scatter + all-gather を
    ``device_stages([x, part, y], ["psum_scatter", "all_gather"])`` で 1 枚に描く。"""
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
    fig, ax = _figure(max(3.0, 0.55 * total_w + 1.2), 0.45 * n + 1.2)
    for r in range(n):
        ax.text(-0.15, r + 0.5, f"D{r}", ha="right", va="center", fontsize=9)
    x = 0.0
    for k, p in enumerate(panels):
        for r in range(n):
            for c in range(p.shape[1]):
                _box(ax, x + c, r, 1, 1, color(r), _value_text(p[r, c]), fontsize=9)
        ax.text(x + p.shape[1] / 2, -0.15, labels[k], ha="center", va="bottom", fontsize=10)
        x += p.shape[1]
        if k < len(ops):
            ax.annotate("", xy=(x + gaps[k] - 0.2, n / 2), xytext=(x + 0.2, n / 2),
                        arrowprops=dict(arrowstyle="->", lw=1.5))
            ax.text(x + gaps[k] / 2, n / 2 - 0.3, ops[k], ha="center", va="bottom", fontsize=10)
            x += gaps[k]
    _finish(ax, total_w, n, title, pad=20)
    return Drawing(fig, "デバイスごとの値 " + " → ".join(ops))


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


# ---------------------------------------------------------------- vmap のバッチ軸（in_axes / out_axes）

def vmap_axes(inputs: Sequence[tuple[str, object]], in_axes, output: tuple[str, object], out_axes: int = 0,
              title: str | None = None, limit: int = 12) -> Drawing:
    """vmap が引数のどの軸をバッチにし、出力のどの軸にバッチを置いたかを、実際の配列の形から描く。

    inputs = [(名前, 配列), ...]、in_axes = 引数ごとの軸（整数 1 つなら全部の引数に同じ軸、None は全サンプル共通）、
    output = (名前, vmap の出力), out_axes = 出力のバッチの軸。0〜2 次元の配列を、要素 1 つを 1 マスにした格子で描き、
    バッチの軸に沿った b 番目の切り口をサンプル b の色で塗る（共通の引数は白）。1 つの軸に limit マスより多ければ、
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
                    face = "#ffffff"
                else:
                    b = (r, c)[bdim] if len(shape) == 2 else c
                    face = color(b)
                _box(ax_, left + c * cell, head + r * cell, cell, cell, face, "")
        if more_c:
            ax_.text(left + cols * cell + 0.05, head + rows * cell / 2, "…", ha="left", va="center", fontsize=9)
        if more_r:
            ax_.text(left + cols * cell / 2, head + rows * cell + 0.02, "…", ha="center", va="top", fontsize=9, rotation=90)
    shown = min(batch, limit)
    legend = f"色 = サンプルの番号（0〜{batch - 1}）、白 = 全サンプル共通"
    if batch > limit:
        legend += f"（色を付けたのは先頭の {shown} 個）"
    ax_.text(total_w / 2, total_h - 0.05, legend, ha="center", va="top", fontsize=8)
    _finish(ax_, total_w, total_h + 0.25, title or f"vmap のバッチ軸（バッチ {batch}）")
    return Drawing(fig, "vmap: " + "、".join(f"{n} {note}" for n, _, _, note, *_ in grids))


# ---------------------------------------------------------------- 判断の流れ図

_FLOW_FILLS = [("#fff4d6", "#b8860b"), ("#dcebff", "#2f5d9f"), ("#eeeeee", "#777777"), ("#e3f4e1", "#3d7a3a"),
               ("#fde2e4", "#a8324a")]


def flowchart(nodes: Sequence[tuple[str, str, str, tuple[float, float]]],
              edges: Sequence[tuple[str, str, str]], title: str | None = None,
              box: tuple[float, float] = (2.3, 0.9), dashed: Sequence[tuple[str, str]] = ()) -> Drawing:
    """判断の流れ図を、節と矢印の表から描く（6.5 の「どれを使うか」など）。

    nodes = [(名前, 箱の文字, 種類, (x, y)), ...]。(x, y) は箱の中心（単位はインチ、y は下向き）。
    種類ごとに色を決め（出てきた順に、淡い黄・青・灰・緑・赤）、図の下に種類の凡例を置く。
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
        ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0,rounding_size=0.12",
                                    facecolor=face, edgecolor=edge, linewidth=1.4))
        ax.text(x, y, text, ha="center", va="center", fontsize=9, linespacing=1.2)
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
            ax.text(mx, my, label, ha="center", va="center", fontsize=8.5, color="#333333",
                    bbox=dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none"))
    # 凡例: 種類ごとの色
    lx, ly = left, bottom + 0.25
    for kind in kinds:
        face, edge = _FLOW_FILLS[kinds.index(kind)]
        ax.add_patch(FancyBboxPatch((lx, ly), 0.3, 0.22, boxstyle="round,pad=0,rounding_size=0.05",
                                    facecolor=face, edgecolor=edge, linewidth=1.2))
        ax.text(lx + 0.38, ly + 0.11, kind, ha="left", va="center", fontsize=8.5)
        lx += 0.6 + 0.17 * len(kind) + 0.3
    ax.set_xlim(left - 0.1, right + 0.1)
    ax.set_ylim(bottom + legend_h + 0.1, top - 0.1)
    ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=11)
    return Drawing(fig, "流れ図: " + "、".join(text.split("\n")[0] for _, text, _, _ in nodes))
