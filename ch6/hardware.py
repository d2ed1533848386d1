"""公表されているアクセラレータの性能の表（6.7 節の見積もりに使う定数）。

どの行も、公表した文書の名前と URL を持ちます。値は 1 チップ（GPU は 1 枚）あたりで、

- ``flops``: bf16 の行列積の最大性能（FLOP/s）。NVIDIA の表は疎性（sparsity）ありの値を大きく載せるので、
  ここではその半分の密な（dense）値を使います。
- ``hbm_bw``: HBM（チップの主メモリ）の帯域（バイト/秒）
- ``link_bw``: チップ間の通信の帯域（バイト/秒）。TPU は ICI（文書の Gbps を 8 で割った値）、
  NVIDIA は NVLink（両方向の合計）です。片方向か両方向か、リンクを何本数えるかは文書ごとにそろっていないので、
  ここでの見積もりは桁と比（どちらが重いか）を見るためのものです。
- ``hbm_bytes``: HBM の容量（バイト）

使い方::

    from ch6.hardware import CHIPS, chip
    v5e = chip("TPU v5e")
    v5e.flops / v5e.hbm_bw      # リッジポイント（FLOP/バイト）
"""
from __future__ import annotations

from typing import NamedTuple

GB = 10**9
TERA = 10**12


class Chip(NamedTuple):
    name: str
    flops: float      # bf16 の最大性能（FLOP/s、密な値）
    hbm_bw: float     # HBM の帯域（バイト/秒）
    link_bw: float    # チップ間の帯域（バイト/秒）
    hbm_bytes: float  # HBM の容量（バイト）
    source: str       # 公表した文書
    url: str

    @property
    def ridge(self) -> float:
        """リッジポイント: これより演算強度（FLOP/バイト）が低い計算はメモリ帯域で決まる。"""
        return self.flops / self.hbm_bw


CHIPS: tuple[Chip, ...] = (
    Chip("TPU v5e", 197 * TERA, 819 * GB, 1600 / 8 * GB, 16 * GB,
         "Google Cloud TPU documentation: TPU v5e", "https://cloud.google.com/tpu/docs/v5e"),
    Chip("TPU v6e", 918 * TERA, 1640 * GB, 3584 / 8 * GB, 32 * GB,
         "Google Cloud TPU documentation: TPU v6e", "https://cloud.google.com/tpu/docs/v6e"),
    Chip("TPU v5p", 459 * TERA, 2765 * GB, 4800 / 8 * GB, 95 * GB,
         "Google Cloud TPU documentation: TPU v5p", "https://cloud.google.com/tpu/docs/v5p"),
    Chip("H100 SXM", 989 * TERA, 3350 * GB, 900 * GB, 80 * GB,
         "NVIDIA H100 Tensor Core GPU (data sheet)", "https://www.nvidia.com/en-us/data-center/h100/"),
    Chip("H200 SXM", 989 * TERA, 4800 * GB, 900 * GB, 141 * GB,
         "NVIDIA H200 Tensor Core GPU (data sheet)", "https://www.nvidia.com/en-us/data-center/h200/"),
    Chip("B200 (HGX)", 2250 * TERA, 8000 * GB, 1800 * GB, 180 * GB,
         "NVIDIA HGX Platform (HGX B200 specifications)", "https://www.nvidia.com/en-us/data-center/hgx/"),
)


def chip(name: str) -> Chip:
    """名前で表の行を取り出す（例: chip("TPU v5e")）。"""
    for c in CHIPS:
        if c.name == name:
            return c
    raise KeyError(f"{name!r} is not in ch6.hardware.CHIPS: {[c.name for c in CHIPS]}")
