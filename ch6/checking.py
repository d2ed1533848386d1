"""チェックを書く人のための公開 API（実行する側は ch6.run_check / ch6.registry、採点は ch6.grading）。

一つの演習につき一つのチェック関数を ``@exercise("6.1-1", "関数名")`` で登録します。
チェック関数は学習者の解答を受け取り、合格なら短い説明文を返し、不合格なら :class:`Fail` を
送出します（メッセージは日本語 1 行、2 文・100 字ほどまで: 原因、期待したものと返ってきたもの、直し方の順）。学習者のコードは必ず
:func:`call` を通して呼ぶので、学習者側の例外とチェッカ自身の不具合を区別できます。

- 登録: :func:`exercise`
- 学習者の呼び出し: :func:`call`（NotImplementedError は未解答、それ以外の例外は学習者のエラー）
- 隠し入力: :func:`hidden_rng`、:func:`f32`、:func:`n_devices`
- デバイスの数で確かめられないことを ✅ の行で断る: :func:`cannot_tell`（句は :data:`CANNOT_TELL`）
- 期待: :func:`expect_shape`、:func:`expect_close`、:func:`expect_no_batch_loop`
- 構造: :func:`jaxpr_primitives`、:func:`jaxpr_size`、:func:`walk`（入れ子の jaxpr も含めた式）
- 表示: :func:`fmt`、:func:`one_line`

チェックのモジュール・テスト・ツールが import するのはこのモジュール（と ``ch6`` の ``run_check`` / ``check`` /
``Status`` / ``registry`` / ``load_errors``）だけです。``ch6._core`` と、ほかのモジュールの ``_`` で始まる名前は
import しません（``tests/test_public_api.py`` が import 文を読んで確かめます）。
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from . import explain

__all__ = [
    "Fail", "NotDone", "LearnerError", "exercise", "call", "hidden_rng", "f32", "n_devices", "fmt",
    "expect_shape", "expect_close", "expect_no_batch_loop", "jaxpr_primitives", "jaxpr_size", "walk",
    "PSUM_NAMES", "is_close", "traced_eqns", "dict_entry", "one_line", "Entry", "registered", "counting_compiles",
    "CANNOT_TELL", "cannot_tell", "call_within",
]


class Fail(Exception):
    """不合格。メッセージは学習者向けの日本語 1 行。"""


class NotDone(Exception):
    """学習者の関数がまだ NotImplementedError を送出している。"""


class LearnerError(Exception):
    """学習者のコードの中で例外が起きた。"""

    def __init__(self, exc: BaseException):
        super().__init__(exc)
        self.exc = exc


@dataclasses.dataclass(frozen=True)
class Entry:
    """登録された 1 つの演習: 学習者が実装する名前（title）とチェック関数（fn）。"""

    title: str
    fn: Callable[[Any], str]


_REGISTRY: dict[str, Entry] = {}  # 演習の番号 -> チェック（@exercise が登録する）


def registered() -> dict[str, Entry]:
    """今までに @exercise で登録された演習（番号 -> Entry）。全節を読み込んでから使うのは ch6.registry()。"""
    return _REGISTRY


def exercise(exercise_id: str, title: str):
    """チェック関数を登録するデコレータ。title は学習者が実装する名前。"""

    def deco(fn):
        if exercise_id in _REGISTRY:
            raise ValueError(f"exercise id {exercise_id} is registered twice")
        _REGISTRY[exercise_id] = Entry(title, fn)
        return fn

    return deco


# ---------------------------------------------------------------- 学習者コードの呼び出し

def one_line(text: str, limit: int = 160) -> str:
    """最初の空でない行だけを、アドレスを伏せて limit 文字までに（学習者に見せる 1 行）。"""
    text = re.sub(r"0x[0-9a-fA-F]+", "0x…", str(text))
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return explain.cut(first, limit)


def _is_stub(exc: NotImplementedError) -> bool:
    """演習の「まだ」の印（メッセージのない raise NotImplementedError、nbgrader のスタブも同じ）か。
    JAX などのライブラリがメッセージつきで送出する NotImplementedError は学習者のエラーとして扱う。"""
    return not exc.args or not str(exc.args[0]).strip()


def call(fn: Callable, *args, **kwargs):
    """学習者の関数を呼ぶ。NotImplementedError は NotDone、それ以外の例外は LearnerError に。
    学習者のコードが自分で送出した SystemExit（関数の中の sys.exit() や exit()）も LearnerError です。
    KeyboardInterrupt は、採点の中（CH6_GRADING=1: 中断するのは採点の側の制限時間だけ）なら LearnerError、
    学習者のノートブックでは止める操作なのでそのまま送出します。"""
    if not callable(fn):
        raise Fail(f"関数のはずの値が {type(fn).__name__} でした。関数そのものを渡してください。")
    try:
        return fn(*args, **kwargs)
    except NotImplementedError as exc:
        raise (NotDone() if _is_stub(exc) else LearnerError(exc)) from exc
    except (Fail, NotDone, LearnerError):
        raise
    except Exception as exc:  # 学習者のコードの中の例外
        raise LearnerError(exc) from exc
    except SystemExit as exc:
        raise LearnerError(exc) from exc
    except KeyboardInterrupt as exc:
        if os.environ.get("CH6_GRADING") != "1":
            raise
        raise LearnerError(exc) from exc


class TimeUp(BaseException):
    """:func:`time_limit` の時間切れ（with の外に出る。BaseException なので except Exception では止まらない）。"""

    def __init__(self, seconds: float):
        super().__init__(seconds)
        self.seconds = seconds


class _Late(BaseException):
    """SIGALRM で学習者のコードの中に送出する（args[0]: どの time_limit のものか）。"""


_LIMITS: list[tuple[float, object]] = []  # いまの time_limit の (締め切り time.monotonic(), 印)、外側から順に


@contextlib.contextmanager
def time_limit(seconds: float):
    """with の中が seconds 秒を超えたら TimeUp を送出する（終わらないループでノートブックが止まらないように）。
    入れ子にでき、外側の締め切りも守ります。時間を計れるのは SIGALRM のある OS のメインスレッド（Jupyter の
    カーネルのセル）だけで、ほかでは何もしません（Windows では学習者がカーネルを中断します）。"""
    import signal
    import threading
    import time

    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return
    me = object()

    def on_alarm(signum, frame):
        now = time.monotonic()
        late = next((mark for end, mark in _LIMITS if end <= now + 1e-3), None)
        if late is not None:
            raise _Late(late)
        _arm(time)

    old = signal.signal(signal.SIGALRM, on_alarm) if not _LIMITS else None
    _LIMITS.append((time.monotonic() + seconds, me))
    _arm(time)
    try:
        yield
    except _Late as exc:
        if exc.args[0] is not me:
            raise
        raise TimeUp(seconds) from None
    finally:
        _LIMITS.pop()
        if _LIMITS:
            _arm(time)
        else:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)


def _arm(time) -> None:
    """いちばん早い締め切りに SIGALRM を合わせる。"""
    import signal

    first = min(end for end, _ in _LIMITS)
    signal.setitimer(signal.ITIMER_REAL, max(first - time.monotonic(), 1e-3))


def call_within(seconds: float, fn: Callable, *args, late: str, **kwargs):
    """call と同じだが、seconds 秒で返らなければ Fail(late)（終わらないループでノートブックが止まらないように）。
    時間を計れるのは SIGALRM のある OS のメインスレッド（Jupyter のカーネルのセル）だけで、ほかでは call と同じ。"""
    try:
        with time_limit(seconds):
            return call(fn, *args, **kwargs)
    except TimeUp:
        raise Fail(late) from None


# ---------------------------------------------------------------- 隠し入力の部品

def hidden_rng(seed: int) -> np.random.Generator:
    """隠し入力用の乱数（節ごとに別の seed の範囲を使う: 6.1 は 61_000 + 番号 など）。"""
    return np.random.default_rng(seed)


def f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def n_devices() -> int:
    """今の JAX が見ているデバイスの数（隠し入力の形をこれから作る）。"""
    import jax

    return jax.device_count()


# ✅ の行で「このデバイスの数では確かめられない」と言う句（tools/mutate.py がこの句で、少ないデバイスで見逃した
# 変異体が ✅ の行で断ってあるかを見分けます）
CANNOT_TELL = "この環境では確かめられません"


def cannot_tell(what: str) -> str:
    """✅ の行の終わりに添える括弧書き（1 文）: 今のデバイスの数では what を確かめられないこと。"""
    return f"（デバイスが {n_devices()} 個なので、{what}は{CANNOT_TELL}）"


# ---------------------------------------------------------------- 表示用の整形

def fmt(x: Any) -> str:
    """決定的で短い表示（浮動小数は有効数字 4 桁）。"""
    if isinstance(x, (float, np.floating)):
        return f"{float(x):.4g}"
    if isinstance(x, tuple):
        return "(" + ", ".join(fmt(v) for v in x) + ("," if len(x) == 1 else "") + ")"
    return str(x)


def _shape_of(x) -> tuple | None:
    shape = getattr(x, "shape", None)
    return tuple(shape) if shape is not None else None


def expect_shape(got, want: tuple, what: str = "出力", hint: str = "") -> None:
    shape = _shape_of(got)
    if shape is None:
        raise Fail(f"{what}は配列のはずですが、{type(got).__name__} が返りました。{hint}".strip())
    if shape != tuple(want):
        raise Fail(f"{what}の形が違います（{fmt(tuple(want))} のはずが {fmt(shape)} でした）。{hint}".strip())


def expect_close(got, want, what: str = "出力", *, rtol: float = 1e-4, atol: float = 1e-5,
                 hint: str = "") -> None:
    """形と値を比べる。違えば最大誤差の位置と値を 1 行で示す。"""
    want = np.asarray(want)
    expect_shape(got, want.shape, what, hint)
    try:
        g = np.asarray(got, dtype=np.float64)
    except Exception:
        raise Fail(f"{what}を数値の配列に変換できませんでした（型は {type(got).__name__}）。{hint}".strip()) from None
    w = want.astype(np.float64)
    sep = " " if what[-1:].isascii() and what[-1:].strip() else ""  # 「'w' の値」のように英数字の後は空ける
    if not np.all(np.isfinite(g)):
        raise Fail(f"{what}{sep}に NaN または inf が含まれています。{hint}".strip())
    err = np.abs(g - w)
    bad = err > atol + rtol * np.abs(w)
    if bad.any():
        idx = np.unravel_index(np.argmax(np.where(bad, err, -1)), err.shape) if err.ndim else ()
        pos = f"位置 {fmt(tuple(int(i) for i in idx))} で " if idx else ""
        count = f"、{bad.size} 要素中 {int(bad.sum())} 要素が許容誤差の外" if bad.size > 1 else ""  # スカラーには数えない
        label = what if what.endswith("値") else f"{what}{sep}の値"  # 「の値の値」「戻り値の値」にしない
        raise Fail(f"{label}が違います（{pos}{fmt(w[idx])} のはずが {fmt(g[idx])}{count}）。{hint}".strip())


# ---------------------------------------------------------------- jaxpr を使った構造チェック

def _subjaxprs(eqn):
    import jax.extend as jex

    for val in eqn.params.values():
        vals = val if isinstance(val, (list, tuple)) else [val]
        for v in vals:
            if isinstance(v, jex.core.ClosedJaxpr):
                yield v.jaxpr
            elif isinstance(v, jex.core.Jaxpr):
                yield v


def walk(jaxpr):
    """jaxpr の式を、入れ子の jaxpr（jit・shard_map・scan の中）も含めて順に: for eqn in walk(closed.jaxpr)。"""
    for eqn in jaxpr.eqns:
        yield eqn
        for sub in _subjaxprs(eqn):
            yield from walk(sub)


def _trace(fn, args, axis_env=None):
    import jax

    # 関数などの配列でない引数は閉包に入れ、配列だけをトレースする
    is_static = [callable(a) or isinstance(a, (str, bool, type(None))) for a in args]
    arrays = [a for a, s in zip(args, is_static) if not s]

    def traced(*arrs):
        it = iter(arrs)
        return fn(*[a if s else next(it) for a, s in zip(args, is_static)])

    try:
        kw = {"axis_env": axis_env} if axis_env else {}
        closed = jax.make_jaxpr(traced, **kw)(*arrays)
    except NotImplementedError as exc:
        raise (NotDone() if _is_stub(exc) else LearnerError(exc)) from exc
    except Exception as exc:
        raise LearnerError(exc) from exc
    return closed.jaxpr


def jaxpr_size(fn: Callable, *args, axis_env=None) -> int:
    """fn をトレースした jaxpr の式の数（入れ子の jaxpr も数える）。"""
    return sum(1 for _ in walk(_trace(fn, args, axis_env)))


def jaxpr_primitives(fn: Callable, *args, axis_env=None) -> set[str]:
    """fn をトレースした jaxpr に現れるプリミティブ名の集合。"""
    return {eqn.primitive.name for eqn in walk(_trace(fn, args, axis_env))}


def expect_no_batch_loop(fn: Callable, make_args: Callable[[int], tuple],
                         sizes: tuple[int, int] = (3, 6), what: str = "バッチの大きさ") -> None:
    """バッチの大きさを変えても jaxpr が同じ大きさ（Python ループなし）で、
    scan / while でバッチを 1 件ずつ回していないことを確かめる。"""
    counts = [jaxpr_size(fn, *make_args(n)) for n in sizes]
    if counts[0] != counts[1]:
        raise Fail(
            f"{what}を {sizes[0]} から {sizes[1]} にすると、jaxpr の式の数が {counts[0]} から {counts[1]} に増えました。"
            "Python のループで 1 件ずつ処理しているので、vmap で一度にバッチ化してください。"
        )
    prims = jaxpr_primitives(fn, *make_args(sizes[1]))
    loops = sorted(prims & {"scan", "while"})
    if loops:
        raise Fail(
            f"jaxpr に {', '.join(loops)} があるので、lax.map / scan / fori_loop で 1 件ずつ回しています。"
            "vmap で一度にバッチ化してください。"
        )


# jaxpr での psum の名前: shard_map の中（check_vma=True）では lax.psum は psum_invariant という名前で現れ、
# unreduced / 非同期の形（*_start）も同じ演算です（どのチェックもこの 1 つの集合で数えます）
PSUM_NAMES = frozenset({"psum", "psum_invariant", "unreduced_psum", "psum_start", "psum_invariant_start"})


def is_close(a, b, rtol: float = 1e-4, atol: float = 1e-5) -> bool:
    """a が b と同じ形で、許容誤差の内にあるか（数値の配列にできなければ False）。"""
    try:
        a = np.asarray(a, dtype=np.float64)
    except Exception:
        return False
    b = np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=rtol, atol=atol))


def dict_entry(tree, key: str, what: str, keys: tuple[str, ...] = ("w", "b")):
    """学習者が返したパラメータの dict から key の値を取る（キーが keys と違えば、何が返ったかを言って不合格）。"""
    if not isinstance(tree, dict) or set(tree) != set(keys):
        got = sorted(tree) if isinstance(tree, dict) else type(tree).__name__
        names = " と ".join(f"'{k}'" for k in keys)
        raise Fail(f"{what}はキー {names} の dict のはずですが、{got} が返りました。"
                   "jax.tree.map で params と同じ形の dict を返してください。")
    return tree[key]


def traced_eqns(fn: Callable, *args) -> list:
    """fn(*args) をトレースした jaxpr の式（入れ子も含む）。未解答は NotDone、学習者の例外は LearnerError。"""
    import jax

    try:
        closed = jax.make_jaxpr(fn)(*args)
    except NotImplementedError as exc:
        raise (NotDone() if _is_stub(exc) else LearnerError(exc)) from exc
    except Exception as exc:
        raise LearnerError(exc) from exc
    return list(walk(closed.jaxpr))


_BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"


@contextlib.contextmanager
def counting_compiles():
    """``with counting_compiles() as compiles: ...`` の後、``compiles[0]`` はその間に XLA がコンパイルした回数。

    トレースの回数ではありません: 型は同じでもシャーディングやデバイスが変わると、トレースし直さずに
    コンパイルだけし直すことがあります（「コンパイルは 1 回」を確かめるのはこちら）。"""
    import jax.monitoring

    compiles = [0]

    def listener(event, duration, **kwargs):
        if event == _BACKEND_COMPILE:
            compiles[0] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield compiles
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
