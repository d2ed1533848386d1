"""1 ステップのコストの見積もり: 集団通信の秒、ステップの秒、並列化のしきい値（6.7 節から使う）。

JAX も NumPy も import しない、小さな純粋な Python です。帯域は ``ch6.hardware.Chip`` の導いた量を渡します。

- リングの集団通信（all-gather、reduce-scatter、all-reduce）は、メッシュの 1 つの軸に沿って 1 チップが 1 秒に送る
  バイト ``chip.axis_bw`` で割ります（すべての軸を同時に使うなら ``chip.all_axes_bw``）。
- all-to-all はネットワークの構成で変わります: トーラス（リングの両方向）か、スイッチ（NVSwitch、全対全）か。
- 一方向の ``ppermute`` はリンクの片方向 ``chip.link_oneway`` で割ります。
- 通信と計算を重ねる見積もり（6.11 節）: collective matmul のシャードごとの秒（:func:`collective_matmul_times`）と、
  勾配をバケットごとに all-reduce して逆伝播と重ねたときの秒（:func:`bucketed_allreduce_time`）。

式と数値はスケーリングブック（"How to Scale Your Model", https://jax-ml.github.io/scaling-book/）に合わせています。
第 3 章 "Sharded Matrices and How to Multiply Them" が集団通信の秒、第 5 章 "How to Parallelize a Transformer for
Training" がしきい値です。ブックのしきい値は n → ∞ の形で (n − 1)/n を省きます。ここの ``*_time`` 関数は n を
受け取り、(n − 1)/n を含めます。
"""
from __future__ import annotations

from typing import Literal, NamedTuple, Protocol

BF16 = 2  # bf16 の 1 要素のバイト

#: 学習の 1 ステップの FLOP（6·トークン·P）と、そのうち逆伝播の FLOP（4·トークン·P）の比。
#: ブックのしきい値は逆伝播だけを勾配の通信と比べ、講座のステップ全体の式はステップ全体を比べる。
WHOLE_STEP_FACTOR = 6 / 4

#: ブロックごとの再計算（各層の入力だけを保存）で、学習の FLOP が 6ND から約 8ND になる比（ブック第 4 章）。
REMAT_FLOP_FACTOR = 8 / 6


class _Chip(Protocol):
    flops: float
    hbm_bw: float

    @property
    def link_oneway(self) -> float: ...
    @property
    def axis_bw(self) -> float: ...
    @property
    def all_axes_bw(self) -> float: ...


def _check(n: int, bw: float) -> None:
    if int(n) != n or n < 1:
        raise ValueError(f"デバイスの数 n は 1 以上の整数です: {n!r}")
    if not bw > 0:
        raise ValueError(f"帯域 bw は正の数です: {bw!r}")


def all_gather_time(nbytes_full: float, n: int, bw: float) -> float:
    """all-gather の秒 = nbytes_full · (n − 1)/n ÷ bw。

    nbytes_full は集めた後の配列 1 つのバイト。各デバイスは残りの (n − 1)/n を受け取る（送る）。
    bw はリングで 1 デバイスが 1 秒に送るバイト: TPU の 1 軸なら ``axis_bw``（両方向）、すべての軸なら
    ``all_axes_bw``、GPU なら NVLink の片方向の出口 ``axis_bw``。n = 1 なら 0。"""
    _check(n, bw)
    return nbytes_full * (n - 1) / n / bw


def reduce_scatter_time(nbytes_full: float, n: int, bw: float) -> float:
    """reduce-scatter の秒 = nbytes_full · (n − 1)/n ÷ bw（all-gather と同じ量を逆向きに流す）。

    nbytes_full は各デバイスが持つ、足し合わせる前の配列全体のバイト。bw は all-gather と同じリングの帯域。"""
    return all_gather_time(nbytes_full, n, bw)


def all_reduce_time(nbytes_full: float, n: int, bw: float) -> float:
    """all-reduce の秒 = 2 × all-gather（リングでは reduce-scatter の後に all-gather）。bw はリングの帯域。"""
    return 2 * all_gather_time(nbytes_full, n, bw)


