"""チェックのミューテーションテスト（コマンドの入口は tools/mutate.py。公開名はそこからも import できます）。

1 つのモジュールに 1 つの仕事:

- ``ast_edits``: 節を調べる・変える小道具（演算子が使う）
- ``operators``: 変異の演算子の入口（``@operator``、``OPERATORS``、``Context``、``--operators`` の表）。登録は ``registry``、
  演算子は ``value_operators``（値を壊す）と ``means_operators``（値を保って手段を変える）
- ``mutants``: セルの解答ブロックから変異体を作る（``mutants``、``mutants_by_operator``）
- ``runtime``: 同じ値を別の手段で作る関数（値を保つ演算子の置き換え先、``RUNTIME``）
- ``run``: 変異体をチェックに通す（このプロセスで ``run_notebook``、少ないデバイスでは子プロセスで ``run_at_counts``）
- ``table``: 等価変異体の表 tools/mutants_equivalent.txt を読む（``load_equivalent``、``load_few``、
  ``load_equivalent_at_fewer``）
- ``report``: スコアと表（``score``、``report``、``weak_exercises``、``too_few``、``fewer_devices_report`` …）
"""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
