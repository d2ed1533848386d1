"""6.6 節: 本物の複数プロセス（jax.distributed + gloo）で学習し、1 プロセス版と一致すること。
故障したプロセスがあっても、残りが決まった時間内に止まり、ランチャーが原因のプロセスを名指しすること。

子プロセスはランチャーが起動します（各 CPU デバイス 4 個、JAX_PLATFORMS=cpu）。故障の 3 場面と
SLURM のふりをした起動は同時に走らせるので、このファイル全体で 2 コアの機械でも 30 秒ほどです。
"""
from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from ch6 import multihost

# 故障のテストで使う短い時間の上限（秒）。既定値（数分）のままでは、テストが長く待つことになる
HEARTBEAT = 3    # heartbeat がこれだけ途絶えたら、そのプロセスは死んだとみなす
INIT = 3         # 全員の参加を待つ上限（initialization_timeout）
BOUND = 45       # 起動（JAX の import）を含めて、これより長くかかれば「止まらなかった」とみなす


# 故障の 3 つの場面と、SLURM のふりをした起動。子プロセスはほとんど待っているだけなので、
# 同時に走らせて時間を節約します
RUNS = {
    # SLURM の環境変数だけを渡す -> スクリプトは引数なしの initialize() で同じ学習をする
    "slurm": dict(as_slurm=True, timeout=120),
    # 例外で落ちる -> 残りは heartbeat の途絶で JAX が止める
    "step": dict(script_args=["--fail-process", 1, "--fail-at", "step", "--heartbeat-timeout", HEARTBEAT],
                 timeout=BOUND, grace=15),   # grace は heartbeat より十分長く（JAX が自分で止めるのを見る）
    # 参加しない -> 残りは initialization_timeout で止まり、参加しないものはランチャーが止める
    "join": dict(script_args=["--fail-process", 1, "--fail-at", "join", "--init-timeout", INIT],
                 timeout=BOUND, grace=2),
    # 参加した後に Python の中で止まる -> JAX は気づけない。ランチャーの制限時間が全員を止める
    "hang": dict(script_args=["--fail-process", 1, "--fail-at", "hang"], timeout=10),
}


@pytest.fixture(scope="module")
def runs():
    with ThreadPoolExecutor(len(RUNS)) as pool:
        futures = {k: pool.submit(multihost.run, 2, 4, **kw) for k, kw in RUNS.items()}
        return {k: f.result() for k, f in futures.items()}


@pytest.fixture(scope="module")
def reference():
    """同じ全データ・同じステップ数を 1 プロセス（このテストのデバイス）で学習した結果。"""
    return multihost.load_script().run(0, 1, steps=3)


def test_two_processes_match_single_process(reference):
    run = multihost.run(n=2, devices=4, script_args=["--steps", "3"], timeout=120)
    assert run.returncode == 0, run.stdout[-3000:]
    assert "coordinator 127.0.0.1:" in run.stdout   # loopback だけ
    assert run.lines("launch")[-1] == "2 プロセスすべて正常に終了しました"
    results = run.results()
    assert sorted(results) == [0, 1]
    for r in results.values():
        assert r["num_processes"] == 2 and r["global_devices"] == 8
    # どのプロセスも同じ値を持つ（損失とパラメータは複製、予測は process_allgather で集めた全体）
    assert multihost.max_difference(results[0], results[1]) == 0.0
    # 1 プロセス版と一致（足し算の順序の違いだけ）
    for key in ("losses", "w", "b", "pred"):
        np.testing.assert_allclose(results[0][key], reference[key], rtol=1e-5, atol=1e-5, err_msg=key)
    # 各プロセスが持つのは自分の行だけ
    assert any("行 [0:8, 8:16, 16:24, 24:32]" in line for line in run.lines("p0"))
    assert any("行 [32:40, 40:48, 48:56, 56:64]" in line for line in run.lines("p1"))


