"""変異の演算子の登録：``@operator`` で登録した演算子の並び（``OPERATORS``）、演算子が参照できること（``Context``）、
``--operators`` の表。演算子そのものは value_operators.py（値を壊す）と means_operators.py（値を保って手段を変える）。"""
from __future__ import annotations

import ast
import dataclasses
import inspect
from collections.abc import Callable, Iterable

# ---------------------------------------------------------------- 演算子の登録

@dataclasses.dataclass(frozen=True)
class Operator:
    """変異の演算子 1 つ: nodes の型の節を受け取り、(説明, 変える関数) を 0 個以上返す。"""

    name: str
    doc: str
    nodes: tuple[type, ...]
    make: Callable[[ast.AST, Context], Iterable[tuple[str, Callable]]]
    signature: bool = False  # 解答を持つ関数の def（解答ブロックの外）にも当てる（引数の既定値）


OPERATORS: list[Operator] = []


def operator(*nodes: type, signature: bool = False):
    """演算子を登録するデコレータ。関数の docstring の 1 行目が説明（``--operators`` の表）になる。"""
    def register(make):
        doc = inspect.getdoc(make) or ""
        if not doc.strip():
            raise ValueError(f"operator {make.__name__} needs a one-line docstring")
        OPERATORS.append(Operator(make.__name__, doc.splitlines()[0], nodes, make, signature))
        return make
    return register


@dataclasses.dataclass
class Context:
    """1 つのセルについて、演算子が参照できること。"""

    tree: ast.AST
    lines: range  # 解答ブロックの行
    axis_names: list[str]  # 解答ブロックの P("...") に書かれた軸の名前（最初のもの）
    has_ppermute: bool
    functions: dict[str, ast.FunctionDef]  # セルで定義された関数（名前 → 定義）
    lowered: set[int] = dataclasses.field(default_factory=set)  # .lower / .trace するだけの呼び出し（節の id）


def operator_table() -> str:
    """演算子の一覧（名前、当てる節の型、説明）。"""
    rows = []
    for op in OPERATORS:
        nodes = "/".join(t.__name__ for t in op.nodes) + ("+def" if op.signature else "")
        rows.append(f"{op.name:24s} {nodes:22s} {op.doc}")
    return "\n".join(rows)
