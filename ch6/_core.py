"""演習チェックを実行する側: 状態（Status）、結果（Result）、登録表の読み込み、run_check と ch6.check。

チェックを書く人の API は :mod:`ch6.checking` にあります（ここでは再び公開しません）。ここの公開名は
``ch6`` から使います（``ch6.run_check``、``ch6.registry`` など）。
ノートブックからは :func:`check` を呼びます。結果は 1 行の日本語で表示され、
例外は外に漏れません（「すべて実行」が途中で止まらないように）。
"""
from __future__ import annotations

import dataclasses
import enum
import importlib
import os
import pkgutil
from typing import Any

from . import edition, explain
from .checking import Entry, Fail, LearnerError, NotDone, TimeUp, one_line, registered, time_limit

__all__ = ["Status", "MARKS", "WORDS", "Result", "check", "run_check", "RESULTS", "registry", "load_errors"]


class Status(enum.StrEnum):
    """演習 1 つの結果の状態。チェック（run_check）・採点用カーネル・採点コマンド（ch6.grading）で共通。"""

    PASS = "pass"              # 正解
    FAIL = "fail"              # 不正解
    ERROR = "error"            # 学習者のコードの中で例外
    TIMEOUT = "timeout"        # （採点コマンド）チェックが制限時間内に終わらない
    CRASH = "crash"            # （採点コマンド）チェックの最中にカーネルが停止
    NOT_DONE = "not_done"      # NotImplementedError のまま
    INTERNAL = "internal"      # チェッカ・採点ツール側の問題
    MISSING = "missing"        # （採点用カーネル）関数が定義されていない
    NOT_GRADED = "not_graded"  # （採点コマンド）ファイルが読めない・カーネルが止まったなどで採点できない
    TAMPERED = "tampered"      # （採点コマンド）採点のしくみへの干渉が見つかった（0 点。ch6.grading.guard）

    @property
    def mark(self) -> str:
        return MARKS[self]

    @property
    def label(self) -> str:
        """印と語（「✅ 正解」）: 絵文字のフォントがない画面でも、語で結果が読める。"""
        return f"{MARKS[self]} {WORDS[self]}"


