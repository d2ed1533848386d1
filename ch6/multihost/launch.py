"""1 台のマシンで JAX のプロセスを N 個起動し、出力に [p0] [p1] ... を付けてまとめます（6.6 節）。

    python -m ch6.multihost.launch                        # 2 プロセス × CPU デバイス 4 個、3 ステップ
    python -m ch6.multihost.launch -n 3 --devices 1       # 3 プロセス × 1 個（グローバルデバイス 3 個）
    python -m ch6.multihost.launch -n 2 -- --steps 5      # -- の後ろは学習スクリプトにそのまま渡す
    python -m ch6.multihost.launch --as-slurm             # SLURM の srun のふりをする（引数なしの initialize()）
    python -m ch6.multihost.launch --script my_train.py   # 自分のスクリプトを N 個起動する

していること:
- 127.0.0.1 の空きポートを 1 つ選び、コーディネータ（coordinator）のアドレスにします（ループバック
  （loopback）だけなので、ほかのマシンからは届きません）。
- 子プロセスごとに JAX_PLATFORMS=cpu と JAX_NUM_CPU_DEVICES を設定し、このランチャと同じ
  Python（sys.executable）で ``-m ch6.multihost.train``（または --script のファイル）を起動します。
  引数 --coordinator --num-processes --process-id を足します（クラスタでは、この役目をスケジューラ
  （SLURM など）が担います）。
- --as-slurm では引数を足す代わりに、srun が設定するのと同じ環境変数（SLURM_NTASKS、SLURM_PROCID
  など）を設定します。スクリプトは jax.distributed.initialize() を引数なしで呼び、JAX が環境変数から
  プロセス数・番号・コーディネータを読み取ります（ポートと待ち受け先は JAX_COORDINATOR_PORT /
  JAX_COORDINATOR_BIND_ADDRESS でループバックに限ります）。
- 子の出力のうち、gloo（CPU の集団通信）の接続ログは表示しません（--verbose ですべて表示）。
  --json を付けると子に --json を渡し、各プロセスが比較用の結果を ``RESULT {...}`` の 1 行でも出します
  （ノートブックとテストが使います。人が読むときは要りません）。
- どれかのプロセスが失敗したら、残りが自分で止まるのを --grace 秒まで待ち、まだ動いているものを
  止めます。全体も --timeout 秒で打ち切ります。だれが失敗したかを表示し、終了コード 1 で終わります
  （すべてのプロセスが正常終了なら 0、Ctrl-C で中断したら 130）。
  止めるときは SIGKILL を使います（JAX は SIGTERM を「プリエンプションの予告」として受け取り、
  それだけでは終わらないため）。

ポートは「選んでからコーディネータが使うまで」の間にほかのプログラムに取られることがあります。
そのときは起動し直してください。
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from ch6.multihost._lines import is_gloo_noise

MODULE = "ch6.multihost.train"   # 既定で起動する学習スクリプト（python -m で）
# JAX の分散サービスがほかのプロセスの故障を検知して、このプロセスを止めたときの目印
JAX_ABORT = "JAX distributed service detected fatal errors"


def free_port() -> int:
    """127.0.0.1 で空いている TCP ポート（OS に選ばせる）。"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def describe(code: int | None, killed: str | None, output: str) -> str:
    if killed:
        return killed
    if code == 0:
        return "正常終了 (exit code 0)"
    if JAX_ABORT in output:
        return "ほかのプロセスの故障を JAX の分散サービスが検知して止めました (SIGABRT)"
    if code is not None and code < 0:
        return f"シグナル {signal.Signals(-code).name} で終了"
    return f"異常終了 (exit code {code})"


def slurm_env(n: int, i: int, port: int) -> dict[str, str]:
    """srun が 1 ノードで n タスクを起動したときに、タスク i に設定する環境変数（JAX が読むもの）。"""
    return {"SLURM_JOB_ID": "4242", "SLURM_STEP_NODELIST": "127.0.0.1", "SLURM_NTASKS": str(n),
            "SLURM_PROCID": str(i), "SLURM_LOCALID": str(i),
            "JAX_COORDINATOR_PORT": str(port), "JAX_COORDINATOR_BIND_ADDRESS": f"127.0.0.1:{port}"}


