"""6.11a のチェックで共有するもの: 隠し乱数と、合成のトレース（``ch6.profile.read`` が読む Chrome トレースの dict）。"""
from __future__ import annotations

import numpy as np

from ... import profile
from ...checking import Fail, hidden_rng


def exercise_rng(tag: int) -> np.random.Generator:
    return hidden_rng(611_100 + tag)


def synthetic(ops, modules) -> profile.Profile:
    """TPU の形の合成のトレースを読んだ Profile。ops は (name, hlo_category, ts, dur, bytes, flops)（bytes か flops が
    None ならその引数を付けない）、modules は (ts, dur)。時刻はマイクロ秒。"""
    events = [{"ph": "M", "pid": 3, "name": "process_name", "args": {"name": "/device:TPU:0"}},
              {"ph": "M", "pid": 3, "tid": 2, "name": "thread_name", "args": {"name": "XLA Modules"}},
              {"ph": "M", "pid": 3, "tid": 3, "name": "thread_name", "args": {"name": "XLA Ops"}}]
    for ts, dur in modules:
        events.append({"ph": "X", "pid": 3, "tid": 2, "ts": float(ts), "dur": float(dur), "name": "jit_step(1)"})
    for name, category, ts, dur, nbytes, flops in ops:
        args = {"hlo_category": category, "long_name": f"%{name} = bf16[8] fusion()"}
        if nbytes is not None:
            args["bytes_accessed"] = str(int(nbytes))
        if flops is not None:
            args["model_flops"] = str(int(flops))
        events.append({"ph": "X", "pid": 3, "tid": 3, "ts": float(ts), "dur": float(dur), "name": name, "args": args})
    return profile.read({"traceEvents": events, "ch6": {"scenario": "hidden"}})


def sep(what: str) -> str:
    """文の主語のあとに続ける空白: 英数字で終わるなら 1 つ（「decode_bf16 で」）、日本語なら空けない。"""
    return " " if what[-1:].isascii() and what[-1:].isalnum() else ""


def pair_of_numbers(result, what: str, names: str) -> tuple[float, float]:
    """学習者が返した (数, 数) を float の組に（形が違えば、何が返ったかを言って不合格）。"""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise Fail(f"{what}は {names} の 2 つ組のはずが、{type(result).__name__} が返りました。")
    out = []
    for x in result:
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)) \
                and not (hasattr(x, "shape") and np.shape(x) == ()):
            raise Fail(f"{what}の {names} は数のはずが、{type(x).__name__} が入っていました。")
        value = float(x)
        if not np.isfinite(value):
            raise Fail(f"{what}に NaN か inf が入っていました。0 で割っていないか確かめてください。")
        out.append(value)
    return out[0], out[1]
