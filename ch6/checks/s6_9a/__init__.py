"""6.9a（仕上げ: 論理軸の規則と学習）の演習チェック。

どのチェックも、ノートブックにない設定とメッシュの形（隠し入力）で学習者の関数を呼びます。
"""
from __future__ import annotations

from .. import load_section

__all__ = load_section(__name__, globals())
