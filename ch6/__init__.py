"""第 6 章ノートブックの補助パッケージ。

- ``ch6.check("6.1-1", answer)``: 演習のチェック（1 行の日本語で結果を表示）
- ``ch6.setup()``: 最初のセルで呼ぶ（模擬デバイスの数・表示の設定・JAX の版の確認・デバイスの一覧）
- ``ch6.hlo``: コンパイル済み HLO に現れる集団通信を数える
"""
from ._core import RESULTS, Result, Status, check, run_check
from .env import setup, show_devices

__all__ = ["check", "run_check", "Result", "Status", "RESULTS", "setup", "show_devices"]
