"""6.11a プロファイルを読む の演習チェック。

- 6.11a-1 ``furthest_below_roofline``（roofline_group.py）: 1 ステップの一定の割合以上を占める演算の種類のうち、
  ルーフラインの下限から最も遠いもの。記録したチップのトレース 2 つと、入れ子の while・バイトのない演算・
  割合の境目の種類を持つ合成のトレースと、条件に合う種類のない合成のトレース（答えは None）で確かめます。
- 6.11a-2 ``int8_project``（int8_project.py）: スケールを縮約の後に掛ける int8 の射影（``"bsd,fd->bsf"``）。
  値と、jaxpr の構造（重みの大きさの掛け算や float32 の重みがないこと）と、出力の dtype を確かめます。
- 6.11a-3 ``decode_gap``（decode_gap.py）: ストリーミングの記録から達成できる帯域を求め、デコードの下限と、
  デバイスの時間のうち下限で説明できない割合を返す。

隠し入力の乱数は ``common.exercise_rng``（611_100 + 番号）。
"""
from __future__ import annotations

from .. import load_section

__all__ = load_section(__name__, globals())
