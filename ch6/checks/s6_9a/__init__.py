"""6.9a（仕上げ: 論理軸の規則と学習）の演習チェック。

どのチェックも、ノートブックにない設定とメッシュの形（隠し入力）で学習者の関数を呼びます。
"""
from __future__ import annotations

# 演習ごとのモジュール（読み込むと @exercise で登録される）と、節で共有する道具（common）
from . import common, loss_test, rules_for_mesh  # noqa: F401
from .loss_test import check_losses_match  # noqa: F401
from .rules_for_mesh import check_make_rules  # noqa: F401
