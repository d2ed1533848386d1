"""学習者の呼び出しの間に、本編のライブラリの関数（``ch6.serving.attend`` など）が呼ばれたかを見る。

演習が「本編の関数を自分で書く」ものなら、その関数を 1 行で呼ぶ答えは、値も構造も本編のセルと同じなので通ってしまいます。
6.6-3 の ``_watching``（``jax.device_put``）と同じやり方で見ます: モジュールの属性と、学習者の関数のグローバル変数で
同じ関数を指す名前（``from ch6.serving import attend``）を、呼ばれた名前を覚える版に差し替え、終わったら元に戻します。
採点（``ch6-grade``）は ``ch6`` を読み込み直すので、学習者のセルが読み込んだ前のモジュールも、名前で探して差し替えます。
"""
from __future__ import annotations

import contextlib
import functools
import sys
import types


def _globals_of(fn) -> dict:
    """学習者の関数のグローバル変数（jit や functools.partial で包んだものは中の関数の）。"""
    for _ in range(8):
        if isinstance(fn, functools.partial):
            fn = fn.func
        elif getattr(fn, "__wrapped__", None) is not None:
            fn = fn.__wrapped__
        else:
            break
    space = getattr(fn, "__globals__", None)
    return space if isinstance(space, dict) else {}


def _modules(module: str, space: dict) -> list[types.ModuleType]:
    """名前が module のモジュール: 今の ``sys.modules`` のものと、学習者のグローバル変数から届くもの
    （``serving``、``ch6`` の属性 ``serving``）。読み込みはしない（まだ読み込まれていない属性は辿らない）。"""
    found: list[types.ModuleType] = []

    def add(m) -> None:
        if isinstance(m, types.ModuleType) and m.__name__ == module and all(m is not f for f in found):
            found.append(m)

    add(sys.modules.get(module))
    for value in list(space.values()):
        if not isinstance(value, types.ModuleType):
            continue
        name = getattr(value, "__name__", "")
        if name == module:
            add(value)
        elif module.startswith(name + "."):
            sub = value
            for part in module[len(name) + 1:].split("."):
                sub = vars(sub).get(part) if isinstance(sub, types.ModuleType) else None
            add(sub)
    return found


@contextlib.contextmanager
def lesson_calls(fn, module: str, *names: str):
    """``with lesson_calls(fn, "ch6.serving", "attend") as called:`` の中で学習者の関数を呼ぶと、called に
    呼ばれた名前が入る（外側の呼び出しだけ。ライブラリの中からの呼び出しは数えない）。"""
    called: list[str] = []
    depth = [0]

    def spy(name, real):
        @functools.wraps(real)
        def wrapper(*args, **kwargs):
            if depth[0] == 0:
                called.append(name)
            depth[0] += 1
            try:
                return real(*args, **kwargs)
            finally:
                depth[0] -= 1
        return wrapper

    space = _globals_of(fn)
    patched = []  # (置き場所, 名前, 元の値)
    for m in _modules(module, space):
        for name in names:
            real = vars(m).get(name)
            if callable(real):
                patched.append((vars(m), name, real))
    for key, value in list(space.items()):
        if callable(value) and getattr(value, "__module__", None) == module and getattr(value, "__qualname__", None) in names:
            patched.append((space, key, value))
    try:
        for where, key, real in patched:
            where[key] = spy(real.__qualname__, real)
        yield called
    finally:
        for where, key, real in reversed(patched):
            where[key] = real
