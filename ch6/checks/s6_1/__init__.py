"""6.1 vmap の演習チェック。

どの演習も、1 サンプル用の関数（kernel、fn、pair_fn、loss_fn）を **引数で受け取り**、それを vmap で
バッチに広げる関数を書きます。チェックはノートブックの例とは別の関数（隠し関数）と、ノートブックにない形と
乱数で作った入力（隠し入力）で学習者の関数を呼びます。ですからノートブックの定義をここに写す必要はなく、
学習者の答えもノートブックの例の式を手で書き直したものでは通りません。

隠し関数は 1 サンプル分の形しか受け付けません。バッチがそのまま渡されたら（vmap を使わずに
ブロードキャストで書いた、vmap の段が足りない、in_axes が違う）、どの引数にどんな形が来たかを示して
不合格にします。Python のループは jaxpr の大きさ（バッチを変えても同じか）で見つけます。
"""
from __future__ import annotations

# 演習ごとのモジュール（読み込むと @exercise で登録される）と、節で共有する道具（common）
from . import (  # noqa: F401
    batched_distances,
    batchnorm_image,
    clipped_mean_grad,
    common,
    ensemble_sgd_step,
    rbf_features,
    time_major_apply,
)
from .batched_distances import check_batched_distances  # noqa: F401
from .batchnorm_image import EPS, check_batchnorm_image  # noqa: F401
from .clipped_mean_grad import check_clipped_mean_grad  # noqa: F401
from .ensemble_sgd_step import check_ensemble_sgd_step  # noqa: F401
from .rbf_features import check_rbf_features  # noqa: F401
from .time_major_apply import check_time_major  # noqa: F401
