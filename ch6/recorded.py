"""記録した期待値: 学習者版のチェックが、参照の実装の代わりに、先生の版で記録した値を引くための印。

チェックの参照の実装（隠し入力での正しい値、誤りの形の値を計算する関数）に ``@recorded`` を付けます。

- **完全版**（このリポジトリ、Colab が入れるパッケージ）: 何も変わりません。関数をそのまま呼びます。
  :func:`recording` の中では、呼ばれた引数と戻り値を記録します。
- **学習者版**（``tools/learner_edition.py`` が作る wheel）: 作るときに、印の付いた関数の本体を消します
  （ソースに参照の答えが残らないように）。代わりに、作るときに完全版で記録した値（``ch6/recorded.json``）を、
  引数の要約（:func:`digest`）で引きます。

ですから、印の付いた関数は隠し入力と定数だけから呼ばれる必要があります（学習者の戻り値から作った引数では、
記録にない値になります）。チェックは、学習者を呼ぶ前に参照の値をすべて計算しておきます。そうすれば、作るときに
チェックを 1 回（答えにならない関数で）動かすだけで、誤りの形の値も含めてすべてが記録されます。
記録にない引数で呼ばれたときは :class:`NotRecorded` です（学習者の誤りではないので、チェックの内部の誤りになります）。
"""
from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import inspect
import json
from collections.abc import Callable
from pathlib import Path

from . import edition

__all__ = ["recorded", "recording", "is_recording", "digest", "encode", "decode", "NotRecorded", "RECORDS", "MARKED",
           "RECORDED_DEVICES", "input_devices"]

RECORDED_DEVICES = 8  # 記録するデバイスの数は 1..8（tools/recorded_expectations.py）
RECORDS = Path(__file__).with_name("recorded.json")  # 学習者版の wheel だけにある
MARKED: dict[str, str] = {}  # 印の付いた関数の名前 → モジュール名
_recording: dict | None = None
_table: dict | None = None


class NotRecorded(LookupError):
    """学習者版で、記録にない引数で参照の値を求めた（チェックの誤り）。"""


def _canon(x):
    """引数を、どのマシンでも同じ JSON にできる形に（配列はバイト列の要約、浮動小数は repr）。"""
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, int):
        return ["int", str(x)]
    if isinstance(x, float):
        return ["float", repr(x)]
    if isinstance(x, (list, tuple)):
        return [type(x).__name__, [_canon(v) for v in x]]
    if isinstance(x, dict):
        return ["dict", sorted([str(k), _canon(v)] for k, v in x.items())]
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        fields = [getattr(x, f.name) for f in dataclasses.fields(x)]
        if not any(hasattr(v, "dtype") for v in fields):  # 数と文字列の欄だけ（Config、Chip、Profile）: repr で速く
            return [type(x).__name__, hashlib.sha256(repr(x).encode()).hexdigest()]
        return [type(x).__name__, [_canon(v) for v in fields]]
    if hasattr(x, "axis_names") and hasattr(x, "axis_sizes"):  # メッシュ: 形と軸の名前と、デバイスの並び
        try:
            ids = [int(d.id) for d in x.devices.flat]
        except (AttributeError, TypeError, ValueError):  # AbstractMesh（デバイスを持たない）
            ids = None
        return ["mesh", list(x.axis_names), [int(s) for s in x.axis_sizes], ids]
    if hasattr(x, "mesh") and hasattr(x, "spec"):  # NamedSharding
        return ["sharding", _canon(x.mesh), str(x.spec)]
    if hasattr(x, "dtype") and hasattr(x, "shape"):
        import numpy as np

        a = np.ascontiguousarray(np.asarray(x))
        return ["array", str(a.dtype), list(a.shape), hashlib.sha256(a.tobytes()).hexdigest()]
    if hasattr(x, "item") and callable(x.item):  # NumPy のスカラー
        return _canon(x.item())
    if callable(x) and hasattr(x, "__qualname__"):  # 誤りの形を選ぶ関数（math.floor、round）: 名前で
        return ["function", f"{getattr(x, '__module__', '')}.{x.__qualname__}"]
    raise TypeError(f"記録の要約にできない引数です: {type(x).__name__}")


