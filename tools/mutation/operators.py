"""変異の演算子: 登録（``@operator``、``OPERATORS``）、演算子が参照できること（``Context``）、``--operators`` の表
（registry.py）と、演算子そのもの（value_operators.py：値を壊す、means_operators.py：値を保って手段を変える）。
演算子を足すには、そのどちらかの同じ種類の演算子の後ろに ``@operator(節の型)`` をつけた関数を 1 つ書きます。"""
from __future__ import annotations

# 演算子を登録する（means_operators が value_operators を先に読み込む：値を壊す → 手段を変える の並び）
from . import means_operators  # noqa: F401
from .registry import OPERATORS, Context, Operator, operator, operator_table

__all__ = ["OPERATORS", "Context", "Operator", "operator", "operator_table"]
