"""どのチェックも、学習者のどんな値にも「internal」（チェッカの不具合）を返さないこと。

関数でない値、None、間違った型、長さや順番の違うタプル、NaN、大きすぎる配列、同じ軸を 2 度使う
PartitionSpec、別のメッシュの配列、例外を出す関数、print する関数、トレーサを漏らす関数を、
登録されたすべてのチェックに渡します。結果は fail / error / not_done のどれかで、メッセージは
日本語の 1 行（パスもトレースバックも含まない）でなければなりません。
"""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import ch6

REGISTRY = ch6.registry()
IDS = sorted(REGISTRY, key=lambda e: [(0, int(x), "") if x.isdigit() else (1, 0, x) for x in re.findall(r"\d+|[a-z]+", e)])

_leaked = []


def _leaky(*args, **kwargs):
    """トレーサを外へ漏らし、漏れたトレーサを使う関数を返す。"""
    @jax.jit
    def inner(x):
        _leaked.append(x)
        return x

    inner(jnp.ones(3))
    return lambda *a, **k: _leaked[-1] + 1


def _other_mesh_array(*args, **kwargs):
    mesh = jax.make_mesh((1,), ("other",), devices=jax.devices()[-1:])
    return jax.device_put(jnp.ones((4, 4)), NamedSharding(mesh, P("other", None)))


def _raises(*args, **kwargs):
    raise ValueError("わざと失敗")


def _prints(*args, **kwargs):
    print("デバッグ出力")
    return None


HOSTILE = {
    "array-not-function": jnp.ones(3),
    "none": None,
    "int": 42,
    "string": "psum",
    "returns-none": lambda *a, **k: None,
    "returns-string": lambda *a, **k: "zz",
    "returns-int": lambda *a, **k: 7,
    "returns-3-tuple": lambda *a, **k: (1, 2, 3),
    "returns-reversed-args": lambda *a, **k: tuple(reversed(a)) if len(a) > 1 else a,
    "returns-list-of-args": lambda *a, **k: list(a),
    "returns-nan": lambda *a, **k: jnp.full((3, 3), jnp.nan),
    "returns-huge": lambda *a, **k: jnp.zeros((2048, 2048)),
    "returns-dup-axis-spec": lambda *a, **k: P("data", "data"),
    "returns-spec-tuple-with-dup": lambda *a, **k: (P("data", "data"), P(), P()),
    "returns-dict-of-none": lambda *a, **k: {"A": None},
    "returns-other-mesh-array": _other_mesh_array,
    "raises": _raises,
    "prints": _prints,
    "leaks-tracer": _leaky,
    "returns-function": lambda *a, **k: (lambda *b: 0),
}

_PATH = re.compile(r"(/(home|root|work|usr|tmp|Users)/|site-packages|Traceback|File \")")
_ENGLISH_RUN = re.compile(r"(?:\b[A-Za-z]{2,}\b[ ,]+){4,}\b[A-Za-z]{2,}\b")
_JA = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


@pytest.mark.parametrize("value", list(HOSTILE), ids=list(HOSTILE))
@pytest.mark.parametrize("exercise", IDS)
def test_hostile_value_is_never_internal(exercise, value, capsys):
    result = ch6.run_check(exercise, HOSTILE[value])
    assert result.status in ("fail", "error", "not_done"), f"{exercise} {value}: {result.status}: {result.message}"
    assert_good_message(result.message, f"{exercise} {value}")


def assert_good_message(msg: str, where: str = "") -> None:
    """1 行、パスもトレースバックもなし、主に日本語（「」で引用した JAX の原文は数えない）、重ね言葉なし。"""
    assert "\n" not in msg, f"{where}: message is not one line: {msg!r}"
    assert not _PATH.search(msg), f"{where}: path or traceback in the message: {msg}"
    own = re.sub(r"「[^」]*」", "", msg)  # 引用した原文を除いた、私たちの言葉
    ja = len(_JA.findall(own))
    english = _ENGLISH_RUN.search(own)  # 訳していない英語の文（5 語以上の連なり）
    assert ja >= 8 and not english, f"{where}: not mostly Japanese ({english and english.group(0)!r}): {msg}"
    for doubled in ("値の値", "のの", "をを", "がが", "はは", "にに", "でで"):
        assert doubled not in msg, f"{where}: doubled word {doubled!r}: {msg}"
