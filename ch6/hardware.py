"""公表されているアクセラレータの性能の表（6.7 節からのコストの見積もりに使う定数）。

どの行も 1 チップ（GPU は 1 枚）あたりの値で、出典（文書の名前と URL）を持ちます。通信の帯域は、あいまいな
1 つの数ではなく、ハードウェアの量として書きます。式が割る帯域は、その量から導いた性質（property）です。

TPU の行
    ``ici_link_oneway``
        ICI（チップ間の相互接続）のリンク 1 本の片方向の帯域（バイト/秒）。
    ``torus_axes``
        トーラスの軸の数（v5e と v6e は 2 次元、v5p は 3 次元）。各軸で、チップは両隣へのリンクを 1 本ずつ持つ。
    ``dcn_bw_per_host`` と ``chips_per_host``
        データセンターのネットワーク（DCN）の、ホスト 1 台あたりの帯域（バイト/秒）と、1 ホストのチップの数。
        Cloud TPU の文書のホストの NIC（v5e は 100 Gbps × 2、v6e は 200 Gbps × 4）、または 1 チップあたりの
        DCN（v5p は 50 Gbps）から出した値で、ブック第 2 章の 1 チップあたりの値（v5e 3.125e9、v5p 6.25e9、
        v6e 1.25e10 バイト/秒）と一致します。
GPU の行
    ``nvlink_oneway``
        NVLink で 1 枚の GPU が外へ出せる片方向の帯域（バイト/秒）。データシートの NVLink の値は両方向の合計なので、
        その半分。
    ``nvlink_domain``
        NVLink（NVSwitch）で全対全につながる GPU の数（HGX は 8）。
    ``ib_bw``
        NVLink ドメインの外（InfiniBand）へ、1 枚の GPU が出せる片方向の帯域。

導いた量（式はこれで割る）
    ``ridge``
        flops / hbm_bw。リッジポイント（FLOP/バイト）。
    ``axis_bw``
        メッシュの 1 つの軸に沿ったリングの集団通信で、1 チップが 1 秒に送れるバイト。TPU は軸のリングが
        巻き戻る（wraparound）とき両方向を同時に使えるので、片方向の 2 倍（スケーリングブックの「bidirectional
        W_ici」）。GPU はノードの中のリングで、NVLink の片方向の出口の帯域（ブックの GPU の章の W）。
    ``all_axes_bw``
        TPU はすべてのトーラスの軸を同時に使うときの合計（軸の数 × axis_bw）。GPU は NVLink ドメインの中で
        axis_bw と同じ（軸がいくつあっても出口は 1 つ）。
    ``scaleout_bw``
        チップ間の相互接続の外の帯域（1 チップあたり）。TPU は DCN（ホストの帯域 ÷ ホストのチップ数）、
        GPU は InfiniBand。
    ``link_oneway``
        1 本のリンクの片方向（TPU は ICI のリンク、GPU は NVLink の出口）。一方向の ``ppermute`` が使う帯域。

値の選び方
    ``flops``（bf16 の密な行列積の最大性能）、``hbm_bw``、``hbm_bytes`` は各社のデータシートの値です。NVIDIA の表は
    疎性（sparsity）ありの値を大きく載せるので、その半分の密な値を使います。

    TPU の ICI は、Cloud TPU の文書がチップあたりの両方向の合計（v5e 400 GB/s、v6e 800 GB/s、v5p 1200 GB/s）と
    ICI のポートの数（v5e と v6e は 4、v5p は 6）を載せています。そこから出るリンク 1 本の片方向の値は
    v5e 50 GB/s、v6e と v5p 100 GB/s です。
    講座の行は、スケーリングブック（"How to Scale Your Model", jax-ml/scaling-book、第 2 章
    "How to Think About TPUs"）の表の値（その約 0.9 倍）を使います。ブックの数値例はすべてこの値から出ているので、
    同じ値なら講座の関数でブックの数値を再現できます。どちらを使っても桁と結論は変わりません（各行のコメントを参照）。
    以前の文書はチップあたりの合計を Gbps で 1 つだけ載せていました（v5e 1600、v6e 3584、v5p 4800）。

使い方::

    from ch6.hardware import CHIPS, chip
    v5p = chip("TPU v5p")
    v5p.ridge                 # リッジポイント（FLOP/バイト）
    v5p.flops / v5p.axis_bw   # データ並列のしきい値（1 チップのトークン数、ブックの式。ch6.cost を参照）
    book_chip("TPU v5e").ridge  # ブックが数値例に使った入力の行（240）。データシートの行は 241
"""
from __future__ import annotations

