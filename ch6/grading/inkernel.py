"""学習者のカーネルの中で動く採点コード。

このモジュールが読み込むのはチェックの登録表（``ch6._core`` と ``ch6.checks``）だけです。nbformat も
ホスト側の採点コードも読み込みません（カーネルでの準備が速く、壊れにくいように。
``tests/test_grading_inkernel.py`` が確かめます）。ホスト側は下の文字列をカーネルに送ります:

1. ``prelude(nonce, root)``: 学習者のセルより先に。結果を表示する関数と nonce を閉じ込めるので、学習者の
   コードが ``IPython.display.display`` や ``importlib`` を差し替えても、採点結果の表示には使われません。
   JAX もここで読み込みます（バックエンドは初期化しない）。混んだマシンで何十秒もかかる読み込みが、学習者の
   セルの制限時間（``--timeout``）を使わないように。
2. ``SETUP``: 学習者のセルのあとで。``ch6`` を ``sys.modules`` から消してインストール先から読み込み直し、
   このモジュールの :func:`grader` で採点の関数を作ります（``ch6`` を差し替えられていても講座のチェックで採点）。
3. ``check_code(id)``: 演習ごとに 1 セル。結果は表示データ（``MIME``）で 1 つ返します。
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._core import Status, load_errors, registry, run_check

MIME = "application/vnd.ch6.grade+json"
GRADER = "__ch6_grader__"  # カーネルの中の名前（学習者のコードがこれに触れると備考に書く）

_PRELUDE = r'''
def __ch6_prelude(nonce, root, mime, user_ns):
    import importlib
    import sys
    from IPython.display import display

    import_module, invalidate_caches, modules, path = (importlib.import_module, importlib.invalidate_caches,
                                                       sys.modules, sys.path)

    def emit(payload):
        display({mime: dict(payload, nonce=nonce)}, raw=True)

    def make_grader():
        for name in [m for m in list(modules) if m == "ch6" or m.startswith("ch6.")]:
            del modules[name]
        path.insert(0, root)
        invalidate_caches()
        return import_module("ch6.grading.inkernel").grader(emit, user_ns)

    try:  # JAX の読み込み（静かなマシンでも数秒）は準備の時間に: 学習者のセルの制限時間は学習者のコードに使う
        import_module("jax.numpy")
    except Exception:
        pass
    return make_grader


%(grader)s = __ch6_prelude(%(nonce)r, %(root)r, %(mime)r, globals())
del __ch6_prelude
'''

SETUP = f"{GRADER} = {GRADER}()"


def prelude(nonce: str, root: str) -> str:
    """学習者のセルより先に実行するコード。root は ch6 パッケージのあるフォルダ。"""
    return _PRELUDE % {"nonce": nonce, "root": root, "mime": MIME, "grader": GRADER}


def check_code(exercise_id: str) -> str:
    return f"{GRADER}({exercise_id!r})"


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