def input_devices() -> int:
    """記録を引くチェックが隠し入力を作るときのデバイスの数: 今の数、ただし :data:`RECORDED_DEVICES` まで。

    9 個以上では先頭の 8 個分の隠し入力にします（記録は 1..8 個にしかありません）。どちらの版も同じ数を使うので、
    判定はそろいます。"""
    import jax

    return min(jax.device_count(), RECORDED_DEVICES)


def digest(args: tuple, kwargs: dict) -> str:
    """引数の要約（16 進 24 桁）。"""
    text = json.dumps([_canon(list(args)), _canon(dict(kwargs))], ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def encode(v):
    """戻り値を JSON に（タプルと配列は型を保つ）。"""
    if v is None or isinstance(v, (bool, str, int, float)):
        return v
    if isinstance(v, tuple):
        return {"tuple": [encode(e) for e in v]}
    if isinstance(v, list):
        return [encode(e) for e in v]
    if isinstance(v, dict):
        return {"dict": [[k, encode(e)] for k, e in v.items()]}
    if hasattr(v, "dtype") and hasattr(v, "shape"):
        import numpy as np

        a = np.ascontiguousarray(np.asarray(v))
        if a.shape == () and type(v).__module__ == "numpy":
            return {"scalar": str(a.dtype), "data": base64.b64encode(a.tobytes()).decode()}
        return {"array": str(a.dtype), "shape": list(a.shape), "data": base64.b64encode(a.tobytes()).decode()}
    raise TypeError(f"記録できない戻り値です: {type(v).__name__}")


def decode(v):
    if isinstance(v, list):
        return [decode(e) for e in v]
    if not isinstance(v, dict):
        return v
    if "tuple" in v:
        return tuple(decode(e) for e in v["tuple"])
    if "dict" in v:
        return {k: decode(e) for k, e in v["dict"]}
    import numpy as np

    if "scalar" in v:
        return np.frombuffer(base64.b64decode(v["data"]), dtype=v["scalar"])[0]
    return np.frombuffer(base64.b64decode(v["data"]), dtype=v["array"]).reshape(v["shape"]).copy()


def _lookup(name: str, key: str):
    global _table
    if _table is None:
        _table = json.loads(RECORDS.read_text(encoding="utf-8")) if RECORDS.is_file() else {}
    try:
        return decode(_table[name][key])
    except KeyError:
        raise NotRecorded(f"{name}: 記録にない引数です（{key}）") from None


def recorded(fn: Callable) -> Callable:
    """参照の実装の印。完全版ではそのまま呼び（記録中なら記録し）、学習者版では記録した値を引く。"""
    name = f"{fn.__module__}.{fn.__qualname__}"
    MARKED[name] = fn.__module__
    signature = inspect.signature(fn)

    def key(args, kwargs) -> str:  # f(a, kind="") と f(a) は同じ要約（既定値を埋めてから要約する）
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return digest(bound.args, bound.kwargs)

    if edition.is_learner():
        @functools.wraps(fn)
        def lookup(*args, **kwargs):
            return _lookup(name, key(args, kwargs))
        return lookup

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        if _recording is not None:
            _recording.setdefault(name, {})[key(args, kwargs)] = encode(out)
        return out
    return wrapper


def is_recording() -> bool:
    """:func:`recording` の中か。学習者の答えによって呼ぶ参照が変わるチェックは、記録の間だけ、どの答えでも
    使いうる参照の値をすべて求めます（完全版のふだんの採点は、今までどおり要るものだけを求めます）。"""
    return _recording is not None


class recording:
    """``with recording() as table:`` の間に印の付いた関数が返した値を table（名前 → 要約 → 値）に集める。"""

    def __enter__(self) -> dict:
        global _recording
        self._before, _recording = _recording, {} if _recording is None else _recording
        return _recording

    def __exit__(self, *exc) -> None:
        global _recording
        _recording = self._before
