"""6.10 生成するモデルを動かす（推論）の演習チェック。

- 6.10-1 ``max_batch``（max_batch.py）: 重みと KV キャッシュが HBM に収まる最大のバッチ（K と V、KV ヘッド、等号）。
- 6.10-2 ``decode_critical_batch``（critical_batch.py）: デコードの 1 ステップが計算律速になる最小のバッチ
  （KV キャッシュの読み込みを含む。なければ None）。
- 6.10-3 ``decode_attention_tp``（tp_attention.py）: KV キャッシュをヘッドで分割したデコードのアテンション。
  チェックは軸 ``"model"`` の 1 次元メッシュの ``jax.shard_map`` で包み、1 デバイスの値と比べ、jaxpr の psum と all_gather を数えます。
- 6.10-4 ``make_write_slot``（write_slot.py）: プロンプトの K/V をスロットに書く jit 済みの関数。値、譲渡、
  2 件目からコンパイルがないこと（``ch6.serving.compile_counter``）を確かめます。
- 6.10-5 ``quantize``（quantize.py）: 出力チャネルごとの対称な int8 の量子化。

隠し入力の乱数は ``common.exercise_rng``（610_000 + 番号）。
"""
from __future__ import annotations

from . import common, critical_batch, max_batch, quantize, tp_attention, write_slot  # import すると登録される
from .critical_batch import check_decode_critical_batch
from .max_batch import check_max_batch
from .quantize import check_quantize
from .tp_attention import check_decode_attention_tp
from .write_slot import check_make_write_slot

__all__ = [
    "check_max_batch", "check_decode_critical_batch", "check_decode_attention_tp", "check_make_write_slot",
    "check_quantize", "common", "critical_batch", "max_batch", "quantize", "tp_attention", "write_slot",
]
