"""結果を数えて見せる: スコア、演習ごとの表と生き残り、変異体が少ない演習、自分の変異体だけで弱い演習、
8 デバイスで見抜いて少ないデバイスで生き残った変異体とその扱い。"""
from __future__ import annotations

import dataclasses
import re

from .run import Outcome
from .table import SCORE_DEVICES, load_equivalent_at_fewer, load_few

MIN_MUTANTS = 5  # 演習ごとの最少の変異体の数（これより少ない演習は理由を書く）


def per_exercise(outcomes: list[Outcome]) -> dict[str, list[Outcome]]:
    """演習ごとの結果（演習の番号の順）。"""
    from collections import defaultdict

    per = defaultdict(list)
    for o in outcomes:
        per[o.exercise].append(o)
    return {ex: per[ex] for ex in sorted(per, key=_order)}


def _order(ex: str):
    return [(0, int(x), "") if x.isdigit() else (1, 0, x) for x in re.findall(r"\d+|[a-z]+", ex)]


def too_few(outcomes: list[Outcome], few: dict[str, str] | None = None) -> dict[str, int]:
    """数えた変異体が MIN_MUTANTS より少なく、理由も書いていない演習 -> 変異体の数。"""
    few = load_few() if few is None else few
    counts = {ex: sum(o.status != "broken" for o in os_) for ex, os_ in per_exercise(outcomes).items()}
    return {ex: n for ex, n in counts.items() if n < MIN_MUTANTS and ex not in few}


#: 値を保って手段だけを変える演算子（means_operators.py のものと vmap_to_loop・jit_per_call）。この変異体が生き残るのは、
#: 問題文が手段を自由にしている（tools/mutants_equivalent.txt に理由）ときだけ: 手段を指定する演習が、MEANS_REQUIRED
#: （tests/tools/test_mutate.py）に書き足さなくても、新しく入れたその日から make exercise で確かめられる。
MEANS_OPERATORS = frozenset({
    "vmap_to_loop", "vmap_to_lax_map", "scan_to_loop", "jit_per_call", "jit_decorator_per_call", "jit_static_arg",
    "collective_by_gather", "scatter_by_reduce", "ppermute_by_gather", "all_to_all_by_gather", "gather_by_psum",
})


def means_survivors(outcomes: list[Outcome]) -> list[Outcome]:
    """手段を変えた変異体のうち、生き残り、等価とも書いていないもの（演習の順）。"""
    return [o for os_ in per_exercise(outcomes).values() for o in os_
            if o.operator in MEANS_OPERATORS and o.status == "pass" and not o.equivalent]


def weak_exercises(outcomes: list[Outcome], min_score: float) -> dict[str, float]:
    """自分の変異体だけで数えたスコアが min_score に届かない演習（新しい演習の生き残りが、節の全体のスコアに
    埋もれないように）。"""
    return {ex: s for ex, os_ in per_exercise(outcomes).items() if (s := score(os_)[3]) < min_score}


def score(outcomes: list[Outcome]) -> tuple[int, int, int, float]:
    counted = [o for o in outcomes if o.status != "broken"]
    eq = [o for o in counted if not o.killed and o.equivalent]
    killed = [o for o in counted if o.killed]
    denom = len(counted) - len(eq)
    return len(killed), len(counted), len(eq), (len(killed) / denom if denom else 1.0)


def report(outcomes: list[Outcome], few: dict[str, str] | None = None) -> str:
    """演習ごとの表（見抜いた数 / 数えた変異体の数）、生き残った変異体、全体のスコア。"""
    few = load_few() if few is None else few
    lines = [f"{'exercise':10s} {'killed/total':>12s} {'survived':>8s} {'equiv':>5s} {'broken':>6s}"]
    for ex, os_ in per_exercise(outcomes).items():
        total = sum(o.status != "broken" for o in os_)
        k = sum(o.killed and o.status != "broken" for o in os_)
        e = sum((not o.killed) and bool(o.equivalent) for o in os_)
        s = sum((not o.killed) and not o.equivalent for o in os_)
        b = sum(o.status == "broken" for o in os_)
        note = ""
        if total < MIN_MUTANTS:
            note = f"  few mutants: {few[ex]}" if ex in few else f"  FEW MUTANTS (< {MIN_MUTANTS}, no reason given)"
        lines.append(f"{ex:10s} {f'{k}/{total}':>12s} {s:8d} {e:5d} {b:6d}{note}")
    for o in outcomes:
        if not o.killed and not o.equivalent:
            lines.append(f"  SURVIVED {o.exercise} | {o.label}")
    killed, total, eq, sc = score(outcomes)
    lines.append(f"mutation score: {killed}/{total - eq} = {sc:.1%} (mutants {total}, equivalent {eq})")
    return "\n".join(lines)


@dataclasses.dataclass
class Survivor:
    """8 で見抜いたのに、少ないデバイスで ✅ になった変異体と、その扱い。"""

    devices: int
    outcome: Outcome
    why: str  # "said"（✅ の行が確かめられないと断る）、"equivalent"（その数で等価と表にある）、"" （説明なし）

    @property
    def explained(self) -> bool:
        return bool(self.why)


def fewer_devices_survivors(at: dict[int, list[Outcome]], equivalent_at: dict | None = None) -> list[Survivor]:
    """少ないデバイスで生き残った変異体: ✅ の行が CANNOT_TELL の句で断っているか、表に「演習 @数」で等価とあるか。"""
    from ch6.checking import CANNOT_TELL

    equivalent_at = load_equivalent_at_fewer() if equivalent_at is None else equivalent_at
    rows = []
    for devices, outcomes in sorted(at.items(), reverse=True):
        for o in outcomes:
            if o.killed:
                continue
            why = ("said" if CANNOT_TELL in o.message
                   else "equivalent" if (o.exercise, o.label, devices) in equivalent_at else "")
            rows.append(Survivor(devices, o, why))
    return rows


def fewer_devices_report(killed: int, at: dict[int, list[Outcome]], survivors: list[Survivor]) -> str:
    """演習ごとに、8 で見抜いて少ないデバイスで生き残った変異体（デバイスの数、演算子、行、説明、扱い）。"""
    counts = ", ".join(f"{n} devices: {sum(not o.killed for o in at[n])} survive" for n in sorted(at, reverse=True))
    lines = [f"mutants killed at {SCORE_DEVICES} devices, tried again at fewer: {killed} ({counts})"]
    by_ex: dict[str, list[Survivor]] = {}
    for s in survivors:
        by_ex.setdefault(s.outcome.exercise, []).append(s)
    for ex in sorted(by_ex, key=_order):
        rows = by_ex[ex]
        bad = sum(not s.explained for s in rows)
        lines.append(f"{ex:8s} {len(rows):3d} survive at fewer devices, {bad} unexplained")
        for s in rows:
            o = s.outcome
            mark = {"said": "said in ✅", "equivalent": "equivalent"}.get(s.why, "UNEXPLAINED")
            lines.append(f"  {mark:12s} {s.devices} dev | {o.exercise} | {o.operator} | line {o.line} | {o.label}")
    internal = [(n, o) for n, os_ in at.items() for o in os_ if o.status == "internal"]
    for n, o in internal:
        lines.append(f"  CHECKER ERROR at {n} devices | {o.exercise} | {o.label} :: {o.message[:120]}")
    return "\n".join(lines)
