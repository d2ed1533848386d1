#!/usr/bin/env python3
"""ノートブックを新しいカーネルで実行し、1 冊ごとの秒数と合計を表にする（ベンチマーク）。

    python tools/run_notebooks.py                      # すべて実行して時間を測る（書き込まない）
    python tools/run_notebooks.py --write notebooks/6_1_vmap.ipynb   # 出力を更新して保存
    python tools/run_notebooks.py --devices 2          # 模擬デバイス 2 個で実行

exercises/ の出力更新は tools/make_exercises.py が行います（--write は exercises/ を拒否）。
--write は notebooks/ と solutions/ の MyST の双子（X.md と X.outputs.txt、tools/twins.py）も書き直します。
.md を編集したときは、先に tools/twins.py（make sync）で .ipynb へ反映してください。
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ch6 import nbrun  # noqa: E402

sys.path.insert(0, str(ROOT / "tools"))
import twins  # noqa: E402

FOLDERS = ("notebooks", "solutions", "exercises")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", help="ノートブックまたはフォルダ（省略時は 3 フォルダすべて）")
    ap.add_argument("--write", action="store_true", help="実行結果をノートブックに保存する")
    ap.add_argument("--devices", type=int, default=nbrun.DEFAULT_DEVICES)
    args = ap.parse_args(argv)

    paths = []
    for p in [Path(p) for p in args.paths] or [ROOT / f for f in FOLDERS]:
        paths += sorted(p.glob("*.ipynb")) if p.is_dir() else [p]
    if args.write and any(p.resolve().parent.name == "exercises" for p in paths):
        print("exercises/ is generated: use tools/make_exercises.py")
        return 2

    rows, failed, start = [], 0, time.perf_counter()
    for path in paths:
        nb = nbrun.read(path)
        try:
            nbrun.check_own_ch6(ROOT, cwd=path.parent, env=nbrun.kernel_env(args.devices))
            nb, secs = nbrun.execute(nb, cwd=path.parent, devices=args.devices)
            status = "ok"
        except Exception as err:  # 実行エラーは表に書いて続ける
            secs, status, failed = float("nan"), f"FAILED: {type(err).__name__}", failed + 1
        else:
            if args.write:
                paired = path.resolve().parent.name in twins.PAIRED
                if paired:  # MyST の双子（.md と .outputs.txt）も書き直す
                    twins.pair_metadata(nb)
                nbrun.write(nb, path)
                if paired:
                    twins.write_twins(path)
        rel = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
        rows.append((str(rel), secs, status))
        print(f"{str(rel):40s} {secs:7.1f} s  {status}", flush=True)
    total = time.perf_counter() - start
    print("-" * 60)
    print(f"{'total (' + str(len(rows)) + ' notebooks, ' + str(args.devices) + ' devices)':40s} {total:7.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
