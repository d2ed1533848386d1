"""実際のオブジェクト（メッシュ、シャーディングされた配列、集団通信の前後の値）から図を描く。

どの関数も :class:`Drawing` を返します。ノートブックのセルの最後に置くと PNG で表示され、
``.texts`` で図の中の文字（デバイス番号、仕様、ラベル）を確かめられます（テストが使う）。
日本語のラベルは matplotlib-fontja の IPAex ゴシック（パッケージに同梱、システムのフォント不要）で描きます。
PNG は小さく（数十 KB）、同じ入力なら同じバイト列になります（作成ソフトの版などのメタデータを入れない）。

- :func:`mesh`: メッシュ → デバイス番号の格子と軸の名前（複数プロセスならプロセスごとに色分け）
- :func:`sharding`: シャーディングされた配列 → どのデバイスがどのブロックを持つか（``addressable_shards`` から）
- :func:`device_values`: 集団通信の前と後の「デバイスごとの値」の表
- :func:`ring_steps`: リングの各ステップで、どのデバイスがどのブロックを持っているか
- :func:`timeline`: 処理の段階（集める → 計算 → 配る …）の帯
- :func:`process_grid`: 各プロセスが報告した値から、プロセス → デバイス → グローバルメッシュ（と配列の行）
- :func:`roofline`・:func:`step_times`・:func:`memory_bars`・:func:`decision`: コストとメモリ（6.7 節、cost.py）
- :func:`ring_attention_steps`・:func:`expert_load`・:func:`dropped_vs_capacity`: コンテキスト並列とエキスパート並列（6.8b 節、sequence.py）
- :func:`pipeline_schedule`・:func:`bubble_fractions`: パイプラインのスケジュール表とバブルの割合（6.8a 節、pipeline.py）
- :func:`ring_schedule`・:func:`overlap_timeline`: collective matmul のリングで届いたシャードの表と、重ねたときと重ねないときの時間の帯（6.11b 節、overlap.py）
- :func:`slot_occupancy`: 連続バッチ処理のスロットの占有（6.10 節、serving.py）
- :func:`op_timeline`・:func:`category_bars`: プロファイルの演算の時間軸と、分類ごとの時間（6.11a 節、profile.py）
- :func:`loss_curves`: 損失の曲線を重ね、基準との差が許容誤差の中にあることを副題に書く（6.9 節、capstone.py）
- :func:`ink`: 塗りの色に読みやすい文字の色（明るい色には濃い文字）
- :func:`flowchart`: 節（問い・選ぶもの …）と矢印の表から、判断の流れ図
"""
from __future__ import annotations

from ._base import DPI, Drawing, color, ink
from .arrays import mesh, process_grid, shard_layout, sharding, shardings
from .capstone import loss_curves
from .cost import decision, memory_bars, roofline, step_times
from .diagrams import flowchart, timeline, vmap_axes
from .overlap import overlap_timeline, ring_schedule
from .pipeline import bubble_fractions, pipeline_schedule
from .profile import category_bars, op_timeline
from .sequence import dropped_vs_capacity, expert_load, ring_attention_steps
from .serving import slot_occupancy
from .values import device_stages, device_values, device_values_from, ring_steps

__all__ = ["DPI", "Drawing", "color", "ink", "mesh", "shard_layout", "sharding", "shardings", "process_grid",
           "device_values", "device_values_from", "device_stages", "ring_steps", "timeline", "vmap_axes", "flowchart",
           "ring_attention_steps", "expert_load", "dropped_vs_capacity",
           "roofline", "step_times", "memory_bars", "decision",
           "pipeline_schedule", "bubble_fractions", "loss_curves", "slot_occupancy", "op_timeline", "category_bars",
           "ring_schedule", "overlap_timeline"]
