#!/usr/bin/env python3
"""チェックのミューテーションテスト: 解答例を少しずつ壊した「変異体」を作り、チェックが見抜くかを数える。

solutions/ の各ノートブックのコードセルを 1 つの名前空間で上から実行し（``ch6.check`` は何もしない）、
``### BEGIN SOLUTION`` の入ったセルごとに、解答ブロックの中（と、解答を持つ関数の引数の既定値）を
変異の演算子（``OPERATORS``）で 1 か所ずつ変えます。演算子の一覧は ``python tools/mutate.py --operators``。
演算子は 2 種類です。

- 値を壊す演算子: 軸、集団通信の取り違え、範囲と添字の off-by-one、切り詰めの境目、spec、向き、答えの記号、
  返す真偽、絶対値の書き忘れ、1 回で抜けるループ、小さな上限で打ち切る探索 …
- 値を保ったまま、演習が教える「手段」だけを変える演算子: 集団通信を別の通信で作る（psum → all_gather + 和、
  psum_scatter → psum + 切り出し、ppermute → all_gather + 添字 …）、vmap / scan を Python のループや lax.map に、
  jit を呼ぶたびに作り直す・引数を静的にする。手段を確かめないチェックは、これらを見逃します。

変異体をセルごと実行して、登録されたチェック（``ch6.run_check``）に渡します。✅ 以外なら「見抜いた」。
見抜けなくても正しい変異体（等価変異体）は ``tools/mutants_equivalent.txt`` に理由つきで書きます。
スコア = 見抜いた数 / (全体 − 等価)。表は演習ごとに「見抜いた数 / 数えた変異体の数」を示します。
変異体が MIN_MUTANTS（5）より少ない演習は、演算子を足すか、同じファイルに「演習 | (few mutants) | 理由」と書きます。

    python tools/mutate.py                  # すべての解答ノートブック（表とスコアを表示）
    python tools/mutate.py solutions/6_1_vmap.ipynb --min-score 0.95
    python tools/mutate.py --operators      # 演算子の一覧（名前、節の種類、説明）
    python tools/mutate.py solutions/6_3b_shard_map.ipynb --exercise 6.3b-2 --verbose   # 1 つの演習の変異体だけ
    python tools/mutate.py solutions/6_3b_shard_map.ipynb --fewer   # 8 で見抜いた変異体を 3 と 1 デバイスでも試す
    python tools/mutate.py solutions/6_2_pmap.ipynb --devices 3     # 3 デバイスで（JAX を読み込む前に設定）

8 デバイスで見抜いた変異体が少ないデバイスで生き残ってよいのは、そのときの ✅ の行が ``ch6.checking.cannot_tell``
の句（``CANNOT_TELL``）で確かめられないと断るときか、等価の表に「演習 @数」で書いたときだけです。

演算子を足すには、tools/mutation/value_operators.py（値を壊す）か means_operators.py（値を保って手段を変える）に
``@operator(節の型)`` をつけた関数を 1 つ書きます（CONTRIBUTING.md）。
コードはパッケージ tools/mutation/ にあり（1 つのモジュールに 1 つの仕事: その __init__.py）、ここはコマンドの入口です。
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

from mutation import ROOT
from mutation.mutants import mutants, mutants_by_operator
from mutation.operators import OPERATORS, Context, Operator, operator, operator_table
from mutation.report import (
    MEANS_OPERATORS,
    MIN_MUTANTS,
    Survivor,
    fewer_devices_report,
    fewer_devices_survivors,
    means_survivors,
    per_exercise,
    report,
    score,
    too_few,
    weak_exercises,
)
from mutation.run import FEWER_DEVICES, Outcome, code_cells, run_at, run_at_counts, run_notebook
from mutation.runtime import (
    RUNTIME,
    all_gather_by_psum,
    all_to_all_by_all_gather,
    loop_scan,
    loop_vmap,
    map_vmap,
    pmax_by_all_gather,
    pmean_by_all_gather,
    ppermute_by_all_gather,
    psum_by_all_gather,
    psum_scatter_by_all_gather,
    psum_scatter_by_psum,
    rejit_each_call,
)
from mutation.table import (
    EQUIVALENT_FILE,
    FEW,
    SCORE_DEVICES,
    load_equivalent,
    load_equivalent_at_fewer,
    load_few,
)

# import mutate（tests/tools/、tools/recipe.py）で使う公開名
__all__ = [
    "EQUIVALENT_FILE", "FEW", "FEWER_DEVICES", "MEANS_OPERATORS", "MIN_MUTANTS", "OPERATORS", "ROOT", "RUNTIME", "SCORE_DEVICES",
    "Context", "Operator", "Outcome", "Survivor", "all_gather_by_psum", "all_to_all_by_all_gather", "code_cells",
    "fewer_devices_report", "fewer_devices_survivors", "load_equivalent", "load_equivalent_at_fewer", "load_few",
    "loop_scan", "means_survivors", "loop_vmap", "main", "map_vmap", "mutants", "mutants_by_operator", "operator", "operator_table",
    "per_exercise", "pmax_by_all_gather", "pmean_by_all_gather", "ppermute_by_all_gather", "psum_by_all_gather",
    "psum_scatter_by_all_gather", "psum_scatter_by_psum", "rejit_each_call", "report", "run_at", "run_at_counts",
    "run_notebook", "score", "too_few", "weak_exercises",
]


def main(argv=None) -> int:
    import json

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--min-score", type=float, default=0.95)
    ap.add_argument("--operators", action="store_true", help="print the operator table and exit")
    ap.add_argument("--verbose", action="store_true", help="print every mutant's status and the check's message")
    ap.add_argument("--exercise", action="append", help="only this exercise's mutants (repeatable), e.g. 6.3b-2")
    ap.add_argument("--devices", type=int, help="simulated CPU devices (JAX_NUM_CPU_DEVICES; default: the setup's 8)")
    ap.add_argument("--fewer", action="store_true",
                    help=f"then try the mutants killed here again at {', '.join(map(str, FEWER_DEVICES))} devices "
                         "(one process per count) and report the survivors by exercise")
    ap.add_argument("--only", type=Path, help="a JSON list of [exercise, label]: only those mutants (no score)")
    ap.add_argument("--json", type=Path, help="write every outcome to this JSON file")
    args = ap.parse_args(argv)
    if args.operators:
        print(operator_table())
        return 0
    if args.devices:  # JAX を読み込む前に（ノートブックの ch6.setup() は setdefault なので、これが勝つ）
        os.environ["JAX_NUM_CPU_DEVICES"] = str(args.devices)
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    paths = [Path(p) for p in args.paths] or sorted((ROOT / "solutions").glob("*.ipynb"))
    only = {tuple(pair) for pair in json.loads(args.only.read_text(encoding="utf-8"))} if args.only else None
    exercises = set(args.exercise) if args.exercise else None
    outcomes = []
    for p in paths:
        start = time.perf_counter()
        outcomes += run_notebook(p, only=only, exercises=exercises)
        print(f"{p.name}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(o) for o in outcomes], ensure_ascii=False),
                             encoding="utf-8")
    if args.verbose:
        for o in outcomes:
            print(f"{o.exercise:8s} {o.status:7s} {o.operator:22s} {o.label} :: {o.message[:150]}")
    if only is not None:  # 選んだ変異体だけ: スコアは数えない
        return 0
    print(report(outcomes))
    rc = 0
    if args.fewer:
        killed = {(o.exercise, o.label) for o in outcomes if o.killed and o.status != "broken"}
        start = time.perf_counter()
        at = run_at_counts(FEWER_DEVICES, paths, killed)
        print(f"fewer devices: {time.perf_counter() - start:.1f} s", file=sys.stderr)
        survivors = fewer_devices_survivors(at)
        print(fewer_devices_report(len(killed), at, survivors))
        rc = int(any(not s.explained for s in survivors))
    weak = weak_exercises(outcomes, args.min_score)
    if weak:
        print(f"exercises below {args.min_score:.0%} on their own: "
              + ", ".join(f"{ex} {s:.0%}" for ex, s in weak.items()), file=sys.stderr)
    means = means_survivors(outcomes)
    for o in means:  # 手段を指定する演習の、手段だけを変えた変異体（MEANS_OPERATORS）の生き残り
        print(f"{o.exercise}: the means changed and the check said ✅ ({o.operator}: {o.label}); strengthen the "
              "check, or list it in tools/mutants_equivalent.txt where the statement leaves the means free", file=sys.stderr)
    return rc or (0 if score(outcomes)[3] >= args.min_score and not too_few(outcomes) and not weak and not means else 1)


if __name__ == "__main__":
    sys.exit(main())
