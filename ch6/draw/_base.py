"""図の共通部品: Drawing（PNG と図の中の文字）、色、pyplot を通さない Figure、箱と仕上げ。"""
from __future__ import annotations

import io

_PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
            "#9c755f", "#bab0ac", "#86bcb6", "#d37295", "#8cd17d", "#f1ce63", "#a0cbe8", "#ffbe7d"]
DPI = 160   # 2 倍の解像度で描き、表示は半分の大きさ（高精細の画面でもくっきり、見た目の大きさは 80 dpi と同じ）


def color(i: int) -> str:
    return _PALETTE[int(i) % len(_PALETTE)]


class Drawing:
    """描いた図: PNG のバイト列と、図の中の文字。Jupyter では PNG として表示される。"""

    def __init__(self, fig, caption: str):
        self.caption = " ".join(caption.split())  # 1 行に（保存される text/plain を短く決定的に）
        self.texts = [t.get_text() for t in fig.findobj(lambda o: hasattr(o, "get_text")) if t.get_text()]
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
        self.png = buf.getvalue()

    def _repr_png_(self):
        """PNG と、表示する大きさ（ピクセルの半分: DPI の 2 倍の解像度を、80 dpi の大きさで見せる）。"""
        return self.png, {"width": self.size[0] // 2, "height": self.size[1] // 2}

    @property
    def size(self) -> tuple[int, int]:
        """PNG の (幅, 高さ) のピクセル数。"""
        return int.from_bytes(self.png[16:20], "big"), int.from_bytes(self.png[20:24], "big")

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


def ink(face: str) -> str:
    """face の上で読める文字の色: 明るい色（黄、桃、淡い色）には濃い文字、暗い色には白。"""
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(face)
    return "#1a1a1a" if 0.299 * r + 0.587 * g + 0.114 * b > 0.55 else "white"


def _box(ax, x, y, w, h, face, label, fontsize=10, text_color=None):
    """text_color を省くと、face の明るさから ink(face) を選ぶ。"""
    from matplotlib.patches import Rectangle

    text_color = text_color or ink(face)

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
