"""6.6 複数プロセス（jax.distributed、プロセスのローカルなデータ）の演習チェック。

どのチェックも 1 プロセスのカーネルの中で動きます。プロセスの数・番号・ローカルデバイスの数・クラスタの構成は
隠し入力として引数で渡し（実際の複数プロセスは起動しない）、配列を作る演習はこのカーネルのデバイスで作った
2 次元のメッシュ（デバイスの並びを入れ替えたもの）で確かめます。

- 6.6-1 local_rows（local_rows.py）: グローバルなバッチのうち、プロセス p が読み込む行の範囲と、割り切れないときの ValueError。
- 6.6-2 initialize_kwargs（initialize_args.py）: クラスタの構成から jax.distributed.initialize の引数を作る。
- 6.6-3 global_batch（global_batch.py）: パディングとマスクを付け、make_array_from_process_local_data でグローバルなバッチを作る。
- 6.6-4 rows_to_load（rows_to_load.py）: シャーディングとデバイスの持ち主から、プロセスが読み込む行を求める。
"""
from __future__ import annotations

from .. import load_section

__all__ = load_section(__name__, globals())
