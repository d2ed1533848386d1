#!/usr/bin/env python3
"""solutions/*.ipynb から exercises/*.ipynb を作る（手で編集しないこと）。

- コードセルの ``### BEGIN SOLUTION`` 〜 ``### END SOLUTION`` を
  ``# TODO`` と ``raise NotImplementedError`` に置き換える（nbgrader と同じ印）。
  解答ブロックは関数の本体の中に置く決まりです（トップレベルは拒否）。
- マークダウンの ``<!-- BEGIN SOLUTION -->`` 〜 ``<!-- END SOLUTION -->`` は取り除く。
- 作った演習ノートブックを実行して、出力を保存する。
- 採点用のデータ ``ch6/grading/exercises.json`` も exercises/ から作り直す（``--check`` はそのずれも見る）。

使い方::

    python tools/make_exercises.py            # すべて作り直して実行
    python tools/make_exercises.py --check    # exercises/ が solutions/ と食い違えば失敗
"""
from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ch6 import nbrun  # noqa: E402
from ch6.grading import exercises as grading_data  # noqa: E402

sys.path.insert(0, str(ROOT / "tools"))
import nbtemplate  # noqa: E402

BEGIN = re.compile(r"^(?P<indent>[ \t]*)### BEGIN SOLUTION\s*$")
END = re.compile(r"^[ \t]*### END SOLUTION\s*$")
MD_BLOCK = re.compile(r"<!-- BEGIN SOLUTION -->.*?<!-- END SOLUTION -->\n?", re.S)
TODO = "# TODO: ここにコードを書いてください"


class MarkerError(ValueError):
    pass


def strip_code(source: str, where: str = "") -> str:
    out, inside, indent = [], False, ""
    for n, line in enumerate(source.splitlines(), 1):
        m = BEGIN.match(line)
        if m:
            if inside:
                raise MarkerError(f"{where} line {n}: BEGIN SOLUTION inside another solution block")
            indent = m.group("indent")
            if not indent:
                raise MarkerError(f"{where} line {n}: a solution block must be inside a function body")
            inside = True
            out += [f"{indent}{TODO}", f"{indent}raise NotImplementedError"]
        elif END.match(line):
            if not inside:
                raise MarkerError(f"{where} line {n}: END SOLUTION without BEGIN")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise MarkerError(f"{where}: BEGIN SOLUTION is never closed")
    return "\n".join(out)


def to_exercise(solution, relpath: str | None = None):
    """解答つきノートブック -> 出力なしの演習ノートブック（まだ実行していない）。
    relpath（例 "exercises/6_1_vmap.ipynb"）を渡すと Colab バッジをそのファイルへ向け直す。"""
    nb = copy.deepcopy(solution)
    nb.metadata.pop("jupytext", None)  # 演習は生成物なので MyST の双子を持たない
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            cell.source = strip_code(cell.source, f"cell {i}")
            cell.outputs, cell.execution_count = [], None
        elif cell.cell_type == "markdown":
            cell.source = MD_BLOCK.sub("", cell.source)
            if relpath:
                cell.source = nbtemplate.BADGE.sub(lambda m: nbtemplate.badge(relpath), cell.source)
    return nb


def signature(nb):
    """比較用: セルの種類・ソース・タグだけ（出力は nbval が確かめる）。"""
    return [(c.cell_type, c.source, tuple(c.metadata.get("tags", []))) for c in nb.cells]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="solutions/ のノートブック（省略時はすべて）")
    ap.add_argument("--check", action="store_true", help="書かずに、exercises/ が最新かだけ確かめる")
    ap.add_argument("--devices", type=int, default=nbrun.DEFAULT_DEVICES)
    args = ap.parse_args(argv)

    sols = [Path(n) for n in args.names] or sorted((ROOT / "solutions").glob("*.ipynb"))
    stale = []
    for sol in sols:
        target = ROOT / "exercises" / sol.name
        try:
            ex = to_exercise(nbrun.read(sol), f"exercises/{sol.name}")
        except MarkerError as err:
            print(f"{sol.name}: {err}")
            return 1
        if args.check:
            if not target.exists() or signature(nbrun.read(target)) != signature(ex):
                stale.append(sol.name)
            elif any(c.cell_type == "code" and c.source.strip() and c.execution_count is None
                     for c in nbrun.read(target).cells):
                stale.append(f"{sol.name} (not executed)")
            continue
        nbrun.check_own_ch6(ROOT, cwd=target.parent, env=nbrun.kernel_env(args.devices))
        ex, secs = nbrun.execute(ex, cwd=target.parent, devices=args.devices)
        nbrun.write(ex, target)
        print(f"exercises/{sol.name}: {secs:.1f} s")
    # 採点が知っていること（ch6/grading/exercises.json）も exercises/ から作り直す
    data_args = ["--check"] if args.check else []
    if grading_data.main(data_args + [str(ROOT / "exercises")]) != 0:
        stale.append("ch6/grading/exercises.json")
    if stale:
        print("exercises/ is out of date for: " + ", ".join(stale))
        print("run: make exercises")
        return 1
    if args.check:
        print(f"exercises/ is up to date ({len(sols)} notebook(s)), and so is ch6/grading/exercises.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
