"""コンパイル済み HLO に現れる集団通信（collective）を数える。

ノートブックでもチェックでも同じ関数を使います::

    from ch6.hlo import count_collectives
    count_collectives(jax.jit(f), x, w)   # -> {"all-gather": 1}
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Callable

# 同期版と非同期版（-start / -done の組）の両方を 1 回として数える
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
# 命令名（%all-gather.1 など）ではなく、命令の種類（= の右の all-gather( ）だけに当てる
_OP = re.compile(r"(?<![%\w.-])(" + "|".join(COLLECTIVES) + r")(-start)?\(")


def compiled_text(f: Callable, *args, **kwargs) -> str:
    """jit した f をコンパイルし、最適化後の HLO テキストを返す。"""
    import jax

    jitted = f if hasattr(f, "lower") else jax.jit(f)
    return jitted.lower(*args, **kwargs).compile().as_text()


def collectives_in(hlo_text: str) -> dict[str, int]:
    """HLO テキスト中の集団通信の数（種類ごと、名前順）。"""
    counts = Counter(m.group(1) for m in _OP.finditer(hlo_text))
    return {k: counts[k] for k in sorted(counts)}


def count_collectives(f: Callable, *args, **kwargs) -> dict[str, int]:
    """f をコンパイルして、HLO に現れる集団通信を種類ごとに数える。"""
    return collectives_in(compiled_text(f, *args, **kwargs))