def launch(n: int, devices: int, script_args: list[str], timeout: float, grace: float,
           script: Path | None = None, as_slurm: bool = False, json_results: bool = False,
           verbose: bool = False, out=sys.stdout) -> int:
    """n 個のプロセスを起動し、すべてが終わるか止めるまで待ちます。終了コード（0 / 1 / 130）を返します。"""
    program = ["-m", MODULE] if script is None else [str(script)]
    script_args = [*script_args, *(["--json"] if json_results else [])]
    port = free_port()
    coordinator = f"127.0.0.1:{port}"
    env = dict(os.environ, JAX_PLATFORMS="cpu", JAX_NUM_CPU_DEVICES=str(devices), PYTHONUNBUFFERED="1")
    lock = threading.Lock()
    outputs: list[list[str]] = [[] for _ in range(n)]

    def say(line: str) -> None:
        with lock:
            print(line, file=out, flush=True)

    def pump(i: int, stream) -> None:   # 子の出力を 1 行ずつ、印を付けて流す
        for line in stream:
            outputs[i].append(line)
            if verbose or not is_gloo_noise(line.rstrip()):
                say(f"[p{i}] {line.rstrip()}")

    how = "SLURM の環境変数で" if as_slurm else "引数で"
    say(f"[launch] {n} プロセス × CPU デバイス {devices} 個（グローバル {n * devices} 個）、"
        f"coordinator {coordinator}（{how}指定）")
    procs, readers = [], []
    for i in range(n):
        if as_slurm:
            cmd = [sys.executable, "-u", *program, *script_args]
            child_env = dict(env, **slurm_env(n, i, port))
        else:
            cmd = [sys.executable, "-u", *program, "--coordinator", coordinator,
                   "--num-processes", str(n), "--process-id", str(i), *script_args]
            child_env = env
        p = subprocess.Popen(cmd, env=child_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, encoding="utf-8", errors="replace")
        t = threading.Thread(target=pump, args=(i, p.stdout), daemon=True)
        t.start()
        procs.append(p)
        readers.append(t)

    start = time.monotonic()
    deadline = start + timeout
    finished: dict[int, float] = {}          # プロセス番号 -> 終わった時刻
    killed: dict[int, str] = {}              # 止めたプロセス番号 -> 理由
    why = f"制限時間 {timeout:g} 秒を過ぎても終わらないので、ランチャが止めました"
    interrupted = False
    try:
        while len(finished) + len(killed) < n:
            now = time.monotonic()
            for i, p in enumerate(procs):
                if i not in finished and i not in killed and p.poll() is not None:
                    finished[i] = now
                    if p.returncode != 0 and deadline > now + grace:
                        deadline = now + grace   # 失敗が出たら、残りを待つのは grace 秒まで
                        why = f"ほかのプロセスの失敗から {grace:g} 秒たっても終わらないので、ランチャが止めました"
            if now > deadline:
                for i, p in enumerate(procs):
                    if i not in finished and i not in killed:
                        p.kill()
                        p.wait()
                        killed[i] = why
            time.sleep(0.05)
    except KeyboardInterrupt:
        interrupted = True
        say("[launch] Ctrl-C: 残っているプロセスを止めます")
    finally:   # Ctrl-C などで抜けるときも子を残さない
        for i, p in enumerate(procs):
            if p.poll() is None:
                p.kill()
                p.wait()
                killed[i] = "ランチャが中断されたので止めました"
    for t in readers:
        t.join(timeout=5)

    codes = [p.returncode for p in procs]
    if all(c == 0 for c in codes) and not killed:
        say(f"[launch] {n} プロセスすべて正常に終了しました")
        return 0
    texts = ["".join(o) for o in outputs]
    for i in range(n):
        say(f"[launch] プロセス {i}: {describe(codes[i], killed.get(i), texts[i])}")
    if interrupted:
        say("[launch] 中断しました (Ctrl-C)")
        return 130
    say(f"[launch] 失敗: {blame(codes, finished, killed, texts, timeout)}")
    return 1


def blame(codes, finished, killed, texts, timeout) -> str:
    """どのプロセスが原因かを 1 行で。JAX に止められた「巻き添え」は原因から外します。"""
    own = sorted((t, i) for i, t in finished.items() if codes[i] != 0 and JAX_ABORT not in texts[i])
    if own:   # 自身の理由で先に止まったプロセス
        i = own[0][1]
        return f"プロセス {i} が原因です（{describe(codes[i], None, texts[i])}）"
    if killed and len(killed) < len(codes):   # ほかが止まったのに、止まらなかったプロセス（参加しないなど）
        i = min(killed)
        return f"プロセス {i} が原因です（{killed[i]}）"
    if killed:   # すべてのプロセスが止まったまま: 集団通信の待ち合わせで、どれが原因かは外からはわからない
        return (f"{timeout:g} 秒以内に終わらず、全プロセスを止めました。どのプロセスも待ったままでした"
                "（どれかが Python の中で止まり、ほかが集団通信で待っていた可能性があります）")
    victims = sorted((t, i) for i, t in finished.items() if codes[i] != 0)
    return f"プロセス {victims[0][1]} が最初に止まりました（原因は各プロセスの出力を見てください）"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    script_args = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(prog="python -m ch6.multihost.launch", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--num-processes", type=int, default=2)
    ap.add_argument("--devices", type=int, default=4, help="プロセスごとの CPU デバイス数")
    ap.add_argument("--timeout", type=float, default=180, help="全体の上限（秒）")
    ap.add_argument("--grace", type=float, default=30, help="失敗が出てから残りを待つ上限（秒）")
    ap.add_argument("--script", type=Path, help="起動するスクリプトのファイル（既定は python -m ch6.multihost.train）")
    ap.add_argument("--as-slurm", action="store_true", help="引数の代わりに SLURM の環境変数を渡す")
    ap.add_argument("--json", action="store_true",
                    help="子に --json を渡し、比較用の RESULT {...} 行も出させる（ノートブックとテスト用）")
    ap.add_argument("--verbose", action="store_true", help="gloo の接続ログも含め、子の出力をすべて表示する")
    args = ap.parse_args(own)
    return launch(args.num_processes, args.devices, script_args, args.timeout, args.grace, args.script,
                  args.as_slurm, args.json, args.verbose)


if __name__ == "__main__":
    sys.exit(main())