def all_to_all_time(nbytes_per_device: float, n: int, bw: float,
                    network: Literal["torus", "switch"] = "torus") -> float:
    """all-to-all の秒。nbytes_per_device は 1 デバイスが持つ配列のバイト（その (n − 1)/n をほかへ送る）。

    ``"torus"``: bw はトーラスの 1 軸の両方向の帯域 ``axis_bw``。各デバイスは行き先ごとに nbytes/n の塊を
    近い向きに送り、距離 d の塊は d 本のリンクを通る。片方向に載る塊は n が偶数なら n²/8 個、奇数なら (n² − 1)/8 個
    （ちょうど反対側の塊は両方向に半分ずつ）で、片方向の帯域は bw/2。秒 = (nbytes/n) · 塊の数 ÷ (bw/2)。
    大きな n では同じ配列の all-gather（nbytes · n を集める）の約 1/4（ブック第 3 章の「AllGather / 4」）。

    ``"switch"``: bw は出口の片方向の帯域（NVLink の ``axis_bw``）。スイッチでは塊が 1 ホップで届くので、
    秒 = nbytes · (n − 1)/n ÷ bw。"""
    _check(n, bw)
    if network == "switch":
        return nbytes_per_device * (n - 1) / n / bw
    if network != "torus":
        raise ValueError(f"network は 'torus' か 'switch' です: {network!r}")
    chunks_one_way = n * n / 8 if n % 2 == 0 else (n * n - 1) / 8
    return nbytes_per_device / n * chunks_one_way / (bw / 2)


def ppermute_time(nbytes: float, link_oneway: float) -> float:
    """一方向の ppermute（各デバイスが隣へ nbytes を送る）の秒 = nbytes ÷ link_oneway。

    1 本のリンクの片方向しか使わないので、``axis_bw`` ではなく ``chip.link_oneway`` で割る。"""
    _check(1, link_oneway)
    return nbytes / link_oneway


class StepTime(NamedTuple):
    """1 ステップの秒の 2 つの見積もり。"""

    math: float        # 計算の秒（T_math）
    comm: float        # 通信の秒（T_comm）
    serial: float      # 重ならないときの上界 T_math + T_comm
    overlapped: float  # 通信が計算の裏に完全に隠れたときの見積もり max(T_math, T_comm)

    @property
    def bound(self) -> str:
        """大きいほう: "compute"（計算律速）か "communication"（通信律速）。等しければ "compute"。"""
        return "compute" if self.math >= self.comm else "communication"


def step_time(t_math: float, t_comm: float) -> StepTime:
    """T_math と T_comm から、重ならないときの和と、重なるときの max を返す。

    実際のステップはこの 2 つの間にある。どこまで重なるかは、通信がどの計算の裏に隠れられるかで決まる
    （データ並列の勾配の all-reduce は逆伝播の裏、FSDP の重みの all-gather は前の層の計算の裏）。"""
    if t_math < 0 or t_comm < 0:
        raise ValueError(f"秒は 0 以上です: t_math={t_math!r}, t_comm={t_comm!r}")
    return StepTime(t_math, t_comm, t_math + t_comm, max(t_math, t_comm))


def roofline(chip: _Chip, intensity: float) -> float:
    """演算強度 intensity（FLOP/バイト）の計算が達成できる FLOP/s = min(flops, intensity × hbm_bw)。"""
    return min(chip.flops, intensity * chip.hbm_bw)


def _bw(chip: _Chip, axes: int) -> float:
    if int(axes) != axes or axes < 1:
        raise ValueError(f"axes は 1 以上の整数です: {axes!r}")
    torus = getattr(chip, "torus_axes", None)
    if torus is not None and axes > torus:
        raise ValueError(f"{getattr(chip, 'name', 'chip')} のトーラスの軸は {torus} 本です（axes={axes}）")
    if torus is None:  # GPU: NVLink の出口は 1 つ。軸を増やしても帯域は増えない
        return chip.axis_bw
    return axes * chip.axis_bw


