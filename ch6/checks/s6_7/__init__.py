"""6.7 ステップの費用とメモリの演習チェック。

どのチェックも、ノートブックにない形と乱数で作った入力（隠し入力）で学習者の関数を呼びます。
隠しのプログラムはその場でコンパイルし、参照の数字は同じコンパイル結果の ``cost_analysis()``・
``memory_analysis()``・HLO の集団通信（ch6.hlo）から求めます。チップの行は実在しない数字です（表の値を書き込んだ答えは通らない）。
デバイスが関わるチェック（6.7-1）は ch6.meshes でデバイスの数からメッシュを作るので、1 から 8 のどのデバイス数でも動きます。

学習者が返した値は、使う前に形・型・数を確かめます（学習者の誤りを「チェッカー内部の問題」にしない）。
"""
from __future__ import annotations

# 演習ごとのモジュール（読み込むと @exercise で登録される）と、節で共有する道具（common）
from . import common, donation, grad_accum, layout_choice, microbatch_budget, step_time  # noqa: F401
from .donation import check_momentum_update  # noqa: F401
from .grad_accum import check_accumulated_value_and_grad  # noqa: F401
from .layout_choice import check_choose_layout, reference_layout  # noqa: F401
from .microbatch_budget import check_fewest_microbatches  # noqa: F401
from .step_time import check_estimate_step  # noqa: F401
