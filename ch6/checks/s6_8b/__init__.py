"""6.8b コンテキスト並列とエキスパート並列の演習チェック。

- 6.8b-1 ``attention_comm_times``（comm_times.py）: リング（同じ向きの ppermute）と Ulysses（all-to-all 4 回）の
  通信の秒を、隠しのチップの行（トーラスとスイッチ）から ``ch6.cost`` で求める。
- 6.8b-2 ``choose_sequence_parallel``（sequence_choice.py）: 計算と重なるか（リングは max、Ulysses は和）で方式を選ぶ。
  同点（相対 1e-9）と n = 1 は "ring"。
- 6.8b-3 ``dropped_choices``（moe_capacity.py）: top-2 のルータの選択から、容量を超えてドロップされる選択。
- 6.8b-4 ``ulysses_attention``（ulysses.py）: 並びが (ヘッド, 系列, 次元) の all-to-all 方式。1 次元と 2 次元の
  メッシュで、値を 1 デバイスのアテンションと比べ、jaxpr の ``all_to_all`` の軸を調べます。

どのチェックも、ノートブックにない形と乱数（隠し入力）を使い、よくある誤りはそれぞれの言葉で知らせます。
"""
from __future__ import annotations

from .. import load_section

__all__ = load_section(__name__, globals())
