"""6.2 pmap の演習チェック。

隠し入力はチェックのときに ``jax.device_count()`` から作ります（1〜8 のどのデバイス数でも動く）。
値は NumPy の参照と比べ、さらに「本当にデバイス間の集団通信を使っているか」を jaxpr
（psum / ppermute）で確かめます。ノートブックの定義（損失、学習率、軸の名前）の写しは持ちません。
6.2-2 は損失・学習率・軸の名前を引数で受け取るので、採点ではノートブックと違うものを渡します。
"""
from __future__ import annotations

# 演習ごとのモジュール（読み込むと @exercise で登録される）と、節で共有する道具（common）
from . import common, normalize_across_devices, ring_shift, sgd_step
from .normalize_across_devices import check_normalize
from .ring_shift import check_ring_shift
from .sgd_step import HIDDEN_AXIS, HIDDEN_LR, check_sgd_step

__all__ = ["HIDDEN_AXIS", "HIDDEN_LR", "check_normalize", "check_ring_shift", "check_sgd_step", "common",
           "normalize_across_devices", "ring_shift", "sgd_step"]
