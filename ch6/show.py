"""ノートブックとチェックが見せるものを作る部品（表示はすべてここから）。

- :func:`expect_error`: わざとエラーを起こすセル用。エラーの型とメッセージを表示してセルを完了させ、
  エラーが起きなければ大きな声で失敗する（「すべて実行」が Colab・Kaggle・VS Code でも止まらない）。
- :func:`collectives_line`: 集団通信の数を 1 行で（「集団通信なし」を含めて綴りは 1 通り）。
- :func:`table`: 色コードのないプレーンな表（全角文字の幅もそろえる）。
- :func:`rounded` / :func:`num`: CPU の命令セットや足し算の順で変わる桁を落とし、-0 を 0 にそろえる。
- :func:`median_time`: 1 回目（コンパイルを含む）と、2 回目以降の中央値を分けて測る。
- :func:`figure`: matplotlib の図を PNG 1 枚で表示する。
- :func:`sharding_text`: ``visualize_array_sharding`` の図を色コードなしの文字列で。
"""
from __future__ import annotations

import contextlib
import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from . import sanitize

NO_COLLECTIVES = "集団通信なし"
INTENTIONAL = "（わざと起こしたエラーです）"


class NoErrorRaised(AssertionError):
    """expect_error のブロックでエラーが起きなかった（教材の前提が崩れている）。"""


class Caught:
    """expect_error が捕まえた例外（ブロックの後で ``.exc``・``.type_name``・``.message`` を見られる）。"""

    exc: BaseException | None = None

    @property
    def type_name(self) -> str:
        return type(self.exc).__name__ if self.exc is not None else ""

    @property
    def message(self) -> str:
        return error_message(self.exc) if self.exc is not None else ""


def error_message(exc: BaseException, max_lines: int = 4, width: int = 300) -> str:
    """例外のメッセージを、機械ごとに変わる部分を整えて最初の数行だけ返す。"""
    lines = [ln.rstrip() for ln in sanitize.clean(str(exc)).splitlines() if ln.strip()]
    lines = [ln if len(ln) <= width else ln[: width - 1] + "…" for ln in lines]
    if len(lines) > max_lines:
        lines = lines[:max_lines] + ["…"]
    return "\n".join(lines)


@contextlib.contextmanager
def expect_error(*types: type[BaseException], match: str | None = None, max_lines: int = 4):
    """このブロックはわざとエラーを起こします。

    起きたエラーが ``types`` のどれか（省略時は Exception）なら、型とメッセージを表示してセルを続けます。
    エラーが起きなければ :class:`NoErrorRaised`、別の型なら元の例外がそのまま出ます。
    ``match`` を渡すと、メッセージにその文字列が含まれることも確かめます。
    """
    want = types or (Exception,)
    caught = Caught()
    try:
        yield caught
    except want as exc:
        caught.exc = exc
        text = error_message(exc, max_lines=max_lines)
        if match is not None and match not in str(exc):
            raise NoErrorRaised(
                f"期待したメッセージ {match!r} が含まれていません: {type(exc).__name__}: {text}") from exc
        print(f"{INTENTIONAL} {type(exc).__name__}: {text}")
    else:
        names = " / ".join(t.__name__ for t in want)
        raise NoErrorRaised(f"ここでは {names} が起きるはずでしたが、エラーが起きませんでした。")


def collectives_line(counts: dict[str, int] | Iterable) -> str:
    """{"all-gather": 1, "all-reduce": 2} -> "all-gather ×1, all-reduce ×2"（空なら「集団通信なし」）。"""
    counts = dict(counts)
    items = [(k, v) for k, v in sorted(counts.items()) if v]
    return ", ".join(f"{k} ×{v}" for k, v in items) if items else NO_COLLECTIVES


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _pad(text: str, width: int, right: bool) -> str:
    gap = " " * (width - _width(text))
    return gap + text if right else text + gap


