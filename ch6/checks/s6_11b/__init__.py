"""6.11b 通信と計算を重ねる の演習チェック。

- 6.11b-1 allgather_matmul_two_way（two_way_matmul.py）: 双方向のリングの collective matmul。隠しの軸の名前と形で、
  1 次元と 2 次元のメッシュの値、jaxpr の ppermute の組（両方の向き、回数）と、コンパイルした HLO の集団通信を調べます。
- 6.11b-2 max_hidden_ways（hidden_ways.py）: 通信が行列積の裏に隠れる最大の並列数を、隠しのチップの行から。
- 6.11b-3 exposed_allreduce（bucket_exposure.py）: 大きさの違う葉をバケットにまとめ、逆伝播と重ねたときに見える通信の秒。

隠し入力はチェックのときに作ります（1〜8 のどのデバイス数でも動く）。
"""
from __future__ import annotations

from .. import load_section

__all__ = load_section(__name__, globals())
