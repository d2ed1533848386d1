"""6.8a パイプライン並列の演習チェック。

- 6.8a-1 circular_tick（circular_pipeline.py）: インターリーブのパイプラインの 1 ティック。隠しの軸の名前・周の数・幅で
  チェック自身の scan を 1 次元と 2 次元のメッシュで回し、jaxpr の ppermute の組と、最後の周の出力を調べます。
- 6.8a-2 peak_activations（stored_activations.py）: スケジュールの表から、ステージごとに持っておく活性値の数の最大。
- 6.8a-3 microbatches_for_bubble（bubble_microbatches.py）: バブルの割合を目標以下にする最小のマイクロバッチの数。

隠し入力はチェックのときにデバイスの数から作ります（1〜8 のどのデバイス数でも動く）。
"""
from __future__ import annotations

from .. import load_section

__all__ = load_section(__name__, globals())
