"""6.7 ステップのコストとメモリの演習チェック。

どのチェックも、ノートブックにない形と数値で作った入力（隠し入力）で学習者の関数を呼びます。
6.7-1 と 6.7-5 のチップの行は ch6.hardware.Chip そのもの（実在しない数値）で、参照の答えは ch6.cost の関数から
求めます（式を書き直さない）。6.7-2〜6.7-4 は隠しのモデルをその場でコンパイルし、memory_analysis()・cost_analysis()・
jax.vjp の残差から参照を求めます。どのチェックもデバイスの数によらず動きます。

学習者が返した値は、使う前に形・型・数を確かめます（学習者の誤りを「チェッカ内部の問題」にしない）。
"""
from __future__ import annotations

from .. import load_section

__all__ = load_section(__name__, globals())