def dp_critical_batch(chip: _Chip, axes: int = 1, form: Literal["book", "step"] = "book") -> float:
    """データ並列（と FSDP）が計算律速でいられる、1 チップあたりの最小のトークン数 b*。

    帯域 W は axes 本の軸のリングの帯域（TPU は axes × ``axis_bw``、GPU は ``axis_bw``）。勾配の all-reduce は
    bf16 で 2·2P バイトを送り、時間は 4P / W（n → ∞）。

    ``"book"``（ブック第 5 章）: all-reduce が裏に隠れられる逆伝播の FLOP 4·b·P と比べる:
    4·b·P / C = 4P / W から b* = C / W。
    ``"step"``（講座のステップ全体の式）: ステップ全体の FLOP 6·b·P と比べる: b* = (4/6)·C / W、
    ブックの式の 1/``WHOLE_STEP_FACTOR``（1/1.5）。
    FSDP（ZeRO-3）も同じ b*: 増える順伝播の all-gather は順伝播の計算の裏に隠れる。"""
    book = chip.flops / _bw(chip, axes)
    if form == "book":
        return book
    if form == "step":
        return book / WHOLE_STEP_FACTOR
    raise ValueError(f"form は 'book' か 'step' です: {form!r}")


def tp_max_ways(chip: _Chip, ffn: int, axes: int = 1) -> float:
    """テンソル並列（Megatron 型の MLP）が計算律速でいられる最大の並列数 Y（ブック第 5 章: Y < axes·F / (C/W)）。

    ffn は MLP の中間の幅 F。順伝播の FLOP 4·B·D·F / Y と、活性値の all-gather と reduce-scatter の
    2·2·B·D / W（W は 1 軸の ``axis_bw``、axes 本なら axes 倍）を比べる。バッチによらない。"""
    return ffn * _bw(chip, axes) / chip.flops


