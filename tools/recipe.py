#!/usr/bin/env python3
"""著者の手順を 1 つのコマンドにしたもの（Makefile の make notebook / make exercise が呼ぶ）。

    python tools/recipe.py notebook 6_2_pmap   # 双子を揃え、レッスンと解答を実行し直し、演習と採点データを作り直す
    python tools/recipe.py exercise 6_2_pmap   # 上に加えて、用語の検査、その節のチェックのミューテーション、
                                               # その節のチェックの単体テスト（デバイス 1, 2, 3, 8）

NB はノートブックの名前（拡張子なし）。.md と .ipynb のどちらを編集してもかまいません
（新しいほうを正として揃えます: tools/twins.py）。段ごとの秒数を最後に表にします。
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
CHECK_DEVICES = (1, 2, 3, 8)


def section_of(name: str) -> str:
    """"6_3a_sharding" -> "s6_3a"（ch6/checks と tests/checks のフォルダ名）。"""
    m = re.match(r"^(\d+)_(\d+[a-z]?)_", name)
    if not m:
        raise SystemExit(f"{name}: a notebook name looks like 6_2_pmap")
    return f"s{m.group(1)}_{m.group(2)}"


def steps(kind: str, name: str) -> list[tuple[str, list[str]]]:
    lesson, solution = ROOT / "notebooks" / f"{name}.ipynb", ROOT / "solutions" / f"{name}.ipynb"
    paired = [p for p in (lesson, solution) if p.exists() or p.with_suffix(".md").exists()]
    if not paired:
        raise SystemExit(f"{name}: neither notebooks/{name}.ipynb nor solutions/{name}.ipynb exists")
    out = [("sync + execute", [PY, "tools/twins.py", "--execute-all", *map(str, paired)])]
    if solution in paired:
        # twins.py は実行した解答から exercises/ と採点データも作り直す
        out.append(("exercises up to date", [PY, "tools/make_exercises.py", "--check"]))
    if kind == "notebook":
        return out
    out.append(("glossary scan", [PY, "-m", "ch6.glossary", "--scan", *map(str, paired)]))
    if solution in paired:
        out.append(("mutation", [PY, "tools/mutate.py", str(solution), "--min-score", "0.95"]))
        tests = ROOT / "tests" / "checks" / section_of(name)
        if tests.exists():
            for n in CHECK_DEVICES:
                out.append((f"check tests, {n} device(s)",
                            [PY, "-m", "pytest", "-q", "-p", "no:xdist", "--devices", str(n), str(tests)]))
        else:
            out.append(("check tests", [PY, "-c", f"raise SystemExit('no tests in {tests.relative_to(ROOT)}')"]))
        # "-k 6.1-" (with the dash) selects 6.1-1, 6.1-2, … and not 6.10-1 (a two-digit section number)
        out.append(("hostile values", [PY, "-m", "pytest", "-q", "-p", "no:xdist",
                                       "tests/checks/test_hostile.py", "-k", name.split("_")[0] + "." +
                                       name.split("_")[1] + "-"]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=("notebook", "exercise"))
    ap.add_argument("name", help="例: 6_2_pmap")
    args = ap.parse_args(argv)
    name = Path(args.name).stem.removesuffix(".outputs")
    rows, failed = [], None
    for label, cmd in steps(args.kind, name):
        print(f"::: {label}: {' '.join(Path(c).name if c == PY else c for c in cmd)}", flush=True)
        start = time.perf_counter()
        rc = subprocess.call(cmd, cwd=ROOT)
        rows.append(f"{label:28s} {time.perf_counter() - start:6.1f} s  {'ok' if rc == 0 else 'FAILED'}")
        if rc != 0:
            failed = label
            break
    print("::: seconds per step")
    print("\n".join(rows))
    if failed:
        print(f"stopped at: {failed}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