from dataclasses import dataclass, replace

GB = 10**9
TERA = 10**12

SCALING_BOOK = "How to Scale Your Model (jax-ml/scaling-book)"
SCALING_BOOK_URL = "https://jax-ml.github.io/scaling-book/"
BOOK_TPUS = ("How to Scale Your Model, 第 2 章 How to Think About TPUs",
             "https://jax-ml.github.io/scaling-book/tpus/")
BOOK_GPUS = ("How to Scale Your Model, How to Think About GPUs",
             "https://jax-ml.github.io/scaling-book/gpus/")


@dataclass(frozen=True, kw_only=True)
class Chip:
    """アクセラレータ 1 チップ（GPU は 1 枚）の行。TPU か GPU かで、通信の欄のどちらかを埋めます。"""

    name: str
    kind: str          # "TPU" または "GPU"
    flops: float       # bf16 の密な行列積の最大性能（FLOP/s）
    hbm_bw: float      # HBM の帯域（バイト/秒）
    hbm_bytes: float   # HBM の容量（バイト）
    source: str        # flops・hbm_bw・hbm_bytes の出典（データシート）
    url: str
    link_source: str   # 通信の欄の出典
    link_url: str
    # TPU
    ici_link_oneway: float | None = None  # ICI のリンク 1 本の片方向（バイト/秒）
    torus_axes: int | None = None         # トーラスの軸の数
    dcn_bw_per_host: float | None = None  # DCN のホストあたりの帯域（バイト/秒）
    chips_per_host: int | None = None     # 1 ホストのチップの数
    # GPU
    nvlink_oneway: float | None = None    # NVLink の片方向の出口の帯域（バイト/秒、1 枚あたり）
    nvlink_domain: int | None = None      # NVLink で全対全につながる GPU の数
    ib_bw: float | None = None            # InfiniBand の片方向の帯域（バイト/秒、1 枚あたり）

    def __post_init__(self) -> None:
        if self.kind == "TPU":
            need = ("ici_link_oneway", "torus_axes", "dcn_bw_per_host", "chips_per_host")
        elif self.kind == "GPU":
            need = ("nvlink_oneway", "nvlink_domain", "ib_bw")
        else:
            raise ValueError(f"kind は 'TPU' か 'GPU' です: {self.kind!r}")
        missing = [f for f in need if getattr(self, f) is None]
        if missing:
            raise ValueError(f"{self.name}: {self.kind} の行には {missing} が要ります")

    @property
    def ridge(self) -> float:
        """リッジポイント flops / hbm_bw（FLOP/バイト）。これより演算強度の低い計算は HBM の帯域で頭打ちになる。"""
        return self.flops / self.hbm_bw

    @property
    def link_oneway(self) -> float:
        """1 本のリンクの片方向の帯域（一方向の ppermute が使う）。TPU は ICI のリンク、GPU は NVLink の出口。"""
        return self.ici_link_oneway if self.kind == "TPU" else self.nvlink_oneway  # type: ignore[return-value]

    @property
    def axis_bw(self) -> float:
        """メッシュの 1 軸のリングの集団通信で 1 チップが 1 秒に送るバイト。

        TPU: 軸のリングの両方向（2 × ici_link_oneway、ブックの bidirectional W_ici）。
        GPU: NVLink の片方向の出口（ノードの中のリング）。"""
        if self.kind == "TPU":
            return 2 * self.ici_link_oneway  # type: ignore[operator]
        return self.nvlink_oneway  # type: ignore[return-value]

    @property
    def all_axes_bw(self) -> float:
        """すべての軸を同時に使うときの帯域。TPU は torus_axes × axis_bw、GPU は axis_bw（出口は 1 つ）。"""
        if self.kind == "TPU":
            return self.torus_axes * self.axis_bw  # type: ignore[operator]
        return self.axis_bw

    @property
    def scaleout_bw(self) -> float:
        """相互接続の外への 1 チップあたりの帯域。TPU は DCN ÷ ホストのチップ数、GPU は InfiniBand。"""
        if self.kind == "TPU":
            return self.dcn_bw_per_host / self.chips_per_host  # type: ignore[operator]
        return self.ib_bw  # type: ignore[return-value]


