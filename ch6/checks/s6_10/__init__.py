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

from .. import load_section

__all__ = load_section(__name__, globals())
