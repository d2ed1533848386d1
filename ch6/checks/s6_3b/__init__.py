"""6.3b shard_map と集団通信の演習チェック。

たいていの演習では、学習者は「1 つのデバイスが実行する関数」を書きます。チェックはそれを
``jax.shard_map``（メッシュの軸名は ``"x"``）で包み、``jax.jit`` して、その場で作る隠し入力
（デバイス数から決めた形と、ノートブックにない乱数）で呼びます。shard_map の呼び出しまで学習者が書く演習
（``megatron_mlp``）では、チェックはメッシュを渡します。

値を NumPy の参照と比べたあと、「作り方」を 2 通りで確かめます。

- jaxpr のプリミティブ: 意図した集団通信（psum / ppermute / reduce_scatter …）を使い、
  使ってはいけないもの（たとえば all_gather）を使っていないか。デバイス数によらず同じ結果になります。
  同じ演算の別名（check_vma のもとでの ``psum_invariant`` など）は同じものとして数えます。
- コンパイル済み HLO（``ch6.hlo.count_collectives``）: 2 デバイス以上のときだけ、all-gather などが
  こっそり入っていないか。1 デバイスでは XLA が通信を省くことがあるので見ません。

各問題で「必ず守ること」と「自由なこと」は、演習ノートブックの問題文に書いてあるとおりです
（書いてある制約はすべてここで確かめ、書いていないことは確かめません）。
"""
from __future__ import annotations

from .. import load_section

__all__ = load_section(__name__, globals())
