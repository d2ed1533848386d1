"""6.4 組み合わせパターンの演習チェック。

どのチェックも、ノートブックにない形と乱数で作った入力（隠し入力）で学習者の関数を呼びます。
参照は NumPy（6.4-1, 6.4-2, 6.4-4）か、1 デバイスで動かした同じ計算（6.4-3）です。
デバイスが関わるチェック（6.4-3, 6.4-4）は ch6.meshes でデバイスの数からメッシュを作るので、
1 から 8 のどのデバイス数でも動きます（2 のべき乗でなくてもよい）。

学習者が返した値は、使う前に形・型・順番を確かめます（学習者の誤りを「チェッカ内部の問題」にしない）。
"""
from __future__ import annotations

# 演習ごとのモジュール（読み込むと @exercise で登録される）と、節で共有する道具（common）
from . import batched_loss, clipped_mean_grad, common, dp_train_step, fsdp_shard  # noqa: F401
from .batched_loss import check_batched_loss  # noqa: F401
from .clipped_mean_grad import check_clipped_mean_grad  # noqa: F401
from .dp_train_step import check_dp_train_step  # noqa: F401
from .fsdp_shard import check_fsdp_shard, fsdp_axis  # noqa: F401
