"""コンパイル済み HLO に現れる集団通信（collective）を数える。

ノートブックでもチェックでも同じ関数を使います::

    from ch6.hlo import count_collectives
    count_collectives(jax.jit(f), x, w)   # -> {"all-gather": 1}
    collective_report(jax.jit(f), x, w)   # -> [Collective(kind="all-gather", shapes=..., bytes=..., group_size=8)]
    op.traffic                            # リング方式の簡単なモデルで、1 台が送るバイト数
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

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


# ---------------------------------------------------------------- 通信量の見積もり
#
# HLO の各集団通信の行から、結果の形・型とグループの大きさ（何台で通信するか）を読み取り、
# リング方式の単純なモデルで「1 台が送るバイト数」を見積もります。
# 実際の実装（木、双方向リング、ハードウェアの集約など）はこれと違うことがあるので、
# 値は桁と比（どの通信が重いか）を見るためのものです。

import dataclasses  # noqa: E402
import math  # noqa: E402

_DTYPE_BYTES = {
    "pred": 1, "s8": 1, "u8": 1, "s4": 1, "u4": 1,
    "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
    "s32": 4, "u32": 4, "f32": 4,
    "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16,
}
_ARRAY = re.compile(r"\b([a-z]+\d*(?:e\d+m\d+\w*)?)\[([\d,]*)\]")
_GROUPS_LIST = re.compile(r"replica_groups=\{(\{[\d,]*\})")
_GROUPS_IOTA = re.compile(r"replica_groups=\[(\d+),(\d+)\]<=")
_GROUPS_MESH = re.compile(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}")
_PARTITIONS = re.compile(r"num_partitions=(\d+)")


def _dtype_bytes(dtype: str) -> int:
    if dtype in _DTYPE_BYTES:
        return _DTYPE_BYTES[dtype]
    if dtype.startswith("f8"):
        return 1
    raise ValueError(f"unknown HLO element type: {dtype}")


@dataclasses.dataclass(frozen=True)
class Collective:
    """HLO の集団通信 1 つ。bytes は 1 台あたりの結果（タプルなら合計）のバイト数。"""

    kind: str                     # "all-gather" など（-start は付けない）
    shapes: tuple[tuple[int, ...], ...]
    dtype: str
    bytes: int
    group_size: int | None        # 一緒に通信する台数（collective-permute は None）

    @property
    def traffic(self) -> float:
        """1 デバイスが送り出すバイト数（ネットワークの構成によらない量。時間は ``ch6.cost`` で見積もる）。

        n デバイスのグループで、all-gather・all-reduce・reduce-scatter はリングのアルゴリズムで送る量:
        all-gather は集めた結果 S の (n-1)/n、all-reduce は 2(n-1)/n·S、reduce-scatter は結果 R の (n-1) 倍。
        all-to-all はリングではなく、各デバイスが持つ配列の (n-1)/n を行き先ごとの塊にして送る量（トーラスで途中の
        チップが中継する分は含まない）。collective-permute は結果そのもの。
        """
        n, s = self.group_size, self.bytes
        if self.kind == "collective-permute":
            return float(s)
        if not n or n <= 1:
            return 0.0
        if self.kind == "all-reduce":
            return 2 * (n - 1) / n * s
        if self.kind == "reduce-scatter":
            return float((n - 1) * s)
        return (n - 1) / n * s  # all-gather, all-to-all


def _group_size(line: str, partitions: int | None) -> int | None:
    m = _GROUPS_LIST.search(line)
    if m:
        ids = [t for t in m.group(1).strip("{}").split(",") if t]
        return len(ids) if ids else partitions
    m = _GROUPS_IOTA.search(line)
    if m:
        return int(m.group(2))
    m = _GROUPS_MESH.search(line)
    if m:
        sizes = dict(re.findall(r"'([^']+)'=(\d+)", m.group(1)))
        used = re.findall(r"'([^']+)'", m.group(2))
        if used and all(a in sizes for a in used):
            return math.prod(int(sizes[a]) for a in used)
        return None
    if "replica_groups={}" in line:
        return partitions
    return None


def collective_ops(hlo_text: str) -> list[Collective]:
    """HLO テキスト中の集団通信を、現れる順に Collective のリストにする（-done は数えない）。"""
    m = _PARTITIONS.search(hlo_text)
    partitions = int(m.group(1)) if m else None
    ops = []
    for line in hlo_text.splitlines():
        hit = _OP.search(line)
        if not hit or " = " not in line[: hit.start()]:
            continue
        kind, start = hit.group(1), bool(hit.group(2))
        result_type = line[line.index(" = ") + 3: hit.start()]
        arrays = _ARRAY.findall(result_type)
        if start and kind in ("all-gather", "collective-permute", "all-to-all") and len(arrays) > 1:
            arrays = arrays[len(arrays) // 2:]  # (入力…, 結果…) の組から結果だけ
        if not arrays:
            continue
        shapes = tuple(tuple(int(d) for d in dims.split(",") if d) for _, dims in arrays)
        dtype = arrays[0][0]
        size = sum(math.prod(s) * _dtype_bytes(t) for s, (t, _) in zip(shapes, arrays))
        group = None if kind == "collective-permute" else _group_size(line, partitions)
        ops.append(Collective(kind, shapes, dtype, size, group))
    return ops


def collective_report(f: Callable, *args, **kwargs) -> list[Collective]:
    """f をコンパイルして、HLO の集団通信を Collective のリストで返す。"""
    return collective_ops(compiled_text(f, *args, **kwargs))


# ---------------------------------------------------------------- 量子化した重みを戻す場所
#
# int8 の重みを行列積の前に bf16 に戻す（dequantize）とき、コンパイラは戻す演算を行列積と同じ融合に入れる
# （HBM からは int8 を 1 回読むだけ）か、別の融合で bf16 の配列を作って HBM に書き、行列積がそれを読み直すかを選びます。
# 後者は、1 要素あたり int8 の 1 バイトを読み、bf16 の 2 バイトを書き、2 バイトを読み直します（計 5 バイト）。

_COMPUTATION = re.compile(r"^(?:ENTRY )?%([\w.\-]+) .*\{$")
_INSTR = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = (\S+?)\[([\d,]*)\]\S* (\w[\w\-]*)\((.*?)\)(?:, |$)(.*)$")
_CALLS = re.compile(r"calls=%([\w.\-]+)")


@dataclasses.dataclass(frozen=True)
class Dequantized:
    """行列積の外で、int8 の引数から作った浮動小数の配列（HBM に書かれる）。"""

    parameter: str   # ENTRY の引数の名前（重み）
    fusion: str      # それを作る融合の名前
    dtype: str       # 作った配列の型（bf16 など）
    elements: int    # 要素の数（引数と同じ）

    @property
    def extra_bytes(self) -> int:
        """融合で戻した場合より多く HBM とやり取りするバイト（書いて読み直す分）。"""
        return 2 * self.elements * _dtype_bytes(self.dtype)


def _computations(hlo_text: str) -> dict[str, list[str]]:
    comps, name, entry = {}, None, None
    for line in hlo_text.splitlines():
        m = _COMPUTATION.match(line)
        if m:
            name = m.group(1)
            comps[name] = []
            if line.startswith("ENTRY"):
                entry = name
        elif line.startswith("}"):
            name = None
        elif name is not None:
            comps[name].append(line)
    comps["__entry__"] = comps.get(entry, [])
    return comps


def _has_matmul(comps: dict[str, list[str]], name: str, seen: set | None = None) -> bool:
    seen = set() if seen is None else seen
    if name in seen:
        return False
    seen.add(name)
    for line in comps.get(name, []):
        m = _INSTR.match(line)
        if m and m.group(4) in ("dot", "convolution"):
            return True
        if any(_has_matmul(comps, c, seen) for c in _CALLS.findall(line)):
            return True
    return False


def dequantized_outside_matmul(hlo_text: str) -> list[Dequantized]:
    """最適化後の HLO（``compiled.as_text()``）で、int8 の引数を行列積のない融合が同じ要素数の浮動小数の配列に
    戻しているもの（戻した重みを HBM に書き、行列積が読み直す）。行列積と同じ融合で戻す重みは入りません。"""
    comps = _computations(hlo_text)
    params = {}
    for line in comps["__entry__"]:
        m = _INSTR.match(line)
        if m and m.group(2) == "s8" and m.group(4) == "parameter":
            params[m.group(1)] = math.prod(int(d) for d in m.group(3).split(",") if d)
    found = []
    for line in comps["__entry__"]:
        m = _INSTR.match(line)
        if not m or m.group(4) != "fusion" or m.group(2) not in ("bf16", "f16", "f32"):
            continue
        name, dtype, dims, _, operands, rest = m.groups()
        elements = math.prod(int(d) for d in dims.split(",") if d)
        calls = _CALLS.findall(rest)
        if any(_has_matmul(comps, c) for c in calls):
            continue
        for op in re.findall(r"%([\w.\-]+)", operands):
            if params.get(op) == elements:
                found.append(Dequantized(op, name, dtype, elements))
    return found
