"""6 つの並列化の一覧（6.8a と 6.8b が同じ表を見せるための、ただ 1 つの正本）。

1 行が 1 つの並列化です。何を分割するか、メッシュのどの軸を使うか、どの集団通信をいつ行うか、1 デバイスで
何が減るか、どんなときに割に合うか。FSDP はデータ並列と同じ軸 ``data`` を使い、エキスパート並列も ``data`` 軸を
兼ねることが多いので、「並列化ごとに軸が 1 本」ではありません（:func:`axis_owners` がそれを示します）。

ノートブックでは ``print(ch6.show.table(ch6.strategies.rows(), header=ch6.strategies.HEADER))`` で表にします。
列を選ぶときは ``rows(columns)`` と ``header(columns)`` に同じ列名の列を渡します。

出典: 通信のしきい値と各方式の理由は、"How to Scale Your Model" の Training の章
（https://jax-ml.github.io/scaling-book/training/）。
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence


@dataclasses.dataclass(frozen=True)
class Strategy:
    name: str          # 並列化の名前（用語集の用語）
    splits: str        # 分割するもの
    axis: str          # メッシュの軸の名前（この講座で使う名前）
    axis_note: str     # 軸について一言（ほかの並列化と同じ軸を使うなら、それを言う）
    collectives: str   # 集団通信と、それを行う時（順伝播・逆伝播、1 ステップに何回）
    saves: str         # 1 デバイスで減るもの
    pays_off: str      # 割に合う場面
    lessons: str       # 講座の節


STRATEGIES: tuple[Strategy, ...] = (
    Strategy("データ並列", "バッチ", "data", "",
             "逆伝播で勾配を all-reduce（できた順にバケットにまとめ、バケットごとに残りの逆伝播と重ねる。"
             "最後に 1 回で行うと重ならない）",
             "1 デバイスの計算と活性値（バッチが 1/n）",
             "パラメータと最適化器の状態が 1 デバイスに入り、1 デバイスのバッチが通信を隠せるほど大きいとき",
             "6.4、6.7"),
    Strategy("FSDP（ZeRO-3）", "バッチと、パラメータ・勾配・最適化器の状態", "data", "データ並列と同じ軸",
             "順伝播と逆伝播で重みを all-gather、逆伝播で勾配を reduce-scatter（どれも計算と重ねられる）",
             "パラメータ・勾配・最適化器の状態（1/n）",
             "パラメータと最適化器の状態が 1 デバイスに入らないとき（通信のしきい値はデータ並列と同じ）",
             "6.4、6.7"),
    Strategy("テンソル並列", "層の中の行列（隠れ層の幅）", "model", "",
             "各層の順伝播と逆伝播で活性値を all-gather と reduce-scatter（または all-reduce）",
             "パラメータと、幅の方向の活性値（1/n）",
             "速いリンクでつながった少数のデバイスの中で、層の幅が軸の大きさに比べて十分大きいとき",
             "6.3b、6.4、6.7"),
    Strategy("パイプライン並列", "層（ステージ）", "stage", "",
             "マイクロバッチごとに、順伝播で活性値を、逆伝播でその勾配を隣のステージへ ppermute",
             "パラメータ（層が 1/S）。活性値は流れているマイクロバッチの分だけ持つ",
             "デバイスの間のリンクが遅いとき（送るのはステージの境目の活性値だけ）。バブルを小さくするには M ≫ S",
             "6.8a"),
    Strategy("コンテキスト並列", "系列（トークンの位置）", "seq", "",
             "アテンションで K/V をリングで ppermute、またはアテンションの前後で all-to-all（順伝播と逆伝播）",
             "活性値（系列が 1/n）",
             "系列が長く、活性値がメモリの大部分を占めるとき",
             "6.8b"),
    Strategy("エキスパート並列", "エキスパート", "expert", "data 軸を兼ねることが多い",
             "混合エキスパートの層ごとに、トークンを all-to-all で送り（振り分け）、all-to-all で戻す（集約）。逆伝播も同じ",
             "エキスパートのパラメータ（エキスパートが 1/n）",
             "エキスパートのパラメータを各デバイスに複製すると入らないとき（振り分けと集約の all-to-all が計算に比べて小さいこと）",
             "6.8b"),
)

# 列名 → 見出し
COLUMNS: dict[str, str] = {
    "name": "並列化",
    "splits": "分割するもの",
    "axis": "メッシュの軸",
    "collectives": "集団通信（いつ）",
    "saves": "1 デバイスで減るもの",
    "pays_off": "割に合う場面",
    "lessons": "節",
}
HEADER: list[str] = list(COLUMNS.values())


def _cell(s: Strategy, column: str) -> str:
    if column == "axis":
        return f"{s.axis}（{s.axis_note}）" if s.axis_note else s.axis
    return getattr(s, column)


def header(columns: Sequence[str] | None = None) -> list[str]:
    """列名の見出し（columns を省くとすべての列）。"""
    return [COLUMNS[c] for c in (columns or COLUMNS)]


def rows(columns: Sequence[str] | None = None) -> list[list[str]]:
    """表の行（1 行が 1 つの並列化）。columns は COLUMNS の列名の並び（省くとすべての列）。"""
    cols = list(columns or COLUMNS)
    unknown = [c for c in cols if c not in COLUMNS]
    if unknown:
        raise ValueError(f"表にない列です: {unknown}（使える列: {list(COLUMNS)}）")
    return [[_cell(s, c) for c in cols] for s in STRATEGIES]


def by_name(name: str) -> Strategy:
    """名前（「FSDP」のように括弧の前まででもよい）から 1 行を返す。"""
    for s in STRATEGIES:
        if name in (s.name, s.name.split("（")[0]):
            return s
    raise KeyError(name)


def axis_owners() -> dict[str, list[str]]:
    """メッシュの軸 → その軸を使う並列化の名前（FSDP はデータ並列と同じ data 軸）。"""
    owners: dict[str, list[str]] = {}
    for s in STRATEGIES:
        owners.setdefault(s.axis, []).append(s.name)
    return owners
