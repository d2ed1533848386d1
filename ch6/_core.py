"""演習チェックの共通部品。

一つの演習につき一つのチェック関数を ``@exercise("6.1-1", ...)`` で登録します。
チェック関数は学習者の解答を受け取り、合格なら短い説明文を返し、
不合格なら :class:`Fail` を送出します。学習者のコードは必ず :func:`call`
を通して呼ぶので、学習者側の例外とチェッカー自身の不具合を区別できます。

ノートブックからは :func:`check` を呼びます。結果は 1 行の日本語で表示され、
例外は外に漏れません（「すべて実行」が途中で止まらないように）。
"""
from __future__ import annotations

import dataclasses
import enum
import importlib
import os
import pkgutil
import re
from typing import Any, Callable

import numpy as np

from . import explain

__all__ = [
    "Fail", "NotDone", "LearnerError", "Status", "MARKS", "Result", "exercise", "call", "check", "run_check",
    "expect_shape", "expect_close", "expect_no_batch_loop", "jaxpr_primitives",
    "jaxpr_size", "fmt", "RESULTS", "registry", "hidden_rng", "f32", "n_devices",
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


class Status(enum.StrEnum):
    """演習 1 つの結果の状態。チェック（run_check）・採点用カーネル・採点コマンド（ch6.grading）で共通。"""

    PASS = "pass"              # 正解
    FAIL = "fail"              # 不正解
    ERROR = "error"            # 学習者のコードの中で例外
    TIMEOUT = "timeout"        # （採点コマンド）チェックが制限時間内に終わらない
    CRASH = "crash"            # （採点コマンド）チェックの最中にカーネルが停止
    NOT_DONE = "not_done"      # NotImplementedError のまま
    INTERNAL = "internal"      # チェッカー・採点ツール側の問題
    MISSING = "missing"        # （採点用カーネル）関数が定義されていない
    NOT_GRADED = "not_graded"  # （採点コマンド）ファイルが読めない・カーネルが止まったなどで採点できない

    @property
    def mark(self) -> str:
        return MARKS[self]


# 印の表はここ 1 つ（ノートブックの 1 行表示も採点の表も CSV もこれを使う）
MARKS = {
    Status.PASS: "✅", Status.FAIL: "❌", Status.ERROR: "❌", Status.TIMEOUT: "❌", Status.CRASH: "❌",
    Status.NOT_DONE: "⏳", Status.INTERNAL: "⚠️", Status.MISSING: "⚠️", Status.NOT_GRADED: "⚠️",
}


@dataclasses.dataclass(frozen=True)
class Result:
    exercise: str
    status: Status
    message: str

    def __post_init__(self):  # 文字列で渡されても Status にそろえる（知らない値は ValueError）
        object.__setattr__(self, "status", Status(self.status))

    @property
    def ok(self) -> bool:
        return self.status is Status.PASS

    @property
    def line(self) -> str:
        return f"{self.status.mark} [{self.exercise}] {self.message}"

    def __str__(self) -> str:  # pragma: no cover - 表示用
        return self.line


@dataclasses.dataclass(frozen=True)
class _Entry:
    title: str
    fn: Callable[[Any], str]


_REGISTRY: dict[str, _Entry] = {}
_LOAD_ERRORS: dict[str, str] = {}  # 読み込めなかったチェックモジュール -> 理由
_LOADED = False
RESULTS: list[Result] = []  # このカーネルで ch6.check した結果（6.3a・6.5 の最後のセルが数える）


def exercise(exercise_id: str, title: str):
    """チェック関数を登録するデコレータ。title は学習者が実装する名前。"""

    def deco(fn):
        if exercise_id in _REGISTRY:
            raise ValueError(f"exercise id {exercise_id} is registered twice")
        _REGISTRY[exercise_id] = _Entry(title, fn)
        return fn

    return deco


def load_errors() -> dict[str, str]:
    """読み込めなかったチェックモジュールとその理由（テストで空であることを確かめる）。"""
    registry()
    return dict(_LOAD_ERRORS)


def registry() -> dict[str, _Entry]:
    """全セクションのチェックを読み込み、登録表を返す。"""
    global _LOADED
    if not _LOADED:
        from . import checks

        for mod in sorted(pkgutil.iter_modules(checks.__path__), key=lambda m: m.name):
            try:  # 1 つのモジュールの不具合で、他の節のチェックまで止めない
                importlib.import_module(f"{checks.__name__}.{mod.name}")
            except Exception as exc:
                _LOAD_ERRORS[mod.name] = f"{type(exc).__name__}: {_one_line(exc)}"
        _LOADED = True
    return _REGISTRY


# ---------------------------------------------------------------- 学習者コードの呼び出し

def _one_line(text: str, limit: int = 160) -> str:
    text = re.sub(r"0x[0-9a-fA-F]+", "0x…", str(text))
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return first if len(first) <= limit else first[: limit - 1] + "…"


def call(fn: Callable, *args, **kwargs):
    """学習者の関数を呼ぶ。NotImplementedError は NotDone、それ以外の例外は LearnerError に。"""
    if not callable(fn):
        raise Fail(f"関数を渡してください（受け取ったのは {type(fn).__name__} です）。")
    try:
        return fn(*args, **kwargs)
    except NotImplementedError as exc:
        raise NotDone() from exc
    except (Fail, NotDone, LearnerError):
        raise
    except Exception as exc:  # 学習者のコードの中の例外
        raise LearnerError(exc) from exc


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
        raise Fail(f"{what}の形が違います: 期待 {fmt(tuple(want))}、実際 {fmt(shape)}。{hint}".strip())


def expect_close(got, want, what: str = "出力", *, rtol: float = 1e-4, atol: float = 1e-5,
                 hint: str = "") -> None:
    """形と値を比べる。違えば最大誤差の位置と値を 1 行で示す。"""
    want = np.asarray(want)
    expect_shape(got, want.shape, what, hint)
    try:
        g = np.asarray(got, dtype=np.float64)
    except Exception as exc:
        raise Fail(f"{what}を数値の配列に変換できません（{explain.explain(exc)}）") from None
    w = want.astype(np.float64)
    if not np.all(np.isfinite(g)):
        raise Fail(f"{what}に NaN または inf が含まれています。{hint}".strip())
    err = np.abs(g - w)
    bad = err > atol + rtol * np.abs(w)
    if bad.any():
        idx = np.unravel_index(np.argmax(np.where(bad, err, -1)), err.shape) if err.ndim else ()
        pos = f"位置 {fmt(tuple(int(i) for i in idx))} で" if idx else ""
        raise Fail(
            f"{what}の値が違います: {pos}期待 {fmt(w[idx])}、実際 {fmt(g[idx])}"
            f"（{int(bad.sum())}/{bad.size} 要素が許容誤差外）。{hint}".strip()
        )


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


def _walk(jaxpr):
    for eqn in jaxpr.eqns:
        yield eqn
        for sub in _subjaxprs(eqn):
            yield from _walk(sub)


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
        raise NotDone() from exc
    except Exception as exc:
        raise LearnerError(exc) from exc
    return closed.jaxpr


def jaxpr_size(fn: Callable, *args, axis_env=None) -> int:
    """fn をトレースした jaxpr の式の数（入れ子の jaxpr も数える）。"""
    return sum(1 for _ in _walk(_trace(fn, args, axis_env)))


def jaxpr_primitives(fn: Callable, *args, axis_env=None) -> set[str]:
    """fn をトレースした jaxpr に現れるプリミティブ名の集合。"""
    return {eqn.primitive.name for eqn in _walk(_trace(fn, args, axis_env))}


def expect_no_batch_loop(fn: Callable, make_args: Callable[[int], tuple],
                         sizes: tuple[int, int] = (3, 6), what: str = "バッチサイズ") -> None:
    """バッチの大きさを変えても jaxpr が同じ大きさ（Python ループなし）で、
    scan / while でバッチを 1 件ずつ回していないことを確かめる。"""
    counts = [jaxpr_size(fn, *make_args(n)) for n in sizes]
    if counts[0] != counts[1]:
        raise Fail(
            f"{what} {sizes[0]} と {sizes[1]} で jaxpr の式の数が {counts[0]} → {counts[1]} と増えました。"
            "Python のループで 1 件ずつ処理していませんか？ vmap を使いましょう。"
        )
    prims = jaxpr_primitives(fn, *make_args(sizes[1]))
    loops = sorted(prims & {"scan", "while"})
    if loops:
        raise Fail(
            f"jaxpr に {', '.join(loops)} があります: lax.map / scan / fori_loop で 1 件ずつ回しています。"
            "vmap で一度にバッチ化しましょう。"
        )


# ---------------------------------------------------------------- 実行と表示

def run_check(exercise_id: str, answer: Any) -> Result:
    """チェックを 1 つ実行して Result を返す（例外は外に出さない）。"""
    try:
        entry = registry().get(exercise_id)
    except Exception as exc:  # チェック定義の読み込み失敗
        return Result(exercise_id, Status.INTERNAL, f"チェックを読み込めませんでした: {_one_line(exc)}")
    if entry is None:
        if _LOAD_ERRORS:
            broken = "; ".join(f"{name}: {why}" for name, why in sorted(_LOAD_ERRORS.items()))
            return Result(exercise_id, Status.INTERNAL, f"チェックの定義を読み込めませんでした（{broken}）。")
        known = ", ".join(sorted(registry()))
        return Result(exercise_id, Status.INTERNAL, f"この番号の演習はありません（あるのは {known}）。")
    if not callable(answer):  # どの演習も関数（または答えを返す関数）を受け取る
        return Result(exercise_id, Status.FAIL,
                      f"{entry.title}: 関数を渡してください（受け取ったのは {type(answer).__name__} の値です）。"
                      f"ch6.check(\"{exercise_id}\", {entry.title}) のように、関数の名前を（かっこなしで）渡します。")
    try:
        detail = entry.fn(answer)
        return Result(exercise_id, Status.PASS, f"{entry.title}: 正解です。{detail}".rstrip())
    except NotDone:
        return Result(exercise_id, Status.NOT_DONE,
                      f"{entry.title}: まだ解答されていません（NotImplementedError のままです）。")
    except Fail as exc:
        return Result(exercise_id, Status.FAIL, f"{entry.title}: {exc}")
    except LearnerError as exc:
        err = exc.exc
        return Result(exercise_id, Status.ERROR,
                      f"{entry.title}: あなたのコードの中でエラーが起きました: {explain.explain(err)}")
    except RecursionError:
        return Result(exercise_id, Status.ERROR, f"{entry.title}: 再帰が深すぎます（関数が自分自身を呼んでいませんか？）。")
    except Exception as exc:  # チェッカー自身の不具合: トレースバックは見せない
        return Result(exercise_id, Status.INTERNAL,
                      f"{entry.title}: チェッカー内部の問題です（解答のせいではありません）: "
                      f"{type(exc).__name__}: {_one_line(exc)}")


def check(exercise_id: str, answer: Any) -> None:
    """ノートブック用: チェックを実行し、結果を 1 行で表示する。"""
    if os.environ.get("CH6_GRADING") == "1":  # ch6-grade の中: 採点側があとで全チェックを実行し直す
        return
    result = run_check(exercise_id, answer)
    RESULTS.append(result)
    print(result.line)
