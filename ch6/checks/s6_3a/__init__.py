"""6.3a jit + sharding（Auto / Explicit）の演習チェック。

メッシュと隠し入力はチェックのたびに jax.device_count() から作ります（デバイス 1〜8 個のどれでも動く）。
メッシュは ch6.meshes（ノートブックと同じ決め方: 2 次元は偶数なら (n/2, 2)、奇数なら (n, 1)）。
通信の有無はコンパイル済み HLO を ch6.hlo.count_collectives で数えて確かめ、「集団通信なし」などの
表記は ch6.show.collectives_line の 1 通りだけを使います。
デバイスが 1 個のとき（や軸の長さが 1 のとき）は通信がそもそも現れないので、シャーディングの指定
（PartitionSpec）から規則で判定し、その旨をメッセージに書きます。

学習者が返した値（PartitionSpec、配列、辞書）は、使う前に必ず確かめます。同じ軸を 2 度使う spec や、
渡したのとは別のメッシュに置かれた配列は、チェッカの内部エラーではなく不正解として説明します。

演習ごとに「必ず守ること」と「自由なこと」:

- 6.3a-1 place_tokens: tokens (B, T, D) のバッチ軸を data、系列軸を model で分け、特徴軸は分けない。
  mask (B, T) も同じ分け方。渡された mesh に置く。自由: device_put / reshard、NamedSharding / set_mesh + P、
  末尾の None の有無、タプルとリストのどちらで返すか。
- 6.3a-2 predict_collectives: 5 つのケースの通信の名前。自由: 大文字小文字、'_' と '-'、'none' / None / 'なし'。
- 6.3a-3 no_comm_specs: y = x @ w.T を、w を data で分けたまま通信なしで。自由: P かタプルか、末尾の None。
- 6.3a-4 attention_scores: 出力の型が P('data', None, None) で、通信は部分和の all-reduce だけ。
  自由: einsum か matmul / @ か（転置の書き方も）。
- 6.3a-5 shard_gated_mlp: 隠れ層の軸（長さ H）を持つ葉はどれも model で分け、b_down は複製、data は使わない。
  forward（:func:`ch6.models.gated_mlp`、ノートブックもこの定義を import する）の通信は all-reduce 1 回だけ。
  自由: device_put / reshard、辞書内包表記 / jax.tree.map。
"""
from __future__ import annotations

from .. import load_section

__all__ = load_section(__name__, globals())
