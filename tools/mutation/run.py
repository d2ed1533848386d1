"""変異体をチェックに通す: 解答ノートブック 1 冊をこのプロセスで 1 度だけ実行し、セルごとの変異体を
``ch6.run_check`` に渡す（``run_notebook``）。少ないデバイスでは、デバイスの数ごとに子プロセスで
``tools/mutate.py --devices n`` を起動する（``run_at_counts``）。"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from . import ROOT
from .mutants import mutants_with_lines
from .runtime import RUNTIME
from .table import load_equivalent

SCRIPT = ROOT / "tools" / "mutate.py"  # 少ないデバイスの子プロセスで起動するコマンド
CHECK = re.compile(r"""ch6\.check\(\s*["']([\w.-]+)["']\s*,\s*(\w+)\s*\)""")


@dataclasses.dataclass
class Outcome:
    exercise: str
    label: str
    status: str
    message: str
    equivalent: str | None = None
    operator: str = ""
    seconds: float = 0.0  # CPU の秒（変異体の定義とチェック）
    line: int = 0  # 変えた行（セルの中の行番号）

    @property
    def killed(self) -> bool:
        return self.status != "pass"


def run_notebook(path: Path, equivalent: dict | None = None, only: set[tuple[str, str]] | None = None,
                 exercises: set[str] | None = None) -> list[Outcome]:
    """解答ノートブック 1 冊の全変異体をチェックに通す（1 つのインタプリタで、ノートブックは 1 度だけ実行）。
    only: (演習, 変異の説明) の組のものだけ、exercises: その演習のものだけを試す。等価の表は今のデバイスの数で読む。"""
    os.environ["CH6_GRADING"] = "1"  # ノートブックの ch6.check は何もしない
    ns: dict = {"__name__": "__main__"}
    results: list[Outcome] = []
    try:
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink):
            cells = code_cells(path)
            for src in cells:
                try:
                    exec(compile(_python(src), f"<{path.name}>", "exec"), ns)
                except Exception:  # わざとエラーを出すセル（古い書き方）: 続ける
                    pass
            if equivalent is None:
                import jax

                equivalent = load_equivalent(devices=jax.device_count())
            for src in cells:
                if "### BEGIN SOLUTION" not in src:
                    continue
                ex_id, fn_name = CHECK.search(src).groups()
                made = [m for m in mutants_with_lines(src) if (exercises is None or ex_id in exercises)
                        and (only is None or (ex_id, m[1]) in only)]
                if not made:
                    continue
                base = _run(ns, src, ex_id, fn_name)
                if base.status != "pass":
                    raise RuntimeError(f"{path.name} {ex_id}: the reference itself does not pass: {base.message}")
                for op, label, text, line in made:
                    out = _run(ns, text, ex_id, fn_name)
                    out.label, out.operator, out.line = label, op, line
                    out.equivalent = equivalent.get((ex_id, label))
                    results.append(out)
    finally:
        os.environ.pop("CH6_GRADING", None)
    return results


def code_cells(path: Path) -> list[str]:
    """ノートブックのコードセルのソース（JSON を直接読む: nbformat は読み込むだけで数秒かかる）。"""
    import json

    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in nb["cells"] if c["cell_type"] == "code"]


def _python(src: str) -> str:
    """IPython のマジック（%、!）の行を取り除いた Python。"""
    return "\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!")))


def _run(ns: dict, src: str, ex_id: str, fn_name: str) -> Outcome:
    import ch6

    start = time.process_time()
    local = dict(ns)
    local.update(RUNTIME)
    try:
        exec(compile(_python(src), "<mutant>", "exec"), local)
    except Exception as exc:  # 変異体が定義の時点で壊れた（これも見抜いたことにはしない: 数えない）
        return Outcome(ex_id, "", "broken", f"{type(exc).__name__}: {exc}")
    res = ch6.run_check(ex_id, local[fn_name])
    return Outcome(ex_id, "", res.status, res.message, seconds=time.process_time() - start)


FEWER_DEVICES = (3, 1)  # 8 で見抜いた変異体を、この数のデバイスでもう一度チェックに通す


def run_at(devices: int, paths: list[Path], only: set[tuple[str, str]] | None = None,
           jobs: int = 2) -> list[Outcome]:
    """子プロセス（JAX_NUM_CPU_DEVICES=devices）で paths の変異体をチェックに通す（only: その組だけ）。"""
    return run_at_counts([devices], paths, only, jobs)[devices]


def run_at_counts(counts: Iterable[int], paths: list[Path], only: set[tuple[str, str]] | None = None,
                  jobs: int = 2) -> dict[int, list[Outcome]]:
    """デバイスの数ごとに子プロセスを 1 つ（jobs 個まで同時に）起動して変異体を試し、数 -> 結果。"""
    import json
    import subprocess
    import tempfile

    counts = list(counts)
    results: dict[int, list[Outcome]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        chosen = Path(tmp) / "only.json"
        chosen.write_text(json.dumps(sorted(only or [])), encoding="utf-8")
        running: list[tuple[int, subprocess.Popen, Path]] = []

        def finish(count, proc, out):
            _, err = proc.communicate()
            if proc.returncode != 0:
                raise RuntimeError(f"tools/mutate.py --devices {count} failed:\n{err[-4000:]}")
            results[count] = [Outcome(**row) for row in json.loads(out.read_text(encoding="utf-8"))]

        for count in counts:
            out = Path(tmp) / f"at{count}.json"
            cmd = [sys.executable, str(SCRIPT), *map(str, paths), "--devices", str(count),
                   "--json", str(out)] + (["--only", str(chosen)] if only is not None else [])
            if len(running) >= jobs:
                finish(*running.pop(0))
            running.append((count, subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                                    text=True, cwd=ROOT), out))
        for item in running:
            finish(*item)
    return results
