"""6.6 節: 複数プロセスの JAX（jax.distributed）を 1 台のマシンで動かします。

このパッケージの中身:

- ``python -m ch6.multihost.launch``: N 個のプロセスを起動するランチャ（:mod:`ch6.multihost.launch`）
- ``python -m ch6.multihost.train``: N プロセスのうちの 1 つとして学習するスクリプト（:mod:`ch6.multihost.train`）
- このファイル: ノートブックとテストがランチャを起動し、その出力を読むための小道具

どちらも講座のパッケージに入っているので、wheel から入れた環境（Colab・Kaggle など、リポジトリのない環境）でも
``python -m`` でそのまま動きます。::

    from ch6 import multihost
    from ch6.multihost import train
    run = multihost.run(n=2, devices=4)   # python -m ch6.multihost.launch -n 2 --devices 4 --json と同じ
    multihost.show(run.stdout)            # プロセスごとにまとめて表示
    run.results()                         # {0: {...}, 1: {...}}  各プロセスの RESULT 行
    multihost.draw_global(run.results())  # 各プロセスが報告したグローバルメッシュと、各デバイスが持つ行の図
    train.run(0, 1)                       # 同じ学習を、このプロセスだけで（比較用）
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import subprocess
import sys
import time

from ._lines import COORD, PREFIX, condense, is_gloo_noise

__all__ = ["LAUNCHER", "SCRIPT", "Run", "command", "run", "results", "condense", "is_gloo_noise", "show",
           "excerpt", "max_difference", "global_layout", "draw_global"]

LAUNCHER = "ch6.multihost.launch"   # python -m で起動するモジュールの名前
SCRIPT = "ch6.multihost.train"


def command(n: int = 2, devices: int = 4, script_args=(), timeout: float = 120, grace: float = 30,
            as_slurm: bool = False, json_results: bool = True) -> list[str]:
    """ランチャを起動するコマンド（Python はこのカーネルと同じもの）。

    ``json_results`` が True なら ``--json`` を付け、各プロセスに比較用の ``RESULT {...}`` 行も出させます。"""
    return [sys.executable, "-m", LAUNCHER, "-n", str(n), "--devices", str(devices),
            "--timeout", f"{timeout:g}", "--grace", f"{grace:g}", *(["--as-slurm"] if as_slurm else []),
            *(["--json"] if json_results else []), "--", *map(str, script_args)]


@dataclasses.dataclass
class Run:
    returncode: int
    stdout: str
    seconds: float

    def lines(self, who: str) -> list[str]:
        """who ("p0", "p1", ..., "launch") の行（印は外す）。"""
        out = []
        for line in self.stdout.splitlines():
            m = PREFIX.match(line)
            if m and m.group(1) == who:
                out.append(m.group(2))
        return out

    def results(self) -> dict[int, dict]:
        """各プロセスの RESULT 行（JSON）を {process: dict} で返す（ランチャに --json を付けたとき）。"""
        res = {}
        for line in self.stdout.splitlines():
            m = PREFIX.match(line)
            if m and m.group(2).startswith("RESULT "):
                r = json.loads(m.group(2)[len("RESULT "):])
                res[r["process"]] = r
        return dict(sorted(res.items()))


def results(stdout: str) -> dict[int, dict]:
    """ランチャの出力から、各プロセスの RESULT 行を {process: dict} で返します。"""
    return Run(0, stdout, 0.0).results()


def run(n: int = 2, devices: int = 4, script_args=(), timeout: float = 120, grace: float = 30,
        as_slurm: bool = False) -> Run:
    """ランチャ（``python -m ch6.multihost.launch --json``）を子プロセスとして実行し、終わるまで待ちます。"""
    start = time.perf_counter()
    proc = subprocess.run(command(n, devices, script_args, timeout, grace, as_slurm),
                          capture_output=True, text=True, encoding="utf-8", timeout=timeout + 30)
    return Run(proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - start)


def show(stdout: str, width: int = 220, head: int | None = None, jax_logs: str = "with") -> None:
    """出力をプロセスごとにまとめて表示します（行の順序が実行ごとに変わらないように）。
    head を指定すると、各プロセスの最初の head 行だけを表示します。
    jax_logs: "with"（すべて）/ "without"（JAX のログ行を除く）/ "only"（JAX のログ行だけ）。
    故障時の JAX のログは、どの行が出るかがタイミングで変わるので、保存出力では分けて扱います。"""
    r = Run(0, stdout, 0.0)
    whos = sorted({m.group(1) for m in map(PREFIX.match, stdout.splitlines()) if m and m.group(1) != "launch"},
                  key=lambda w: int(w[1:]))
    launch = r.lines("launch")
    if jax_logs == "only":
        for who in whos:
            for line in condense(r.lines(who)):
                if line.startswith("JAX ログ"):
                    print(f"[{who}] {line}"[:width])
        return
    for line in launch[:1]:
        print(f"[launch] {COORD.sub('127.0.0.1:PORT', line)}")
    for who in whos:
        for line in condense(r.lines(who))[:head]:
            if jax_logs == "without" and line.startswith("JAX ログ"):
                continue
            print(f"[{who}] {line}"[:width])
    for line in launch[1:]:
        print(f"[launch] {line}")


def excerpt(first: str, last: str, module: str = SCRIPT) -> None:
    """モジュール（既定は学習スクリプト）のソースのうち、first で始まる行から last で始まる行までを表示します
    （行頭の空白は無視）。ノートブックの説明とスクリプトが食い違わないように、ファイルから直接抜き出します。"""
    lines = inspect.getsource(importlib.import_module(module)).splitlines()
    i = next(k for k, line in enumerate(lines) if line.strip().startswith(first))
    j = next(k for k in range(i, len(lines)) if lines[k].strip().startswith(last))
    print("\n".join(lines[i:j + 1]))


def max_difference(a: dict, b: dict) -> float:
    """2 つの RESULT（losses, w, b, pred）の最大の差。"""
    import numpy as np

    return max(float(np.max(np.abs(np.asarray(a[k]) - np.asarray(b[k])))) for k in ("losses", "w", "b", "pred"))


def global_layout(results: dict[int, dict]) -> tuple[dict, dict[int, tuple[int, int]]]:
    """各プロセスの RESULT から (グローバルメッシュ, {デバイス番号: (最初の行, 最後の行 + 1)}) を返します。

    次のことを確かめます（合わなければ ValueError）: 全プロセスが同じメッシュを報告した。各プロセスの
    シャードは、メッシュがそのプロセスのものとするデバイスにある。全プロセスのシャードを合わせると、
    グローバル配列の行 0:rows を重なりなく覆う。"""
    procs = sorted(results)
    mesh = results[procs[0]]["mesh"]
    if any(results[p]["mesh"] != mesh for p in procs):
        raise ValueError("プロセスによって報告したメッシュが違います")
    owner = dict(zip(mesh["device_ids"], mesh["process_index"]))
    rows: dict[int, tuple[int, int]] = {}
    for p in procs:
        for device, start, stop in results[p]["shards"]:
            if owner.get(device) != p:
                raise ValueError(f"プロセス {p} のシャードが、ほかのプロセスのデバイス {device} にあります")
            rows[device] = (start, stop)
    spans = sorted(rows.values())
    total = results[procs[0]]["rows"]
    if spans[0][0] != 0 or spans[-1][1] != total or any(a[1] != b[0] for a, b in zip(spans, spans[1:])):
        raise ValueError(f"シャードの行 {spans} が 0:{total} を重なりなく覆っていません")
    return mesh, rows


def draw_global(results: dict[int, dict], title: str | None = None):
    """各プロセスが報告したグローバルメッシュ（プロセスごとに色分け）と、各デバイスが持つバッチの行の図。
    データの行数より後ろの行（パディング）は斜線で示します。"""
    from ch6 import draw
    from ch6.multihost import train

    mesh, rows = global_layout(results)
    return draw.process_grid(mesh["device_ids"], mesh["process_index"], mesh["axis_names"], mesh["shape"],
                             rows=rows, valid_rows=train.ROWS, title=title)
