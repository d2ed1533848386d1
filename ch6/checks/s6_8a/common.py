"""6.8a の演習チェックで共有する道具: 隠し乱数と、パイプラインのスケジュールを決める小さなシミュレータ。

スケジュールの表は schedule[s][t] = ステージ s がティック t に行う処理の文字列（"F3" は
マイクロバッチ 3 の順伝播、"B3" は逆伝播、"" は空き）。各処理は 1 ティックかかるとします。
"""
from __future__ import annotations

import numpy as np

from ...checking import hidden_rng
from ...recorded import recorded


def exercise_rng(tag: int) -> np.random.Generator:
    """6.8a-k の隠し入力の乱数（seed は 68_100 + k）。"""
    return hidden_rng(68_100 + tag)


def simulate(orders) -> list[list[str]]:
    """orders[s] = ステージ s が処理する順の ("F" か "B", m) の列 → スケジュールの表。

    順伝播 F m はステージ s − 1 の F m の後、逆伝播 B m はステージ s + 1 の B m の後（最後のステージでは
    自分の F m の後）に始められます。各ステージは順番を守り、始められるいちばん早いティックに処理します。"""
    n = len(orders)
    finish: dict[tuple[str, int, int], int] = {}
    nxt, free = [0] * n, [0] * n
    table: list[list[str]] = [[] for _ in range(n)]
    while any(nxt[s] < len(orders[s]) for s in range(n)):
        moved = False
        for s in range(n):
            if nxt[s] == len(orders[s]):
                continue
            kind, m = orders[s][nxt[s]]
            if kind == "F":
                dep = ("F", s - 1, m) if s > 0 else None
            else:
                dep = ("B", s + 1, m) if s < n - 1 else ("F", s, m)
            if dep is not None and dep not in finish:
                continue
            start = max(free[s], finish.get(dep, 0))
            table[s] += [""] * (start - len(table[s])) + [f"{kind}{m}"]
            finish[(kind, s, m)] = free[s] = start + 1
            nxt[s] += 1
            moved = True
        if not moved:
            raise ValueError("この順番では先へ進めません（依存が循環しています）")
    width = max(len(r) for r in table)
    return [r + [""] * (width - len(r)) for r in table]


def gpipe_order(n_stages: int, n_micro: int):
    """GPipe: すべての順伝播の後に、すべての逆伝播（後のマイクロバッチから）。"""
    return [[("F", m) for m in range(n_micro)] + [("B", m) for m in reversed(range(n_micro))]
            for _ in range(n_stages)]


def warmup_order(n_micro: int, warmups) -> list:
    """ステージ s は warmups[s] 個の順伝播で始め、あとは順伝播と逆伝播を 1 つずつ交互に、最後に残りの逆伝播。
    warmups が増えない列（warmups[s] >= warmups[s + 1]）なら、どのステージも先へ進めます。"""
    orders = []
    for w in warmups:
        warm = min(int(w), n_micro)
        order = [("F", m) for m in range(warm)]
        for i in range(n_micro - warm):
            order += [("F", warm + i), ("B", i)]
        order += [("B", m) for m in range(n_micro - warm, n_micro)]
        orders.append(order)
    return orders


def one_f_one_b_order(n_stages: int, n_micro: int):
    """1F1B: ステージ s は S − s − 1 個の順伝播で始め、あとは順伝播と逆伝播を 1 つずつ交互に。"""
    return warmup_order(n_micro, [n_stages - s - 1 for s in range(n_stages)])


@recorded
def peak_stored(table) -> list[int]:
    """ステージごとに、順伝播が済んで逆伝播がまだの（活性値を持っておく）マイクロバッチの数の最大。"""
    peaks = []
    for row in table:
        live = best = 0
        for entry in row:
            if entry.startswith("F"):
                live += 1
                best = max(best, live)
            elif entry.startswith("B"):
                live -= 1
        peaks.append(best)
    return peaks