# DCN のホストあたりの帯域（バイト/秒）。Cloud TPU の文書の NIC / 1 チップあたりの値から。ブック第 2 章の 1 チップあたりの
# 値（v5e 3.125e9、v5p 6.25e9、v6e 1.25e10）× 1 ホストのチップの数と同じ。
_DCN_HOST_V5E = 2 * 100e9 / 8   # ホストに 100 Gbps の NIC が 2 つ = 25 GB/s（チップ 8 個）
_DCN_HOST_V6E = 4 * 200e9 / 8   # ホストに 200 Gbps の NIC が 4 つ = 100 GB/s（チップ 8 個）
_DCN_HOST_V5P = 4 * 50e9 / 8    # 1 チップあたり 50 Gbps × 4 チップ = 25 GB/s

TPU_V5E = Chip(
    name="TPU v5e", kind="TPU", flops=197 * TERA, hbm_bw=819 * GB, hbm_bytes=16 * GB,
    source="Google Cloud TPU documentation: TPU v5e", url="https://cloud.google.com/tpu/docs/v5e",
    link_source=BOOK_TPUS[0], link_url=BOOK_TPUS[1],
    # 文書の ICI はチップあたり両方向 400 GB/s、ポート 4 つ（リンク 1 本の片方向 50 GB/s）。ブックの 4.5e10 を使う。
    # HBM の帯域は、文書の版によって 819 GBps とも 800 GiBps とも書かれる。819 GB/s を使う（リッジ 241）。ブックの推論の章は
    # 1.97e14 / 8.2e11 = 240 とし、8.1e11 はクイズの値（1.97e14 / 8.1e11 = 243）。
    ici_link_oneway=45 * GB, torus_axes=2, dcn_bw_per_host=_DCN_HOST_V5E, chips_per_host=8,
)
TPU_V6E = Chip(
    name="TPU v6e", kind="TPU", flops=918 * TERA, hbm_bw=1640 * GB, hbm_bytes=32 * GB,
    source="Google Cloud TPU documentation: TPU v6e", url="https://cloud.google.com/tpu/docs/v6e",
    link_source=BOOK_TPUS[0], link_url=BOOK_TPUS[1],
    # 文書の ICI はチップあたり両方向 800 GB/s、ポート 4 つ（リンク 1 本の片方向 100 GB/s）。ブックの 9e10 を使う。
    # DCN はホストに 200 Gbps の NIC が 4 つ（v5e の 4 倍）。HBM の帯域は文書の版によって 1638〜1640 GBps。
    ici_link_oneway=90 * GB, torus_axes=2, dcn_bw_per_host=_DCN_HOST_V6E, chips_per_host=8,
)
TPU_V5P = Chip(
    name="TPU v5p", kind="TPU", flops=459 * TERA, hbm_bw=2765 * GB, hbm_bytes=95 * GB,
    source="Google Cloud TPU documentation: TPU v5p", url="https://cloud.google.com/tpu/docs/v5p",
    link_source=BOOK_TPUS[0], link_url=BOOK_TPUS[1],
    # 文書の ICI はチップあたり両方向 1200 GB/s（3 次元トーラスでリンク 6 本、1 本の片方向 100 GB/s）。ブックの 9e10。
    # DCN は 1 チップあたり 50 Gbps。
    ici_link_oneway=90 * GB, torus_axes=3, dcn_bw_per_host=_DCN_HOST_V5P, chips_per_host=4,
)
H100 = Chip(
    name="H100 SXM", kind="GPU", flops=989 * TERA, hbm_bw=3350 * GB, hbm_bytes=80 * GB,
    source="NVIDIA H100 Tensor Core GPU (data sheet)", url="https://www.nvidia.com/en-us/data-center/h100/",
    link_source="NVIDIA H100 data sheet (NVLink 900 GB/s は両方向の合計) / " + BOOK_GPUS[0],
    link_url="https://www.nvidia.com/en-us/data-center/h100/",
    # NVLink 900 GB/s は両方向の合計。片方向 450 GB/s（ブックの GPU の章も 450）。
    # InfiniBand: HGX H100 は GPU 1 枚に ConnectX-7 400 Gb/s 1 ポート = 50 GB/s。
    nvlink_oneway=450 * GB, nvlink_domain=8, ib_bw=50 * GB,
)
H200 = Chip(
    name="H200 SXM", kind="GPU", flops=989 * TERA, hbm_bw=4800 * GB, hbm_bytes=141 * GB,
    source="NVIDIA H200 Tensor Core GPU (data sheet)", url="https://www.nvidia.com/en-us/data-center/h200/",
    link_source="NVIDIA H200 data sheet (NVLink 900 GB/s は両方向の合計) / " + BOOK_GPUS[0],
    link_url="https://www.nvidia.com/en-us/data-center/h200/",
    nvlink_oneway=450 * GB, nvlink_domain=8, ib_bw=50 * GB,
)
B200 = Chip(
    name="B200 (HGX)", kind="GPU", flops=2250 * TERA, hbm_bw=8000 * GB, hbm_bytes=180 * GB,
    source="NVIDIA HGX Platform (HGX B200 specifications)", url="https://www.nvidia.com/en-us/data-center/hgx/",
    link_source="NVIDIA HGX B200 specifications (NVLink 1.8 TB/s は両方向の合計) / " + BOOK_GPUS[0],
    link_url="https://www.nvidia.com/en-us/data-center/hgx/",
    # NVLink 5 は 1.8 TB/s（両方向）で、片方向 900 GB/s。InfiniBand は GPU 1 枚に 400 Gb/s = 50 GB/s。
    nvlink_oneway=900 * GB, nvlink_domain=8, ib_bw=50 * GB,
)

