#!/usr/bin/env python3
"""著者の手順を 1 つのコマンドにしたもの（Makefile の make notebook / make exercise が呼ぶ）。

    python tools/recipe.py notebook 6_2_pmap   # 双子を揃え、変わったノートブックだけ実行し直し、演習と採点データを作り直す
    python tools/recipe.py exercise 6_2_pmap   # 上に加えて、提出が判定されるもの: ruff、用語の検査、その節のチェックの
                                               # ミューテーション、その節のチェックの単体テスト（デバイス 1, 2, 3, 8）、
                                               # 意地悪な値、速い採点・一貫性のテスト
    python tools/recipe.py exercise 6_2_pmap --all   # 変わっていなくてもレッスンと解答を実行し直す
    python tools/recipe.py depends ch6/lm.py         # ch6/lm.py に（間接にも）依存するノートブックを表示する
    python tools/recipe.py depends ch6/lm.py --run   # それらを実行し直す（演習と採点データも作り直す）

NB はノートブックの名前（拡張子なし）。.md と .ipynb のどちらを編集してもかまいません
（新しいほうを正として揃えます: tools/twins.py）。

実行し直すのは、前に実行したときから変わったノートブックだけです: セルのソース（解答はその節のチェック
``ch6/checks/s6_N/`` と ``ch6/checking.py`` も）が、最後にこの手順で実行したとき（``build/recipe/``）か、
それがなければ HEAD のものと違うとき。解答だけを直したならレッスンは実行しません。実行し直したノートブックでも、
``nbval-ignore-output`` の付いたセル（時間を測るセル）のソースがすべて HEAD と同じなら、その出力は HEAD のものに戻すので
（1 つでも変わったら、どれも戻さず、すべて同じ実行の値にします）、
``git status`` には著者が変えたものとその結果だけが出ます。最後に、この手順が著者の変更のほかに変えた
ファイルがあれば名前を挙げて失敗します。段ごとの秒数を最後に表にします。
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nbinputs  # (何が出力を決めるか・台帳: twins.py と共用。twins.py はこのファイルを読み込まない)
from nbinputs import cell_sources, section_of

ROOT = nbinputs.ROOT
PY = sys.executable
CHECK_DEVICES = (1, 2, 3, 8)
STAMPS = ROOT / "build" / "recipe"
JOBS = os.environ.get("JOBS", "2")
# 提出が判定される速いテスト（カーネルを起動せず、チェックもコンパイルしない）: 採点、一貫性、双子、公開 API、用語、
# 先生向けの手引き（演習ごとのつまずきの行）、チェックの登録、サイトの演習のページ。make quick のテストのうち
# 演習（solutions/、exercises/、チェックの登録、手引き）を読むものは、すべてここにある（tests/tools/test_new_exercise.py）
FAST_TESTS = ("tests/grading", "tests/test_consistency.py", "tests/tools", "tests/test_public_api.py",
              "tests/test_glossary.py", "tests/test_glossary_wording.py", "tests/test_references.py",
              "tests/test_workshop_guide.py", "tests/test_core.py", "tests/site/test_site_unit.py")
Step = tuple[str, "list[str] | Callable[[], int]"]


def exercise_prefix(name: str) -> str:
    """"6_1_vmap" -> "6.1-"（"-k 6.1-" は 6.1-1, 6.1-2 … を選び、6.10-1 は選ばない）。"""
    major, minor = name.split("_")[:2]
    return f"{major}.{minor}-"


# ------------------------------------------------------------------ 何が変わったか

def _git(*args: str) -> str:
    p = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    return p.stdout if p.returncode == 0 else ""


def _head_bytes(rel: str) -> bytes | None:
    p = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=ROOT, capture_output=True)
    return p.stdout if p.returncode == 0 else None


def fingerprint(nb: Path, *, head: bool = False) -> str | None:
    """nb のソースと、出力を決めるファイル（データのファイルも、中身のバイト列で）のハッシュ
    （head=True なら HEAD の版。HEAD になければ None）。"""
    def read(p: Path) -> bytes | None:
        if head:
            return _head_bytes(p.relative_to(ROOT).as_posix())
        return p.read_bytes() if p.exists() else None

    text = read(nb)
    if text is None:
        return None
    h = hashlib.sha256(json.dumps(cell_sources(text.decode("utf-8")), ensure_ascii=False).encode())
    for p in nbinputs.inputs(nb):
        h.update(p.relative_to(ROOT).as_posix().encode() + b"\0" + (read(p) or b""))
    return h.hexdigest()


def _stamp(nb: Path) -> Path:
    return STAMPS / f"{nb.parent.name}.{nb.stem}.sha256"


def write_stamp(nb: Path) -> None:
    """この手順で実行したときの印（入力の数え方の版つき: 数え方が変わった古い印は使わず、HEAD と比べる）。"""
    STAMPS.mkdir(parents=True, exist_ok=True)
    _stamp(nb).write_text(f"{nbinputs.RESOLVER}:{fingerprint(nb)}\n")


def needs_execution(nb: Path) -> bool:
    """前に実行したとき（この手順の印、なければ HEAD）からソースか入力が変わったか。"""
    stamp = _stamp(nb).read_text().strip() if _stamp(nb).exists() else ""
    version, _, last = stamp.rpartition(":")
    if version != nbinputs.RESOLVER:
        last = fingerprint(nb, head=True)
    return last is None or fingerprint(nb) != last


def keep_head_outputs(nb_path: Path) -> int:
    """nbval-ignore-output のセルで、ソースが HEAD と同じものは HEAD の出力に戻す（戻したセルの数）。"""
    import nbformat

    from ch6 import nbrun

    text = _git("show", f"HEAD:{nb_path.relative_to(ROOT).as_posix()}")
    if not text:
        return 0
    head = {(c.get("id"), c["source"] if isinstance(c["source"], str) else "".join(c["source"])): c
            for c in json.loads(text)["cells"] if c["cell_type"] == "code"}
    nb = nbrun.read(nb_path)
    timed = [c for c in nb.cells if c.cell_type == "code" and "nbval-ignore-output" in c.metadata.get("tags", [])]
    olds = [head.get((cell.get("id"), cell.source)) for cell in timed]
    if any(old is None for old in olds):
        # 1 つでもソースが変わった（または新しい）なら、どのセルも戻さない: 測った値はすべて同じ 1 回の実行から
        # （片方だけ戻すと、表と、その表から求めた比が別々の実行の値になる。6.1 の 0.88 と 0.96 の食い違い）
        return 0
    kept = 0
    for cell, old in zip(timed, olds):
        if old["outputs"] != json.loads(json.dumps(cell.outputs)):
            cell.outputs = nbformat.from_dict(old["outputs"])
            kept += 1
    if kept:
        nbrun.write(nb, nb_path)
    return kept


def sync_and_execute(paired: list[Path], force: bool) -> int:
    """双子を揃え（tools/twins.py）、変わったノートブックだけ実行し直す。解答を実行したら演習と採点データも。"""
    sys.path.insert(0, str(ROOT / "tools"))
    import twins

    executed = []
    for nb in paired:
        twins.sync(nb)
        rel = nb.relative_to(ROOT)
        if not (force or needs_execution(nb)):
            print(f"{rel}: unchanged since it was last executed, not re-executed", flush=True)
            continue
        print(f"{rel}: executed in {twins.execute(nb, 8):.1f} s", flush=True)
        kept = keep_head_outputs(nb)
        if kept:
            twins.write_twins(nb)
            print(f"{rel}: {kept} nbval-ignore-output cell(s) unchanged in source keep HEAD's outputs")
        write_stamp(nb)
        executed.append(nb)
    solutions = [nb for nb in executed if nb.parent.name == "solutions"]
    if solutions:
        return subprocess.call([PY, "tools/make_exercises.py", *map(str, solutions)], cwd=ROOT)
    return 0


# ------------------------------------------------------------------ 手順

def steps(kind: str, name: str, force: bool = False) -> list[Step]:
    lesson, solution = ROOT / "notebooks" / f"{name}.ipynb", ROOT / "solutions" / f"{name}.ipynb"
    paired = [p for p in (lesson, solution) if p.exists() or p.with_suffix(".md").exists()]
    if not paired:
        raise SystemExit(f"{name}: neither notebooks/{name}.ipynb nor solutions/{name}.ipynb exists")
    out: list[Step] = [("sync + execute what changed", lambda: sync_and_execute(paired, force))]
    if solution in paired:
        out.append(("exercises up to date", [PY, "tools/make_exercises.py", "--check"]))
    # 先生向けの手引きの時間の表（文字数・セル数・解答の行数から数える）を書き直す（tests/test_workshop_guide.py）
    out.append(("workshop guide's time tables", [PY, "docs/workshop_times.py", "--write"]))
    if kind == "notebook":
        return out
    out.append(("ruff", [PY, "-m", "ruff", "check", "--quiet", "."]))
    checks = ROOT / "ch6" / "checks" / section_of(name)  # その節のチェックのメッセージも学習者が読む
    out.append(("glossary scan", [PY, "-m", "ch6.glossary", "--scan", *map(str, paired),
                                  *([str(checks)] if checks.is_dir() else [])]))
    if solution in paired:
        out.append(("mutation", [PY, "tools/mutate.py", str(solution), "--min-score", "0.95"]))
        tests = ROOT / "tests" / "checks" / section_of(name)
        if tests.exists():
            for n in CHECK_DEVICES:
                out.append((f"check tests, {n} device(s)",
                            [PY, "-m", "pytest", "-q", "-p", "no:xdist", "--devices", str(n), str(tests)]))
        else:
            out.append(("check tests", [PY, "-c", f"raise SystemExit('no tests in {tests.relative_to(ROOT)}')"]))
        out.append(("hostile values", [PY, "-m", "pytest", "-q", "-p", "no:xdist",
                                       "tests/checks/test_hostile.py", "-k", exercise_prefix(name)]))
    out.append(("grading + consistency tests", [PY, "-m", "pytest", "-q", "-n", JOBS, "-m",
                                                "not slow and not section", *FAST_TESTS]))
    return out


def changed_files() -> set[str]:
    """git status の行（作業ツリーで変わったファイル、追跡していないファイル）。"""
    return {line[3:] for line in _git("status", "--porcelain", "--untracked-files=all").splitlines()}


def expected_outputs(name: str) -> set[str]:
    """この手順が書いてよいファイル: 実行したノートブックとその双子、演習ノートブック、採点データ、手引きの時間の表、
    実行の記録（tools/executed_inputs.json: 実行したノートブックの入力のハッシュ）。"""
    out = {"ch6/grading/exercises.json", f"exercises/{name}.ipynb", "docs/workshop.md", "tools/executed_inputs.json"}
    for folder in ("notebooks", "solutions"):
        out |= {f"{folder}/{name}{suffix}" for suffix in (".ipynb", ".md", ".outputs.txt")}
    return out


def _targets(module: str) -> set[Path]:
    """MOD= の指すファイル: パス（拡張子は何でも: ch6/nbval_sanitize.cfg、ch6/capstone/corpus.txt）、フォルダ
    （ch6/capstone、ch6/data/traces: その下のすべてのファイル）、またはモジュールの名前（ch6.lm）。"""
    path = (ROOT / module).resolve()
    if not path.exists() and not module.endswith(".py") and "/" not in module:
        path = (ROOT / module.replace(".", "/")).resolve()
        path = path if path.is_dir() else path.with_suffix(".py")
    if path.is_dir():
        return {p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    if not path.is_file():
        raise SystemExit(f"{module}: no such module or file under {ROOT.name}/")
    return {path}


def dependents(module: str) -> list[Path]:
    """module（"ch6/lm.py"、"ch6.lm"、"ch6/capstone"、"ch6/nbval_sanitize.cfg" のどれでも）に依存するノートブック
    （notebooks/ と solutions/ の .ipynb）: 直接または間接に（相対の import も）読み込むか、読み込んだモジュールが
    そのデータのファイルを読むもの。解答はその節のチェックも入力。make notebook と同じ nbinputs.inputs で数える。"""
    wanted = _targets(module)
    out = []
    for folder in ("notebooks", "solutions"):
        for nb in sorted((ROOT / folder).glob("*.ipynb")):
            if wanted & {p.resolve() for p in nbinputs.inputs(nb)}:
                out.append(nb)
    return out


def depends(module: str, run: bool) -> int:
    """make depends MOD=…: module に依存するノートブックを表示し、run なら変わっていなくても実行し直す。"""
    found = dependents(module)
    for nb in found:
        print(nb.relative_to(ROOT).as_posix())
    if not found:
        print(f"no notebook depends on {module}")
    if not run or not found:
        return 0
    return sync_and_execute(found, force=True) or prose_numbers(found) or \
        subprocess.call([PY, "docs/workshop_times.py", "--write"], cwd=ROOT)   # 本文が変わった本編の時間の表も


def _code_cells(nb: Path) -> list:
    """nb のコードのセル（ソースとタグ）。"""
    return [c for c in nbinputs.cell_sources(nb.read_text(encoding="utf-8")) if c[0] == "code"] if nb.exists() else []


def restamp_after_sync(executed: list[Path], sync: Callable[[Path], bool]) -> None:
    """実行したノートブックの双子を揃え、本文だけが変わったものに印を付け直す。実行の後で MyST の側のコードが
    直されていたら（sync がそれを持ち込んだら）印を付けず、次の make notebook が実行し直す。"""
    for nb in executed:
        code = _code_cells(nb)
        if sync(nb) and _code_cells(nb) == code:
            write_stamp(nb)


def prose_numbers(executed: list[Path]) -> int:
    """本文の数（データシートの行や出力が決めるもの: tools/prose_numbers.py）を書き直し、本文が変わった
    ノートブックの双子を揃えて印を付け直す（コードは変わらないので実行し直さない）。"""
    rc = subprocess.call([PY, "tools/prose_numbers.py", "--write"], cwd=ROOT)
    if rc:
        return rc
    sys.path.insert(0, str(ROOT / "tools"))
    import twins

    restamp_after_sync(executed, twins.sync)
    return subprocess.call([PY, "tools/prose_numbers.py", "--check"], cwd=ROOT, stdout=subprocess.DEVNULL)


def own_checkout() -> None:
    """手順の段（カーネル、python tools/….py、python -m …）が読み込む ch6 が、このチェックアウトのものか。"""
    sys.path.insert(0, str(ROOT))
    from ch6 import nbrun

    try:
        nbrun.check_own_ch6(ROOT)
    except nbrun.OtherCheckout as err:
        raise SystemExit(f"recipe: {err}") from None


def main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["depends"]:
        dp = argparse.ArgumentParser(prog="recipe.py depends",
                                     description="ch6 のモジュールに依存するノートブックを表示する（--run で実行し直す）")
        dp.add_argument("module", help="例: ch6/lm.py、ch6.serving、ch6/capstone")
        dp.add_argument("--run", action="store_true", help="表示したノートブックを実行し直し、演習も作り直す")
        a = dp.parse_args(argv[1:])
        if a.run:
            own_checkout()
        return depends(a.module, a.run)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=("notebook", "exercise"))
    ap.add_argument("name", help="例: 6_2_pmap")
    ap.add_argument("--all", action="store_true", help="変わっていないノートブックも実行し直す")
    args = ap.parse_args(argv)
    name = Path(args.name).stem.removesuffix(".outputs")
    own_checkout()
    before = changed_files()
    rows, failed = [], None
    for label, cmd in steps(args.kind, name, args.all):
        shown = "(in process)" if callable(cmd) else " ".join(Path(c).name if c == PY else c for c in cmd)
        print(f"::: {label}: {shown}", flush=True)
        start = time.perf_counter()
        rc = cmd() if callable(cmd) else subprocess.call(cmd, cwd=ROOT)
        rows.append(f"{label:28s} {time.perf_counter() - start:6.1f} s  {'ok' if rc == 0 else 'FAILED'}")
        if rc != 0:
            failed = label
            break
    stray = sorted(changed_files() - before - expected_outputs(name))
    if stray and not failed:
        failed = "git status"
        rows.append(f"{'git status':28s} {'':6s}    FAILED: changed while the recipe ran, and not by the recipe's "
                    f"steps' own outputs: {', '.join(stray)} (another process, or a step that left a file behind)")
    print("::: seconds per step")
    print("\n".join(rows))
    if failed:
        print(f"stopped at: {failed}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
