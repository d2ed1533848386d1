"""6.6 節の補助: examples/ のスクリプトを起動し、その出力を読みます（ノートブックとテストで共用）。

学ぶ対象は ``examples/multihost_train.py``（N プロセスのうちの 1 つ）と ``examples/launch.py``
（N 個を起動するランチャー）です。ここには、それらを呼んで結果を比べるための小道具だけを置きます。

    from ch6 import multihost
    run = multihost.run(n=2, devices=4)      # python examples/launch.py -n 2 --devices 4 と同じ
    multihost.show(run.stdout)               # プロセスごとにまとめて表示
    run.results()                            # {0: {...}, 1: {...}}  各プロセスの RESULT 行
    multihost.load_script().run(0, 1)        # 同じ学習を、このプロセスだけで（比較用）
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import subprocess
import sys
import time
from pathlib import Path

_PREFIX = re.compile(r"^\[(p\d+|launch)\] ?(.*)$")
# glog 形式の JAX（C++）のログ: 例 "F1129 19:20:13.780631   13157 client.h:80] メッセージ"
_GLOG = re.compile(r"^([EFWI])\d{4} [\d:.]+\s+\d+ [\w.-]+:\d+\] (?:\[\d+\] )?(.*)$")
_PROTO = re.compile(r"\s*\[type\.googleapis\.com[^\]]*\]")
_COORD = re.compile(r"127\.0\.0\.1:\d+")
# gloo の接続ログは複数のスレッドが細切れに書くので、断片だけの行もできる
_GLOO_PIECES = re.compile(r"^(?:\[Gloo\] Rank |\d+| is connected to | peer ranks\. Expected number of connected peer ranks is : |\s)+$")


def repo_root() -> Path:
    """examples/ があるリポジトリの根。パッケージだけが入った環境（Colab）ではリポジトリを複製します。"""
    here = Path(__file__).resolve().parent.parent
    for root in (here, Path.cwd(), *Path.cwd().parents):   # 編集可能な導入、またはリポジトリの中から
        if (root / "examples" / "launch.py").exists():
            return root
    target = Path.cwd() / "ch6-notebooks"
    if not (target / "examples" / "launch.py").exists():
        from importlib.metadata import metadata

        urls = dict(u.split(", ", 1) for u in metadata("ch6").get_all("Project-URL") or [])
        print("examples/ がないので講座のリポジトリを複製します")
        subprocess.run(["git", "clone", "-q", "--depth", "1", urls["Repository"], str(target)], check=True)
    return target


def command(n: int = 2, devices: int = 4, script_args=(), timeout: float = 120, grace: float = 30,
            as_slurm: bool = False) -> list[str]:
    """ランチャーを起動するコマンド（リポジトリの根から相対パス、Python はこのカーネルと同じもの）。"""
    return [sys.executable, "examples/launch.py", "-n", str(n), "--devices", str(devices),
            "--timeout", f"{timeout:g}", "--grace", f"{grace:g}", *(["--as-slurm"] if as_slurm else []),
            "--", *map(str, script_args)]


@dataclasses.dataclass
class Run:
    returncode: int
    stdout: str
    seconds: float

    def lines(self, who: str) -> list[str]:
        """who ("p0", "p1", ..., "launch") の行（印は外す）。"""
        out = []
        for line in self.stdout.splitlines():
            m = _PREFIX.match(line)
            if m and m.group(1) == who:
                out.append(m.group(2))
        return out

    def results(self) -> dict[int, dict]:
        """各プロセスの RESULT 行（JSON）を {process: dict} で返す。"""
        res = {}
        for line in self.stdout.splitlines():
            m = _PREFIX.match(line)
            if m and m.group(2).startswith("RESULT "):
                r = json.loads(m.group(2)[len("RESULT "):])
                res[r["process"]] = r
        return dict(sorted(res.items()))


def results(stdout: str) -> dict[int, dict]:
    """ランチャーの出力から、各プロセスの RESULT 行を {process: dict} で返します。"""
    return Run(0, stdout, 0.0).results()


def run(n: int = 2, devices: int = 4, script_args=(), timeout: float = 120, grace: float = 30,
        as_slurm: bool = False) -> Run:
    """examples/launch.py を子プロセスとして実行し、終わるまで待ちます。"""
    start = time.perf_counter()
    proc = subprocess.run(command(n, devices, script_args, timeout, grace, as_slurm), cwd=repo_root(),
                          capture_output=True, text=True, encoding="utf-8", timeout=timeout + 30)
    return Run(proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - start)


def condense(lines: list[str]) -> list[str]:
    """1 プロセスの出力から、毎回変わる部分や雑音を除いた行。

    [Gloo] の接続ログ、RESULT 行、Python のトレースバック、C++ のスタックトレースを除き、
    JAX（C++）のログは「JAX ログ (F): メッセージ」の形に縮めます（時刻やスレッド番号を落とす）。
    """
    out, in_tb, in_log = [], False, False
    for line in lines:
        if line.startswith("Traceback (most recent call last)"):
            in_tb = True
            continue
        if in_tb:
            if line.startswith(" "):
                continue
            in_tb = False
            continue   # トレースバックの最後の行（例外の要約）も除く
        if line.startswith("RESULT ") or "[Gloo]" in line or "peer ranks" in line or _GLOO_PIECES.match(line):
            continue
        m = _GLOG.match(line)
        if m:
            msg = ". ".join(_PROTO.sub("", m.group(2)).strip().split(". ")[:2])   # 最初の 2 文まで
            out.append(f"JAX ログ ({m.group(1)}): {msg}")
            in_log = in_log or m.group(1) in "EF"
            continue
        if in_log or not line.strip():
            continue   # エラーログの続きの行や C++ のスタックトレース（このあとプロセスは終わる）
        out.append(line)
    return out


def show(stdout: str, width: int = 220, head: int | None = None, jax_logs: str = "with") -> None:
    """出力をプロセスごとにまとめて表示します（行の順序が実行ごとに変わらないように）。
    head を指定すると、各プロセスの最初の head 行だけを表示します。
    jax_logs: "with"（すべて）/ "without"（JAX のログ行を除く）/ "only"（JAX のログ行だけ）。
    故障時の JAX のログは、どの行が出るかがタイミングで変わるので、保存出力では分けて扱います。"""
    r = Run(0, stdout, 0.0)
    whos = sorted({m.group(1) for m in map(_PREFIX.match, stdout.splitlines()) if m and m.group(1) != "launch"},
                  key=lambda w: int(w[1:]))
    launch = r.lines("launch")
    if jax_logs == "only":
        for who in whos:
            for line in condense(r.lines(who)):
                if line.startswith("JAX ログ"):
                    print(f"[{who}] {line}"[:width])
        return
    for line in launch[:1]:
        print(f"[launch] {_COORD.sub('127.0.0.1:PORT', line)}")
    for who in whos:
        for line in condense(r.lines(who))[:head]:
            if jax_logs == "without" and line.startswith("JAX ログ"):
                continue
            print(f"[{who}] {line}"[:width])
    for line in launch[1:]:
        print(f"[launch] {line}")


def _load(name: str):
    path = repo_root() / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_script():
    """examples/multihost_train.py をモジュールとして読み込みます（1 プロセス版の学習に使う）。"""
    return _load("multihost_train")


def load_launcher():
    """examples/launch.py をモジュールとして読み込みます。"""
    return _load("launch")


def max_difference(a: dict, b: dict) -> float:
    """2 つの RESULT（losses, w, b, pred）の最大の差。"""
    import numpy as np

    return max(float(np.max(np.abs(np.asarray(a[k]) - np.asarray(b[k])))) for k in ("losses", "w", "b", "pred"))
