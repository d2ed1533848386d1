"""第 6 章ノートブックの補助パッケージ。

- ``ch6.check("6.1-1", answer)``: 演習のチェック（1 行の日本語で結果を表示）
- ``ch6.setup()``: 最初のセルで呼ぶ（模擬デバイスの数・表示の設定・JAX の版の確認と更新・デバイスの一覧）
- ``ch6.hlo``: コンパイル済み HLO に現れる集団通信を数える

``import ch6`` は JAX も NumPy も読み込みません（``tests/test_runtime.py`` が確かめます）。``ch6.setup()`` が
Colab・Kaggle で古い JAX を入れ直すのは、それらを読み込む前でないと効かないからです。そのため ``check`` などと
下位のモジュール（``ch6.show`` など）は、初めて使われたときに読み込みます。

学習者版（``make learner-edition`` が作る配布物）では、読み込んだときに :func:`ch6.edition.install` が、学習者の
コードから演習のチェック（参照の答え）を読み込めないようにします。完全版では何もしません。
"""
import importlib

from . import edition
from .env import setup, show_devices

edition.install()

__all__ = ["check", "run_check", "Result", "Status", "RESULTS", "MARKS", "registry", "load_errors", "setup",
           "show_devices"]
_FROM_CORE = ("check", "run_check", "Result", "Status", "RESULTS", "MARKS", "registry", "load_errors")


def __getattr__(name: str):
    if name in _FROM_CORE:
        value = getattr(importlib.import_module("._core", __name__), name)
    elif name.startswith("__"):
        raise AttributeError(name)
    else:  # ch6.show・ch6.meshes など
        try:
            value = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value