def fsdp_tp_critical_batch(chip: _Chip, ffn: int, axes_product: float | None = None) -> float:
    """FSDP とテンソル並列を組み合わせたときの、1 チップあたりの最小のトークン数（ブック第 5 章: 4·α² / (M_X·M_Y·F)）。

    α = C / W は 1 軸の ``axis_bw`` でのしきい値、F は MLP の中間の幅。M_X と M_Y は FSDP とテンソル並列に
    割り振ったトーラスの軸の数で、axes_product はその積 M_X·M_Y。省くとトーラスの軸をすべて割り振った値
    （3 次元の v5p は 1 軸と 2 軸で 2、2 次元の v5e・v6e は 1 軸ずつで 1）を使う。v5p ではブックの 2·α²/F。
    GPU の行は受け付けない（NVLink の出口は 1 つで、軸ごとの帯域の式が当てはまらない）。"""
    torus = getattr(chip, "torus_axes", None)
    if torus is None:
        raise ValueError(f"{getattr(chip, 'name', 'chip')}: この式はトーラスの軸に FSDP とテンソル並列を割り振る TPU の式です")
    if axes_product is None:
        axes_product = (torus // 2) * (torus - torus // 2)
    if not axes_product > 0:
        raise ValueError(f"axes_product は正の数です: {axes_product!r}")
    alpha = chip.flops / chip.axis_bw
    return 4 * alpha**2 / (axes_product * ffn)


def train_flops(tokens: float, params: float, remat: bool = False) -> float:
    """学習の FLOP: 6·トークン·P（順伝播 2、逆伝播 4）。remat=True はブロックごとの再計算で約 8·トークン·P。"""
    return (8 if remat else 6) * tokens * params


class ZeroStage(NamedTuple):
    """データ並列の ZeRO の段（ZeRO: arXiv 1910.02054）。"""

    stage: int
    sharded: tuple[str, ...]                # デバイスに分割するもの
    collectives: tuple[tuple[str, str], ...]  # (集団通信, どの計算の裏に隠れられるか)
    comm_factor: float                       # 1 ステップに送るバイト ÷ (パラメータの bf16 のバイト × (n−1)/n)


ZERO_STAGES: dict[int, ZeroStage] = {
    0: ZeroStage(0, (), (("all-reduce（勾配）", "逆伝播"),), 2.0),
    1: ZeroStage(1, ("最適化器の状態",),
                 (("reduce-scatter（勾配）", "逆伝播"), ("all-gather（更新した重み）", "次の順伝播")), 2.0),
    2: ZeroStage(2, ("最適化器の状態", "勾配"),
                 (("reduce-scatter（勾配）", "逆伝播"), ("all-gather（更新した重み）", "次の順伝播")), 2.0),
    3: ZeroStage(3, ("最適化器の状態", "勾配", "重み"),
                 (("all-gather（重み）", "順伝播"), ("all-gather（重み、もう一度）", "逆伝播"),
                  ("reduce-scatter（勾配）", "逆伝播")), 3.0),
}


def zero_memory_bytes(params: float, n: int, stage: int) -> float:
    """混合精度の Adam で 1 デバイスが持つバイト（ZeRO の論文の式、パラメータあたり 16 バイト）。

    bf16 の重み 2、bf16 の勾配 2、float32 のマスター重みと 2 つのモーメント 12。段ごとに分割するものを 1/n にする。
    活性値と一時領域は含まない。"""
    if stage not in ZERO_STAGES:
        raise ValueError(f"stage は 0〜3 です: {stage!r}")
    weights, grads, opt = 2 * params, 2 * params, 12 * params
    if stage >= 1:
        opt /= n
    if stage >= 2:
        grads /= n
    if stage >= 3:
        weights /= n
    return weights + grads + opt


def zero_comm_bytes(params: float, n: int, stage: int) -> float:
    """ZeRO の段 stage で、1 デバイスが 1 ステップに送る bf16 のバイト = comm_factor × 2P × (n − 1)/n。"""
    if stage not in ZERO_STAGES:
        raise ValueError(f"stage は 0〜3 です: {stage!r}")
    return ZERO_STAGES[stage].comm_factor * BF16 * params * (n - 1) / n


# ---------------------------------------------------------------- 通信と計算の重なり（6.11 節）


def ring_steps(n: int, direction: str) -> list[tuple[int, int, int]]:
    """collective matmul のステップごとの (掛けるシャードの数, 右回りに送る数, 左回りに送る数)。

    ``ch6.overlap.schedule`` と同じリング（テストが突き合わせます）。one: n ステップ、最後のステップ以外で 1 つ送る。
    two: R = ⌈(n − 1)/2⌉ が右回り、L = ⌊(n − 1)/2⌋ が左回りに届き、R + 1 ステップ。ステップ 0 はそのデバイスの
    シャードだけを掛け、ステップ s ≥ 1 は右回りの 1 つと、s ≤ L なら左回りの 1 つを掛ける。"""
    if direction == "one":
        right, left = n - 1, 0
    elif direction == "two":
        right, left = n // 2, (n - 1) // 2
    else:
        raise ValueError(f"direction は 'one' か 'two' です: {direction!r}")
    return [(1 if s == 0 else 1 + (s <= left), int(s < right), int(s < left)) for s in range(right + 1)]


class CollectiveMatmulTime(NamedTuple):
    """collective matmul の秒の見積もり（:func:`collective_matmul_times`）。"""

    math: float        # シャード 1 つの行列積の秒（T_math）
    comm: float        # シャード 1 つを送る秒（T_comm。one は片方向のリンク 1 本、two は軸の両方向）
    steps: int         # リングのステップの数
    overlapped: float  # 各ステップで送信と行列積を重ねたときの合計
    serial: float      # 重ねないときの合計（すべての行列積 + すべての送信）
    exposed: float     # overlapped − すべての行列積の秒（行列積の裏に隠れなかった通信の秒）
    hidden: bool       # T_comm ≤ T_math（途中のステップで通信が行列積の裏に隠れる）


def collective_matmul_times(chip: _Chip, m: float, k: float, n_out: float, n_devices: int,
                            bytes_per_value: float = BF16, direction: Literal["one", "two"] = "one",
                            form: Literal["allgather", "reducescatter"] = "allgather") -> CollectiveMatmulTime:
    """collective matmul（``ch6.overlap``）の、シャードごとの T_math と T_comm、重ねたときと重ねないときの合計の秒。

    全体の行列積は (m, k) @ (k, n_out)、軸の大きさ n = n_devices、1 値のバイト b = bytes_per_value。

    ``"allgather"``（``allgather_matmul``: x は行で、w は列で分割）: シャードは x の行 m/n 行。
    T_math = 2·(m/n)·k·(n_out/n) / flops、シャードのバイト B = (m/n)·k·b。
    ``"reducescatter"``（``matmul_reducescatter``: x は列で、w は行で分割。one だけ）: 送るのは部分和の行 m/n 行。
    T_math = 2·(m/n)·(k/n)·n_out / flops、B = (m/n)·n_out·b（部分和を float32 で送るなら b = 4）。

    T_comm = B / ``chip.link_oneway``（one）、B / ``chip.axis_bw``（two。TPU は両方向のリンク 2 本、GPU は
    NVLink の出口 1 つなので one と同じ）。n = 1 なら送らないので T_comm = 0。

    ステップ s で a_s 個のシャードを掛け、右回りに r_s 個、左回りに l_s 個を送る（``ch6.overlap.schedule``）。
    送信の秒 C_s = max(max(r_s, l_s)·B / link_oneway, (r_s + l_s)·B / axis_bw)（1 方向は 1 本のリンク、合計は
    軸の帯域を超えない）。ステップは、行列積と送信の両方が終わると次へ進む:

    - overlapped = Σ_s max(a_s·T_math, C_s)。one では T_math + (n − 1)·max(T_math, T_comm): 送信のない
      ステップ（allgather では最後、reducescatter では最初の行列積）が 1 つ、重なるステップが n − 1 個。
    - serial = Σ_s (a_s·T_math + C_s)。one では n·T_math + (n − 1)·T_comm（(n − 1)·T_comm は一方向のリングの
      all-gather の秒 ``all_gather_time(m·k·b, n, link_oneway)``）。
    - exposed = overlapped − n·T_math、hidden = T_comm ≤ T_math。

    two では、ステップ 0 は 1 つしか掛けないのに両方向へ送り、n が偶数なら最後のステップは 1 つだけ掛けるので、
    この 2 ステップの通信は隠れにくくなります。ホップごとの遅延（ブック第 3 章で約 1 μs）は含みません。"""
    _check(n_devices, chip.link_oneway)
    if not (m > 0 and k > 0 and n_out > 0 and bytes_per_value > 0):
        raise ValueError(f"m, k, n_out, bytes_per_value は正の数です: {(m, k, n_out, bytes_per_value)!r}")
    n = n_devices
    if form == "allgather":
        flop, nbytes = 2 * (m / n) * k * (n_out / n), (m / n) * k * bytes_per_value
    elif form == "reducescatter":
        if direction != "one":
            raise ValueError("reducescatter の形は direction='one' だけです")
        flop, nbytes = 2 * (m / n) * (k / n) * n_out, (m / n) * n_out * bytes_per_value
    else:
        raise ValueError(f"form は 'allgather' か 'reducescatter' です: {form!r}")
    steps = ring_steps(n, direction)
    t_math = flop / chip.flops
    per_link = ppermute_time(nbytes, chip.link_oneway)
    t_comm = 0.0 if n == 1 else (per_link if direction == "one" else nbytes / chip.axis_bw)
    overlapped = serial = 0.0
    for a, right, left in steps:
        sent = max(max(right, left) * per_link, (right + left) * nbytes / chip.axis_bw)
        one_step = step_time(a * t_math, sent)
        overlapped += one_step.overlapped
        serial += one_step.serial
    return CollectiveMatmulTime(t_math, t_comm, len(steps), overlapped, serial, overlapped - n * t_math,
                                t_comm <= t_math)


def hiding_width(chip: _Chip, bytes_per_value: float = BF16, direction: Literal["one", "two"] = "one") -> float:
    """collective matmul の通信が行列積の裏に隠れる（T_comm ≤ T_math）、1 デバイスあたりの最小の幅。

    allgather の形では出力の列の幅 n_out/n、reducescatter の形では縮約する幅 k/n。T_math = 2·(m/n)·k·(n_out/n) / C と
    T_comm = (m/n)·k·b / W から、n_out/n ≥ b·C / (2·W)（W は one なら ``link_oneway``、two なら ``axis_bw``）。
    m にも k にもよらない。bf16 の two では C / axis_bw で、ブック第 5 章のテンソル並列の条件 F/Y > C/W と同じ。"""
    if not bytes_per_value > 0:
        raise ValueError(f"bytes_per_value は正の数です: {bytes_per_value!r}")
    if direction not in ("one", "two"):
        raise ValueError(f"direction は 'one' か 'two' です: {direction!r}")
    bw = chip.link_oneway if direction == "one" else chip.axis_bw
    return bytes_per_value * chip.flops / (2 * bw)


def max_chunks_hidden(chip: _Chip, width: float, bytes_per_value: float = BF16,
                      direction: Literal["one", "two"] = "one") -> int:
    """通信が隠れる最大のシャードの数 n（= 軸の大きさ）: width / n ≥ :func:`hiding_width` を満たす最大の整数。

    width は分割する前の幅（allgather の形では n_out、reducescatter の形では k）。n = 1 は送らないので、幅が
    しきい値より小さくても 1 を返す。"""
    if not width > 0:
        raise ValueError(f"width は正の数です: {width!r}")
    return max(1, int(width // hiding_width(chip, bytes_per_value, direction)))


class BucketedAllReduce(NamedTuple):
    """勾配をバケットごとに all-reduce し、逆伝播と重ねたときの秒（:func:`bucketed_allreduce_time`）。"""

    per_bucket: float  # バケット 1 つの all-reduce の秒（遅延を含む）
    comm: float        # すべてのバケットの all-reduce の秒の和
    total: float       # 逆伝播の始まりから、最後のバケットの all-reduce が終わるまで
    exposed: float     # total − t_backward（逆伝播の裏に隠れなかった通信の秒）
    comm_bound: bool   # 通信律速: all-reduce 1 つが、次のバケットがそろうまでに終わらない（per_bucket > t_backward / buckets）


def bucketed_allreduce_time(grad_bytes: float, n: int, bw: float, t_backward: float, buckets: int,
                            latency: float = 0.0) -> BucketedAllReduce:
    """勾配 grad_bytes を等しい buckets 個のバケットに分割し、逆伝播（t_backward 秒）と重ねて all-reduce する秒。

    仮定: 逆伝播は一定の速さで勾配を作り、バケット j（1..k、k = buckets）は時刻 j·t_backward/k にそろう。all-reduce は
    1 つずつ順に、バケットがそろい、前の all-reduce が終わってから始まる。1 つの秒は
    t = ``all_reduce_time(grad_bytes/k, n, bw)`` + latency（latency は集団通信 1 回あたりの固定の秒）。通信は
    逆伝播の計算を遅くしない。最後の all-reduce が終わる時刻は max_j (j·t_backward/k + (k − j + 1)·t) で、j について
    1 次式なので両端の大きいほう:

        total = max(t_backward + t, t_backward/k + k·t)

    t ≤ t_backward/k なら前者（最後のバケットの t だけが見える）、そうでなければ後者（通信律速、comm_bound）。
    k = 1（逆伝播の後に 1 回の all-reduce）は t_backward + t で、何も重ならない。"""
    _check(n, bw)
    if int(buckets) != buckets or buckets < 1:
        raise ValueError(f"buckets は 1 以上の整数です: {buckets!r}")
    if t_backward < 0 or latency < 0 or grad_bytes < 0:
        raise ValueError(f"秒とバイトは 0 以上です: t_backward={t_backward!r}, latency={latency!r}, grad_bytes={grad_bytes!r}")
    t = all_reduce_time(grad_bytes / buckets, n, bw) + latency
    total = max(t_backward + t, t_backward / buckets + buckets * t)
    return BucketedAllReduce(t, buckets * t, total, total - t_backward, t > t_backward / buckets)


def best_bucket_count(grad_bytes: float, n: int, bw: float, t_backward: float, latency: float,
                      max_buckets: int = 1024) -> int:
    """:func:`bucketed_allreduce_time` の total が最小になるバケットの数（1..max_buckets、同じなら小さいほう）。

    バケットを増やすと最後のバケット（見える通信）は小さくなるが、all-reduce の回数 × latency が増える。"""
    if int(max_buckets) != max_buckets or max_buckets < 1:
        raise ValueError(f"max_buckets は 1 以上の整数です: {max_buckets!r}")
    return min(range(1, max_buckets + 1),
               key=lambda k: bucketed_allreduce_time(grad_bytes, n, bw, t_backward, k, latency).total)
