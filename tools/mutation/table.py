"""等価変異体の表（tools/mutants_equivalent.txt）を読む: 等価な変異体、その数のデバイスでだけ等価なもの、
変異体が少ない理由。"""
from __future__ import annotations

from pathlib import Path

from . import ROOT

EQUIVALENT_FILE = ROOT / "tools" / "mutants_equivalent.txt"
FEW = "(few mutants)"  # tools/mutants_equivalent.txt で「変異体が少ない理由」を書く行の印
SCORE_DEVICES = 8  # スコアを測るデバイスの数（これより少ない数では、8 で見抜いた変異体をもう一度試す）


def _table(path: Path) -> list[tuple[str, frozenset[int] | None, str, str]]:
    """(演習, デバイスの数の組 | None, 変異の説明, 理由)。演習の欄の「@1,3」は、その数のデバイスでだけ等価という印。"""
    rows = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            ex, label, reason = (part.strip() for part in line.split("|", 2))
            counts = None
            if "@" in ex:
                ex, _, at = (part.strip() for part in ex.partition("@"))
                counts = frozenset(int(c) for c in at.split(","))
            rows.append((ex, counts, label, reason))
    return rows


def load_equivalent(path: Path = EQUIVALENT_FILE, devices: int = SCORE_DEVICES) -> dict[tuple[str, str], str]:
    """「演習 | 変異の説明 | 理由」の行（# から後は注釈）のうち、devices 個のデバイスで等価なもの（@ のない行は
    どの数でも、「演習 @1,3」の行はその数でだけ）。変異体が少ない理由の行（FEW）は含めない。"""
    return {(ex, label): reason for ex, counts, label, reason in _table(path)
            if label != FEW and (counts is None or devices in counts)}


def load_equivalent_at_fewer(path: Path = EQUIVALENT_FILE) -> dict[tuple[str, str, int], str]:
    """「演習 @1,3 | 変異の説明 | 理由」の行: (演習, 説明, デバイスの数) -> 理由（8 で見抜き、その数では等価）。"""
    return {(ex, label, n): reason for ex, counts, label, reason in _table(path) if counts for n in counts}


def load_few(path: Path = EQUIVALENT_FILE) -> dict[str, str]:
    """「演習 | (few mutants) | 理由」の行: 変異体が MIN_MUTANTS より少なくてよい演習と、その理由。"""
    return {ex: reason for ex, _, label, reason in _table(path) if label == FEW}

