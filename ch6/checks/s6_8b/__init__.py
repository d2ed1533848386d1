"""6.8b 系列並列と専門家並列の演習チェック。

- 6.8b-1 ``ring_step``（ring_step.py）: 学習者は shard_map の中で動く 1 デバイス分の関数を書きます。
  チェックはそれを軸 ``"seq"`` の 1 次元メッシュ（デバイスの数から作る）の ``jax.shard_map`` + ``jax.jit`` で包み、
  前のステップの続きの状態（有限の最大値）から 1 ステップ進めて NumPy の参照と比べ、jaxpr の ``ppermute`` の組を調べます。
- 6.8b-2 ``causal_block_mask``（causal_mask.py）: 大きさの違うブロックの組の因果マスク。``jax.jit`` の中で、
  トレースされたブロック番号で呼びます。
- 6.8b-3 ``dropped_choices``（moe_capacity.py）: top-2 のルーターの選択から、容量を超えて落ちる選択。
- 6.8b-4 ``ulysses_attention``（ulysses.py）: 並びが (ヘッド, 系列, 次元) の all-to-all 方式。値を 1 デバイスの
  アテンションと比べ、jaxpr の ``all_to_all`` の ``split_axis`` / ``concat_axis`` / ``tiled`` を調べます。

どのチェックも、ノートブックにない形と乱数（隠し入力）を使い、よくある誤りはそれぞれの言葉で知らせます。
"""
from __future__ import annotations

from . import causal_mask, common, moe_capacity, ring_step, ulysses  # import するとそれぞれの演習が登録される
from .causal_mask import check_causal_block_mask
from .moe_capacity import check_dropped_choices
from .ring_step import check_ring_step
from .ulysses import check_ulysses_attention

__all__ = [
    "check_ring_step", "check_causal_block_mask", "check_dropped_choices", "check_ulysses_attention",
    "causal_mask", "common", "moe_capacity", "ring_step", "ulysses",
]