def test_failed_process_stops_the_others(runs):
    run = runs["step"]
    assert run.returncode == 1, run.stdout[-3000:]
    assert run.seconds < BOUND
    launch = run.lines("launch")
    assert launch[-1].startswith("失敗: process 1 が原因です"), launch
    assert any("process 1: 異常終了 (exit code 1)" in line for line in launch), launch
    # process 0 はランチャーに殺されたのではなく、JAX が故障を検知して自分で止まった
    assert "process 0: ほかのプロセスの故障を JAX の分散サービスが検知して止めました (SIGABRT)" in launch, launch
    p0 = "\n".join(run.lines("p0"))
    assert "stopped sending heartbeats" in p0 and "Terminating process" in p0
    assert "模擬故障: process 1" in "\n".join(run.lines("p1"))


def test_process_that_never_joins(runs):
    run = runs["join"]
    assert run.returncode == 1, run.stdout[-3000:]
    assert run.seconds < BOUND
    launch = run.lines("launch")
    # process 0 は initialization_timeout で自分から止まり、参加しない process 1 はランチャーが止める
    assert "process 0: ほかのプロセスの故障を JAX の分散サービスが検知して止めました (SIGABRT)" in launch, launch
    assert launch[-1].startswith("失敗: process 1 が原因です（ほかのプロセスの失敗から"), launch


def test_process_that_hangs_after_joining(runs):
    """Python の中で止まったプロセスも heartbeat は送り続けるので、JAX は気づけない。
    ランチャーの制限時間（--timeout）が全員を止める。"""
    run = runs["hang"]
    assert run.returncode == 1, run.stdout[-3000:]
    assert run.seconds < 10 + 5
    launch = run.lines("launch")
    assert "process 0: 制限時間 10 秒を過ぎても終わらないので、ランチャーが止めました" in launch, launch
    assert launch[-1].startswith("失敗: 10 秒以内に終わらず、全プロセスを止めました"), launch


def test_initialize_without_arguments_reads_slurm_variables(runs, reference):
    run = runs["slurm"]
    assert run.returncode == 0, run.stdout[-3000:]
    assert "SLURM の環境変数で指定" in run.lines("launch")[0]
    results = run.results()
    assert sorted(results) == [0, 1] and results[1]["num_processes"] == 2
    np.testing.assert_allclose(results[1]["pred"], reference["pred"], rtol=1e-5, atol=1e-5)


def test_condense_drops_noise_and_keeps_the_story():
    lines = [
        "step 1: loss 15.9808",
        "[Gloo] Rank 0 is connected to 7 peer ranks. Expected number of connected peer ranks is : 7[Gloo] Rank 1",
        " is connected to 7 peer ranks. Expected number of connected peer ranks is : 7",
        "7",
        "RESULT {}",
        "process 1: エラー RuntimeError: boom",
        "Traceback (most recent call last):",
        '  File "/somewhere/multihost_train.py", line 1, in main',
        "    run()",
        "RuntimeError: boom",
        "F1129 19:20:13.780631   13157 client.h:80] Terminating process because X. Second sentence. Third.",
        "RPC: /xla.coordination.CoordinationService/PollForError [type.googleapis.com/tensorflow.X='']",
        "*** Check failure stack trace: ***",
        "    @     0x7fcf62a40634  absl::LogMessage::SendToLog()",
    ]
    assert multihost.condense(lines) == [
        "step 1: loss 15.9808",
        "process 1: エラー RuntimeError: boom",
        "JAX ログ (F): Terminating process because X. Second sentence",
    ]


def test_free_port_is_on_loopback():
    launch = multihost.load_launcher()
    port = launch.free_port()
    with socket.socket() as s:   # 選ばれたポートは 127.0.0.1 で空いている
        s.bind(("127.0.0.1", port))
    env = launch.slurm_env(2, 1, port)
    assert env["JAX_COORDINATOR_BIND_ADDRESS"] == f"127.0.0.1:{port}"
    assert (env["SLURM_NTASKS"], env["SLURM_PROCID"]) == ("2", "1")