def table(rows: Sequence[Sequence[object]], header: Sequence[str] | None = None,
          right: Sequence[bool] | None = None) -> str:
    """プレーンな表の文字列（色コードなし）。数値の列は右寄せ（right で指定も可）。"""
    cells = [[str(c) for c in r] for r in rows]
    head = [str(h) for h in header] if header else None
    ncol = max([len(r) for r in cells] + [len(head) if head else 0])
    if right is None:
        right = [all(isinstance(r[i], (int, float)) for r in rows if i < len(r)) and bool(rows)
                 for i in range(ncol)]
    allrows = ([head] if head else []) + cells
    widths = [max(_width(r[i]) if i < len(r) else 0 for r in allrows) for i in range(ncol)]

    def line(r):
        return "  ".join(_pad(r[i] if i < len(r) else "", widths[i], right[i]) for i in range(ncol)).rstrip()

    out = []
    if head:
        out += [line(head), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    return "\n".join(out)


def rounded(x, decimals: int = 3):
    """小数 decimals 桁に丸めた NumPy 配列（-0 は 0 にそろえる）。命令セットで変わる末尾の桁を見せないため。"""
    import numpy as np

    a = np.round(np.asarray(x, dtype=np.float64), decimals) + 0.0
    return a


def num(x, digits: int = 3) -> str:
    """スカラーを小数 digits 桁の文字列に（-0 は 0 にそろえる）。"""
    v = float(rounded(x, digits))
    return f"{v:.{digits}f}"


def value_text(x, digits: int = 4) -> str:
    """1 つの値を短い文字列に（デバイスごとの値を表に並べるため）。

    スカラーは ``36``・``4.5``、ベクトルは ``[1 4 7]``、2 次元は行を `` | `` で区切ります。
    小数は digits 桁に丸めて末尾の 0 を省き、-0 は 0 にそろえます（命令セットで変わる桁を見せない）。
    """
    import numpy as np

    a = np.asarray(x)
    if a.ndim == 0:
        if a.dtype.kind in "biu":
            return str(a.item())
        return np.format_float_positional(float(rounded(a, digits)), trim="-")
    if a.ndim == 1:
        return "[" + " ".join(value_text(v, digits) for v in a) + "]"
    return " | ".join(value_text(row, digits) for row in a)


def before_after(title: str | None, before, after, digits: int = 4) -> str:
    """各デバイスの値を「前」と「後」で並べたプレーンな表（集団演算の説明用）。

    ``before[i]`` と ``after[i]`` がデバイス i の値です（スカラーでもベクトルでもよい）。
    title を渡すと 1 行目に出します。
    """
    if len(before) != len(after):
        raise ValueError(f"before と after の長さが違います: {len(before)} と {len(after)}")
    rows = [(i, value_text(b, digits), value_text(a, digits)) for i, (b, a) in enumerate(zip(before, after))]
    body = table(rows, header=("デバイス", "前", "後"), right=(True, True, True))
    return f"{title}\n{body}" if title else body


class Timing(NamedTuple):
    """:func:`median_time` の結果（秒）。``first, median, best = median_time(...)`` と分けて受け取れます。

    表示には ``median`` を使います。「A は B より速い」のような関係を ``assert`` で確かめるときは ``best`` を使います。
    ほかのプロセスと CPU を取り合うと遅い回が混じりますが、最も速い回はその影響をほとんど受けないからです。
    """

    first: float   # 1 回目: トレース・コンパイル・実行を含む
    median: float  # 2 回目以降 repeat 回の中央値: 実行だけ
    best: float    # 2 回目以降 repeat 回の最小値: 負荷の揺れに強い（関係の確かめ用）


def median_time(fn, *args, repeat: int = 7) -> Timing:
    """fn(*args) の時間を正直に測る: 1 回目（コンパイルを含む）は別に、そのあと repeat 回の中央値と最小値。

    JAX は非同期に実行するので、毎回 ``jax.block_until_ready`` で計算の終わりまで待ちます。
    1 回目がウォームアップを兼ねます。
    """
    import statistics
    import time

    import jax

    if repeat < 1:
        raise ValueError(f"repeat は 1 以上です（受け取ったのは {repeat}）")
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t0
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        runs.append(time.perf_counter() - t0)
    return Timing(first, statistics.median(runs), min(runs))


def figure(fig, dpi: int = 90) -> None:
    """matplotlib の図を PNG 1 枚にして表示し、図を閉じる（backend や環境によらず同じ形で保存される）。

    PNG は dpi の 2 倍の解像度で描き、表示は dpi の大きさにします（高精細の画面でもくっきり見える）。"""
    import io

    import matplotlib.pyplot as plt
    from IPython.display import Image, display

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=2 * dpi)
    plt.close(fig)
    png = buf.getvalue()
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    display(Image(png, width=width // 2, height=height // 2))


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def sharding_text(x, **kwargs) -> str:
    """``jax.debug.visualize_array_sharding(x, use_color=False)`` の図を、色コードのない文字列で返す。

    JAX 0.12 は ``use_color=False`` でも rich の強調表示で数字に ANSI コードを付け、Jupyter では
    表示（display）として出すので、ここで受け取って色コードを落とします。``print(sharding_text(x))`` で使います。
    """
    import jax
    from IPython.utils.capture import capture_output

    kwargs.setdefault("use_color", False)
    with capture_output(stdout=True, stderr=False, display=True) as cap:
        jax.debug.visualize_array_sharding(x, **kwargs)
    text = cap.stdout + "".join(out.data.get("text/plain", "") for out in cap.outputs)
    return "\n".join(line.rstrip() for line in _ANSI.sub("", text).strip("\n").splitlines())
