#!/usr/bin/env python3
"""Numbers in prose that come from the datasheet rows (``ch6.hardware``) or from a notebook's own stored outputs.

A markdown cell cannot compute, so a sentence such as 「TPU v5e のリッジポイントは約 240 なので」 repeats a number
that ``ch6/hardware.py`` or an executed cell decides. Each such number is an entry of ``NUMBERS``: the file, the
sentence's words with ``{}`` where the numbers stand, and where each number comes from:

- ``hw("expr", "fmt")``: ``expr`` evaluated with ``chip``, ``book_chip`` and ``CHIPS`` of ``ch6.hardware``;
- ``out("regex")``: the first group of the one line of that notebook's ``X.outputs.txt`` that the regex finds.

    python tools/prose_numbers.py            # list every entry and its number now
    python tools/prose_numbers.py --check    # exit 1 naming each number in prose that differs (file:line: 819 → 860)
    python tools/prose_numbers.py --write    # rewrite those numbers (make depends … RUN=1 runs it after executing)

Other numbers beside a hardware unit (GB/s, TFLOP/s, a ridge point, a share of the datasheet figure) that do not
come from a row (measured on a chip, quoted from a paper, a datasheet's figure the row does not hold) are listed in
``OTHER`` with the reason; ``tests/tools/test_prose_numbers.py`` fails on a number in prose that is in neither list.
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from ch6 import hardware  # noqa: E402

NUM = r"(\d[\d,]*(?:\.\d+)?)"
# the files whose prose is scanned: lessons, solutions, the workshop guide, the README
FILES = ("notebooks/*.md", "solutions/*.md", "docs/workshop.md", "README.md")
CHIP_NAMES = r"(?:v5e|v5p|v6e|H100|H200|B200)"
# numbers that sit beside a hardware quantity in a sentence
CANDIDATES = [
    re.compile(NUM + r"\s*(?:GB/s|TB/s|TFLOP/s|PFLOP/s|GBps)"),
    re.compile(r"リッジポイント(?:は|が|を)?\s*(?:約\s*)?" + NUM + r"(?!\s*×)"),
    re.compile(CHIP_NAMES + r"\s*(?:で|は|なら)\s*(?:約\s*)?" + NUM + r"(?![\d,.]*\s*(?:×|チップ|個|枚|並列|倍|%|台|ホスト|節))"),
    re.compile(r"公表値の?\s*" + NUM + r"\s*%"),
    re.compile(r"HBM[^。、]{0,6}?" + NUM + r"\s*GB(?!/)"),
]


@dataclass(frozen=True)
class Source:
    kind: str   # "hw" or "out"
    text: str   # the expression or the regex
    fmt: str = "{}"

    def value(self, md: Path) -> str:
        if self.kind == "hw":
            names = {"chip": hardware.chip, "book_chip": hardware.book_chip, "CHIPS": hardware.CHIPS}
            return self.fmt.format(eval(self.text, names))  # the expressions are ours, in NUMBERS
        outputs = md.with_suffix(".outputs.txt")
        found = [m.group(1) for m in re.finditer(self.text, outputs.read_text(encoding="utf-8"), re.M)]
        if len(found) != 1:
            raise LookupError(f"{outputs.relative_to(ROOT)}: {len(found)} lines match {self.text!r} (want 1)")
        return found[0] if self.fmt == "{}" else self.fmt.format(float(found[0].replace(",", "")))


def hw(expr: str, fmt: str = "{:.0f}") -> Source:
    return Source("hw", expr, fmt)


def out(regex: str, fmt: str = "{}") -> Source:
    return Source("out", regex, fmt)


V5E_RIDGE = hw("round(chip('TPU v5e').ridge, -1)")         # 「約 240」: 10 の位に丸める
V5E_HBM = hw("chip('TPU v5e').hbm_bw / 1e9")               # 819 GB/s
# 6.11a の「残り」: デバイスの時間 − 下限 と、その分類ごとの内訳（出力は 3 桁、本文は 2 桁）
REMAINDER = (out(r"^合計 (\d+\.\d+) ms", "{:.2f}"), out(r"^行列積 − 重み ÷ 公表値の帯域\s+(\d+\.\d+)", "{:.2f}"),
             out(r"^コピー・レイアウト（重みの到着待ち）\s+(\d+\.\d+)", "{:.2f}"),
             out(r"^その他の融合 − KV キャッシュ ÷ 公表値の帯域\s+(\d+\.\d+)", "{:.2f}"))
NUMBERS: list[tuple[str, str, tuple[Source, ...]]] = [
    ("notebooks/6_7_cost_memory.md", "TPU v5e のリッジポイントは約 {} なので、1 デバイスに {} トークン以上",
     (V5E_RIDGE, V5E_RIDGE)),
    ("notebooks/6_7_cost_memory.md", "リッジポイントは最大性能 ÷ HBM の帯域で、v5e で約 {} です", (V5E_RIDGE,)),
    ("notebooks/6_7_cost_memory.md", "リッジポイント {}、$b^*$ {} / {} / {}、",
     (hw("book_chip('TPU v5e').ridge", "{:,.0f}"), hw("book_chip('TPU v5p').flops / book_chip('TPU v5p').axis_bw",
                                                      "{:,.0f}"),
      hw("round(book_chip('TPU v5p').flops / book_chip('TPU v5p').all_axes_bw, -1)", "{:,.0f}"),
      hw("round(book_chip('H100 SXM').flops / book_chip('H100 SXM').axis_bw, -2)", "{:,.0f}"))),
    ("notebooks/6_7_cost_memory.md", "この節の最初の表の H200 もリッジポイントが {} なので", (hw("chip('H200 SXM').ridge"),)),
    ("notebooks/6_7_cost_memory.md", "データシートの NVLink の値（H100 と H200 は {} GB/s、B200 は {} TB/s、",
     (hw("2 * chip('H100 SXM').nvlink_oneway / 1e9"), hw("2 * chip('B200 (HGX)').nvlink_oneway / 1e12", "{:.1f}"))),
    ("notebooks/6_7_cost_memory.md", "NVLink の外（InfiniBand）は 1 枚あたり {} GB/s です", (hw("chip('H100 SXM').ib_bw / 1e9"),)),
    ("notebooks/6_7_cost_memory.md", "最大性能 {} TFLOP/s の約", (hw("chip('TPU v5e').flops / 1e12"),)),
    ("notebooks/6_7_cost_memory.md", "H100 の $C/W$ は {} TFLOP/s ÷ {} GB/s ≈ {} です",
     (hw("chip('H100 SXM').flops / 1e12"), hw("chip('H100 SXM').nvlink_oneway / 1e9"),
      hw("round(chip('H100 SXM').flops / chip('H100 SXM').axis_bw, -2)", "{:,.0f}"))),
    ("notebooks/6_7_cost_memory.md", "ここでは 2,240 ホスト × {} GB/s で求めます", (hw("chip('TPU v5p').dcn_bw_per_host / 1e9"),)),
    ("notebooks/6_10_inference.md", "HBM {} GB の TPU v5e では", (hw("chip('TPU v5e').hbm_bytes / 1e9"),)),
    ("notebooks/6_10_inference.md", "HBM の帯域（TPU v5e なら {} GB/s）", (V5E_HBM,)),
    ("notebooks/6_10_inference.md", "計算律速です（TPU v5e で {}）", (V5E_RIDGE,)),
    ("notebooks/6_11a_profile.md", "で、公表値 {} GB/s の 9 割前後です", (V5E_HBM,)),
    ("notebooks/6_11a_profile.md", "データシートの {} GB/s と、チップが実際に出せる帯域です", (V5E_HBM,)),
    ("notebooks/6_11a_profile.md", "チップが読める帯域は、公表値の {} % ほどです", (out(r"（公表値の (\d+)%）"),)),
    ("notebooks/6_11a_profile.md", "GB/s で、見積もりに使った公表値の {} GB/s より遅い帯域でした", (V5E_HBM,)),
    ("notebooks/6_11a_profile.md", "HBM は、`jnp.sum` で測った目安で公表値の {} % まで読めます", (out(r"（公表値の (\d+)%）"),)),
    ("notebooks/6_11a_profile.md", "差の 1 行目の {} ms は、",
     (out(r"公表値の帯域で読む時間 = (\d+\.\d+) ms"),)),
    ("notebooks/6_11b_overlap.md", "TPU v5e の一方向のしきい値 {} より狭いので", (out(r"^TPU v5e\s+一方向(?:\s+\S+){5}\s+([\d,]+)", "{:.0f}"),)),
    ("notebooks/6_11a_profile.md", "下限を超えた {} ms は、公表値と達成できる帯域の差 {} ms、重みの到着待ち {} ms、アテンションなどの融合 {} ms です",
     REMAINDER),
    ("notebooks/6_11a_profile.md", "残りの {} ms は、公表値と達成できる帯域の差 {} ms、重みの到着待ち {} ms、アテンションなどの融合 {} ms です",
     REMAINDER),
    ("notebooks/6_11b_overlap.md", "（TPU v5e で {} μs、TPU v5p で {} μs）",
     (out(r"^TPU v5e\s+双方向(?:\s+\S+){4}\s+(\d+\.\d)"), out(r"^TPU v5p\s+双方向(?:\s+\S+){4}\s+(\d+\.\d)"))),
    ("notebooks/6_11b_overlap.md", "双方向にすると帯域が 2 倍になり、しきい値は {} に下がって",
     (out(r"^TPU v5e\s+双方向(?:\s+\S+){5}\s+([\d,]+)", "{:.0f}"),)),
    ("notebooks/6_7_cost_memory.md", "HBM が {} GB の H200", (hw("chip('H200 SXM').hbm_bytes / 1e9"),)),
    ("notebooks/6_11a_profile.md", "デバイスの時間は 1.87 ms 短くなり、見積もりの {} ms の {} 倍です",
     (out(r"^見積もり: (\d+\.\d+) ms 短くなる"), out(r"（見積もりの (\d+\.\d) 倍）"))),
    ("notebooks/6_11b_overlap.md", "GPU 1 枚あたり片方向 {} GB/s の出口", (hw("chip('H100 SXM').nvlink_oneway / 1e9"),)),
    ("docs/workshop.md", "公表値の {} GB/s を使う", (V5E_HBM,)),
]

# numbers beside a hardware quantity that no row decides: (file, the words around the number, why)
OTHER: list[tuple[str, str, str]] = [
    ("notebooks/6_7_cost_memory.md", "H200 は 1,979 TFLOP/s",
     "NVIDIA のデータシートの疎性ありの値そのもの（行は密な値 989 TFLOP/s）"),
    ("notebooks/6_7_cost_memory.md", "リッジポイントが 228 より低い", "B = 256 の演算強度（チップの行ではない）"),
    ("notebooks/6_7_cost_memory.md", "TPU v5e で測ると約 165 TFLOP/s",
     "チップで測った値（docs/accelerator.md の記録）"),
    ("notebooks/6_11a_profile.md", "その帯域は 716 GB/s と 786 GB/s", "記録したトレースで測った帯域"),
    ("notebooks/6_11a_profile.md", "`convert_reduce_fusion` は 786 GB/s", "記録したトレースで測った帯域"),
    ("notebooks/6_11a_profile.md", "時間だけで割ると 757 GB/s", "記録したトレースで測った帯域"),
    ("notebooks/6_11a_profile.md", "重みを 757 GB/s で読み", "記録したトレースで測った帯域（4 節の出力）"),
    ("notebooks/6_11a_profile.md", "合わせた時間で割ると 684 GB/s", "記録したトレースで測った帯域"),
    ("notebooks/6_11a_profile.md", "減った時間で割ると 652 GB/s", "記録したトレースで測った帯域"),
    ("notebooks/6_11a_profile.md", "704 GB/s から 714 GB/s", "記録したトレースで測った帯域"),
]


def files() -> list[Path]:
    return sorted({p for pattern in FILES for p in ROOT.glob(pattern)})


def pattern(template: str) -> re.Pattern:
    return re.compile(NUM.join(re.escape(part) for part in template.split("{}")))


def _prose_lines(text: str):
    """(line number, line) of the prose: code cells (``` … ```) and HTML comments left out."""
    fenced = False
    for i, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced and not line.lstrip().startswith("<!--"):
            yield i, line


def entries():
    """(path, template, sources, the numbers now, the numbers in the file, line)."""
    for rel, template, sources in NUMBERS:
        path = ROOT / rel
        text = path.read_text(encoding="utf-8")
        found = list(pattern(template).finditer(text))
        if len(found) != 1:
            raise LookupError(f"{rel}: {len(found)} places read {template!r} (want 1: reword the entry with the prose)")
        line = text.count("\n", 0, found[0].start()) + 1
        yield path, template, sources, [s.value(path) for s in sources], list(found[0].groups()), line


def stale() -> list[str]:
    return [f"{p.relative_to(ROOT)}:{line}: {template.format(*have)} → {template.format(*want)}"
            for p, template, _, want, have, line in entries() if want != have]


def write() -> list[Path]:
    """Rewrite each stale number in its file; the files changed."""
    changed = {}
    for path, template, _, want, have, _ in entries():
        if want != have:
            text = changed.get(path, path.read_text(encoding="utf-8"))
            changed[path] = text.replace(template.format(*have), template.format(*want), 1)
    for path, text in changed.items():
        path.write_text(text, encoding="utf-8")
    return sorted(changed)


def unlisted() -> list[str]:
    """Numbers beside a hardware quantity that are in neither NUMBERS nor OTHER: file:line: the words."""
    covered: dict[Path, list[tuple[int, int]]] = {}
    for rel, template, _ in NUMBERS:
        text = (ROOT / rel).read_text(encoding="utf-8")
        covered.setdefault(ROOT / rel, []).extend(m.span() for m in pattern(template).finditer(text))
    for rel, words, _ in OTHER:
        text = (ROOT / rel).read_text(encoding="utf-8")
        start = text.find(words)
        if start >= 0:
            covered.setdefault(ROOT / rel, []).append((start, start + len(words)))
    missing = []
    for path in files():
        text = path.read_text(encoding="utf-8")
        offsets = [0]
        for line in text.splitlines(keepends=True):
            offsets.append(offsets[-1] + len(line))
        for i, line in _prose_lines(text):
            for rx in CANDIDATES:
                for m in rx.finditer(line):
                    at = offsets[i - 1] + m.start(1)
                    if not any(a <= at < b for a, b in covered.get(path, [])):
                        missing.append(f"{path.relative_to(ROOT)}:{i}: {m.group(0)}")
    return sorted(set(missing))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 naming each number that differs")
    ap.add_argument("--write", action="store_true", help="rewrite the numbers that differ")
    args = ap.parse_args(argv)
    if args.write:
        for path in write():
            print(f"{path.relative_to(ROOT)}: numbers rewritten from ch6.hardware / its outputs")
        return 0
    if args.check:
        lines = stale()
        print("\n".join(lines) or "every number in prose is as ch6.hardware and the outputs say")
        return 1 if lines else 0
    for p, template, _, want, _, line in entries():
        print(f"{p.relative_to(ROOT)}:{line}: {template.format(*want)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
