"""6.9c 節: 6.6 節のランチャで :mod:`ch6.capstone.worker` を N プロセス起動し、その出力を読みます。

    from ch6.capstone import resume
    run = resume.launch(2, 2, ckpt_dir, steps=9, save_every=3, die_at=6)   # process 1 が保存の途中で止まる
    resume.show(run)                  # プロセスごとの主な行と、ランチャの判定
    run.results()                     # {process: {"start": ..., "losses": [...]}}（最後まで終わったプロセスだけ）
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from ch6 import multihost

__all__ = ["WORKER", "command", "launch", "show", "KEY_LINES"]

WORKER = Path(__file__).with_name("worker.py")
# ノートブックに出す行（そのほかの行: JAX のログ、故障したときのトレースバックは、タイミングで変わる）
KEY_LINES = ("ステップ", "チェックポイント", "模擬故障", "1 プロセス", "2 プロセス", "3 プロセス", "4 プロセス")


def command(n: int, devices: int, directory, steps: int = 9, save_every: int = 3, die_at: int | None = None,
            timeout: float = 240, grace: float = 5, cache_dir=None) -> list[str]:
    """ランチャのコマンド（Python はこのカーネルと同じもの）。"""
    worker_args = ["--dir", str(directory), "--steps", str(steps), "--save-every", str(save_every)]
    if cache_dir is not None:
        worker_args += ["--cache-dir", str(cache_dir)]
    if die_at is not None:
        worker_args += ["--die-at", str(die_at)]
    return [sys.executable, "-m", multihost.LAUNCHER, "-n", str(n), "--devices", str(devices),
            "--timeout", f"{timeout:g}", "--grace", f"{grace:g}", "--script", str(WORKER), "--", *worker_args]


def launch(n: int, devices: int, directory, steps: int = 9, save_every: int = 3, die_at: int | None = None,
           timeout: float = 240, grace: float = 5, cache_dir=None) -> multihost.Run:
    """ランチャを子プロセスとして実行し、終わるまで待ちます（ランチャ自身が timeout 秒で打ち切る）。"""
    start = time.perf_counter()
    proc = subprocess.run(command(n, devices, directory, steps, save_every, die_at, timeout, grace, cache_dir),
                          capture_output=True, text=True, encoding="utf-8", timeout=timeout + 60)
    return multihost.Run(proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - start)


def show(run: multihost.Run, verdict_only: bool = False) -> None:
    """プロセスごとの主な行（KEY_LINES で始まる行）と、ランチャの判定の行を表示します。

    verdict_only=True なら、ランチャの行は出しません（故障の後、残りのプロセスがエラーで終わるか、ランチャに
    止められるかはタイミングで変わるので、判定はノートブックが確かめて要約します）。"""
    procs = sorted({int(line[2:line.index("]")]) for line in run.stdout.splitlines()
                    if line.startswith("[p") and "]" in line})
    for p in procs:
        for line in run.lines(f"p{p}"):
            if line.startswith(KEY_LINES):
                print(f"[p{p}] {line}")
    launch = run.lines("launch")[1:]
    for line in [] if verdict_only else launch:
        print(f"[launch] {line}")
