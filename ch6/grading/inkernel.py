"""学習者のカーネルの中で動く採点コード: 演習番号を受け取ってチェックを実行し、結果を返す関数 :func:`grader`。

このモジュールが読み込むのはチェックの登録表（``ch6._core`` と ``ch6.checks``）だけです。nbformat も
ホスト側の採点コードも読み込みません（カーネルでの準備が速く、壊れにくいように。
``tests/grading/test_inkernel.py`` が確かめます）。呼ぶのは監視（:mod:`ch6.grading.guard`）です:
学習者のセルのあとで ``ch6`` を ``sys.modules`` から消してインストール先から読み込み直し、このモジュールの
:func:`grader` で採点の関数を作ります。結果は監視のソケットでホストへ届きます。
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._core import Status, load_errors, registry, run_check


def check_module(exercise_id: str) -> str:
    """"6.3a-2" -> "s6_3a"（チェックを定義するモジュール）。"""
    return "s" + exercise_id.split("-")[0].replace(".", "_")


def grader(emit: Callable[[dict], None], user_ns: dict[str, Any]) -> Callable[[str], None]:
    """演習番号を受け取って採点し、結果を emit で返す関数を作る。まず読み込み先を emit する
    （ホストはそれがインストール先の ch6 であることを確かめる）。"""
    from .. import _core

    broken = load_errors()

    def grade(exercise_id: str) -> None:
        entry = registry().get(exercise_id)
        if entry is None:
            why = broken.get(check_module(exercise_id))
            message = (f"チェックを読み込めませんでした（{check_module(exercise_id)}.py: {why}）。" if why
                       else run_check(exercise_id, None).message)
            emit(dict(id=exercise_id, title="?", status=Status.INTERNAL.value, message=message))
        elif entry.title not in user_ns:
            emit(dict(id=exercise_id, title=entry.title, status=Status.MISSING.value, message=""))
        else:
            res = run_check(exercise_id, user_ns[entry.title])
            emit(dict(id=exercise_id, title=entry.title, status=res.status.value, message=res.message))

    emit(dict(kind="setup", origin=_core.__file__))
    return grade
