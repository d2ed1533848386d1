"""6.9c 節: 6.6 節のランチャで :mod:`ch6.capstone.worker` を N プロセス起動し、その出力を読みます。

    from ch6.capstone import resume
    run = resume.launch(2, 2, ckpt_dir, steps=9, save_every=3, die_at=6)   # process 1 が保存の途中で止まる
    resume.show(run)                  # プロセスごとの主な行と、ランチャの判定
    a, b = resume.start(2, 2, dir_a), resume.start(1, 2, dir_b)   # 互いに独立な 2 つを同時に
    run_a, run_b = a.wait(), b.wait()
    run.results()                     # {process: {"start": ..., "losses": [...]}}（最後まで終わったプロセスだけ）
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from ch6 import multihost

__all__ = ["WORKER", "command", "launch", "start", "Started", "show", "KEY_LINES"]

WORKER = Path(__file__).with_name("worker.py")
# ノートブックに出す行（そのほかの行: JAX のログ、故障したときのトレースバックは、タイミングで変わる）
KEY_LINES = ("ステップ", "チェックポイント", "模擬故障", "永続コンパイルキャッシュ", "1 プロセス", "2 プロセス", "3 プロセス", "4 プロセス")


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


class Started:
    """:func:`start` で裏で起動したランチャ。:meth:`wait` で終わるのを待ち、``multihost.Run`` を受け取ります。"""

    def __init__(self, cmd: list[str], timeout: float):
        import tempfile

        self._out = tempfile.TemporaryFile(mode="w+", encoding="utf-8")  # パイプでなくファイル: 2 つを同時に
        self._start = time.perf_counter()                                   # 動かしても、出力で詰まらない
        self._timeout = timeout
        self._proc = subprocess.Popen(cmd, stdout=self._out, stderr=subprocess.STDOUT, text=True, encoding="utf-8")

    def wait(self) -> multihost.Run:
        try:
            rc = self._proc.wait(timeout=self._timeout + 60)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            rc = self._proc.wait()
        self._out.seek(0)
        out = self._out.read()
        self._out.close()
        return multihost.Run(rc, out, time.perf_counter() - self._start)


def start(n: int, devices: int, directory, steps: int = 9, save_every: int = 3, die_at: int | None = None,
          timeout: float = 240, grace: float = 5, cache_dir=None) -> Started:
    """:func:`launch` と同じコマンドを裏で起動して、すぐ戻ります（互いに独立な実行を同時に動かすとき）。"""
    return Started(command(n, devices, directory, steps, save_every, die_at, timeout, grace, cache_dir), timeout)


def launch(n: int, devices: int, directory, steps: int = 9, save_every: int = 3, die_at: int | None = None,
           timeout: float = 240, grace: float = 5, cache_dir=None) -> multihost.Run:
    """ランチャを子プロセスとして実行し、終わるまで待ちます（ランチャ自身が timeout 秒で打ち切る）。"""
    return start(n, devices, directory, steps, save_every, die_at, timeout, grace, cache_dir).wait()


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