# 印の表はここ 1 つ（ノートブックの 1 行表示も採点の表も CSV もこれを使う）
MARKS = {
    Status.PASS: "✅", Status.FAIL: "❌", Status.ERROR: "❌", Status.TIMEOUT: "❌", Status.CRASH: "❌",
    Status.NOT_DONE: "⏳", Status.INTERNAL: "⚠️", Status.MISSING: "⚠️", Status.NOT_GRADED: "⚠️",
    Status.TAMPERED: "⚠️",
}
# 印の横に置く語（1 行表示の「✅ 正解 [6.1-1] …」）。絵文字のフォントがない JupyterLab では印が空の四角になるので、
# 語だけで正解・不正解・未解答が読めるようにする
WORDS = {
    Status.PASS: "正解", Status.FAIL: "不正解", Status.ERROR: "エラー", Status.TIMEOUT: "時間切れ",
    Status.CRASH: "停止", Status.NOT_DONE: "未解答", Status.INTERNAL: "採点できません", Status.MISSING: "未定義",
    Status.NOT_GRADED: "採点できません", Status.TAMPERED: "干渉",
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
        return f"{self.status.label} [{self.exercise}] {self.message}"

    def __str__(self) -> str:  # pragma: no cover - 表示用
        return self.line


_LOAD_ERRORS: dict[str, str] = {}  # 読み込めなかったチェックモジュール -> 理由
_LOADED = False
RESULTS: list[Result] = []  # このカーネルで ch6.check した結果（6.3a・6.5 の最後のセルが数える）


def load_errors() -> dict[str, str]:
    """読み込めなかったチェックモジュールとその理由（テストで空であることを確かめる）。"""
    registry()
    return dict(_LOAD_ERRORS)


def registry(reload: bool = False) -> dict[str, Entry]:
    """全セクションのチェックを読み込み、登録表を返す。reload=True なら ch6.checks の中を読み込み直す
    （読み込めなかった記録を消してから。すでに読み込んだモジュールはそのまま）。"""
    with edition.checks_open():  # 学習者版: チェックのモジュールはこの間だけ sys.modules にある（ch6.edition）
        return _registry(reload)


def _registry(reload: bool) -> dict[str, Entry]:
    global _LOADED
    if reload:
        _LOAD_ERRORS.clear()
        _LOADED = False
    if not _LOADED:
        from . import checks

        for mod in sorted(pkgutil.iter_modules(checks.__path__), key=lambda m: m.name):
            try:  # 1 つのモジュールの不具合で、他の節のチェックまで止めない
                importlib.import_module(f"{checks.__name__}.{mod.name}")
            except Exception as exc:
                _LOAD_ERRORS[mod.name] = f"{type(exc).__name__}: {one_line(exc)}"
        _LOADED = True
    return registered()


# ---------------------------------------------------------------- 実行と表示

def _full_precision():
    """チェックの中の計算（学習者の関数と参照の両方）を float32 のままにする。TPU の既定の精度では float32 の
    行列積の入力が bf16 に丸められ、正しい答えも参照と 1e-3 ほどずれるため。CPU では何も変わらない。"""
    from . import precision

    return precision.full()


def run_check(exercise_id: str, answer: Any) -> Result:
    """チェックを 1 つ実行して Result を返す（例外は外に出さない）。"""
    with edition.checks_open():  # 学習者版: チェックのモジュールはこの間だけ sys.modules にある（ch6.edition）
        return _run_check(exercise_id, answer)


def _run_check(exercise_id: str, answer: Any) -> Result:
    try:
        entry = registry().get(exercise_id)
    except Exception as exc:  # チェック定義の読み込み失敗
        return Result(exercise_id, Status.INTERNAL, f"チェックを読み込めませんでした: {one_line(exc)}")
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
        with _full_precision():  # どのバックエンドでも同じ判定に（ch6.precision.full の説明）
            detail = entry.fn(answer)
        # 行の頭に「✅ 正解」があるので、本文は何を確かめたかだけ（「正解です。」を重ねない。issue 46）
        return Result(exercise_id, Status.PASS, f"{entry.title}: {detail}".rstrip() if detail else entry.title)
    except NotDone:
        return Result(exercise_id, Status.NOT_DONE,
                      f"{entry.title}: 関数の本体に答えを書いてから、このセルを実行してください"
                      "（いまは NotImplementedError を出します）。")
    except Fail as exc:
        return Result(exercise_id, Status.FAIL, f"{entry.title}: {exc}")
    except LearnerError as exc:
        err = exc.exc
        return Result(exercise_id, Status.ERROR, f"{entry.title}: {_in_answer(err)}")
    except RecursionError:
        return Result(exercise_id, Status.ERROR, f"{entry.title}: 再帰が深すぎます（関数が自分自身を呼んでいませんか？）。")
    except Exception as exc:  # チェッカ自身の不具合: トレースバックは見せない
        return Result(exercise_id, Status.INTERNAL,
                      f"{entry.title}: チェッカ内部の問題です（解答のせいではありません）: "
                      f"{type(exc).__name__}: {one_line(exc)}")


def _in_answer(err: BaseException) -> str:
    """解答のコードの中の例外の 1 行: 「解答のコードの中で ZeroDivisionError が起きました（原文「…」）。」、説明がある
    例外は「ValueError（解答のコードの中）：説明」（「起きました」は 1 度だけ、説明の 2 文を足しても 2 文。issue 46 の
    編集者の読み）。"""
    text = explain.explain(err)
    name = type(err).__name__
    if text.startswith(f"{name}: "):
        return f"{name}（解答のコードの中）：{text.removeprefix(f'{name}: ')}"
    return f"解答のコードの中で {text}"


# チェック 1 つの制限時間（秒）: ノートブックの ch6.check と nbgrader 版の採点のセル。ch6-grade の --check-timeout と
# nbgrader の autograde（ch6.grading.gradecells.CHECK_TIMEOUT）の既定も同じ 60 秒
CHECK_SECONDS = 60


def run_check_within(exercise_id: str, answer: Any, seconds: float = CHECK_SECONDS) -> Result:
    """run_check と同じだが、seconds 秒で終わらなければ時間切れ（TIMEOUT）の Result。終わらないループの関数で
    ノートブックの「すべて実行」が止まらないように。時間を計れない環境（Windows など）では run_check と同じ。"""
    try:
        with time_limit(seconds):
            return run_check(exercise_id, answer)
    except TimeUp:
        title = _title(exercise_id)
        return Result(exercise_id, Status.TIMEOUT, (
            f"{title}: チェックが {seconds:g} 秒以内に終わりませんでした。関数が終わらないループに入っていませんか？"
            "（while の条件、range の範囲、自分自身の呼び出しを確かめてください）"))


def _title(exercise_id: str) -> str:
    try:
        entry = registry().get(exercise_id)
    except Exception:
        entry = None
    return entry.title if entry is not None else exercise_id


def check(exercise_id: str, answer: Any) -> None:
    """ノートブック用: チェックを実行し（CHECK_SECONDS 秒まで）、結果を 1 行で表示する。"""
    if os.environ.get("CH6_GRADING") == "1":  # ch6-grade の中: 採点側があとで全チェックを実行し直す
        return
    result = run_check_within(exercise_id, answer)
    RESULTS.append(result)
    print(result.line)