CHIPS: tuple[Chip, ...] = (TPU_V5E, TPU_V6E, TPU_V5P, H100, H200, B200)


def chip(name: str) -> Chip:
    """名前で表の行を取り出す（例: chip("TPU v5e")）。"""
    for c in CHIPS:
        if c.name == name:
            return c
    raise KeyError(f"{name!r} is not in ch6.hardware.CHIPS: {[c.name for c in CHIPS]}")


#: スケーリングブックが数値例に使った入力（ブックの値そのもの。データシートの行 ``CHIPS`` とは別に持つ）。
#: ブックの数値例（v5e のリッジポイント 240、推論の章の 4.98 ms、b* 2,550 / 850 / 2,200 …）は、この入力を
#: ``book_chip`` の行にして講座の関数で再現します。データシートの行を直しても（訂正）、ブックの数値例の再現は
#: 変わりません（CONTRIBUTING の「データシートの訂正」）。
BOOK_INPUTS: dict[str, dict[str, float]] = {
    # 第 1 章 "All About Rooflines": 1.97e14 FLOP/s、HBM 8.2e11 バイト/秒（リッジ 240）。第 2 章の表: ICI 4.5e10。
    "TPU v5e": dict(flops=1.97e14, hbm_bw=8.2e11, ici_link_oneway=4.5e10),
    # 第 2 章の表: 4.59e14 FLOP/s、ICI 9e10。第 5 章の b* 2,550 / 850。
    "TPU v5p": dict(flops=4.59e14, ici_link_oneway=9e10),
    # GPU の章: bf16 の密な行列積 990 TFLOP/s、NVLink の片方向の出口 450 GB/s（b* 2,200）。
    "H100 SXM": dict(flops=9.9e14, nvlink_oneway=4.5e11),
}


def book_chip(name: str) -> Chip:
    """スケーリングブックが数値例に使った入力の行（``BOOK_INPUTS``。ほかの欄はデータシートの行と同じ）。"""
    if name not in BOOK_INPUTS:
        raise KeyError(f"{name!r} has no inputs in ch6.hardware.BOOK_INPUTS: {sorted(BOOK_INPUTS)}")
    return replace(chip(name), **BOOK_INPUTS[name], source=SCALING_BOOK, url=SCALING_BOOK_URL)


#: ``jax.Device.device_kind`` → 表の行の名前。TPU の device_kind は世代の名前と違います（v5e は "TPU v5 lite"、
#: v5p は "TPU v5"、v6e は "TPU v6 lite"）。似た名前で選ぶと v5p を v5e と取り違えるので、完全に一致するものだけ。
DEVICE_KINDS: dict[str, str] = {
    "TPU v5 lite": "TPU v5e", "TPU v5e": "TPU v5e", "TPU v5": "TPU v5p", "TPU v5p": "TPU v5p",
    "TPU v6 lite": "TPU v6e", "TPU v6e": "TPU v6e",
    "NVIDIA H100 80GB HBM3": "H100 SXM", "NVIDIA H200": "H200 SXM", "NVIDIA B200": "B200 (HGX)",
}


def for_device_kind(kind: str) -> Chip | None:
    """``jax.devices()[0].device_kind`` のチップの行。表にないチップ（CPU を含む）は None。"""
    name = DEVICE_KINDS.get(kind.strip())
    return None if name is None else chip(name)
