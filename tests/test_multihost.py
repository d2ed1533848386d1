"""6.6 節: 実際の複数プロセス（jax.distributed + gloo）で学習し、1 プロセス版と一致すること。
グローバルデバイス数が 2 のべき乗でなくても（3 プロセス × 1 個、2 プロセス × 3 個）同じ結果になること。
故障したプロセスがあっても、残りが決まった時間内に止まり、ランチャが原因のプロセスを名指しすること。

子プロセスは ``python -m ch6.multihost.launch`` が起動します（JAX_PLATFORMS=cpu）。子はほとんどの時間を
JAX の読み込みと待ち合わせに使うので、正常に終わる 4 つの起動を同時に、そのあと故障の 3 場面を同時に走らせます
（2 コアの機械でこのファイル全体が 1 分ほど）。
"""
from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from ch6 import multihost
from ch6.multihost import launch, train

# 故障のテストで使う短い時間の上限（秒）。既定値（数分）のままでは、テストが長く待つことになる
HEARTBEAT = 3    # ハートビートがこれだけ途絶えたら、そのプロセスは死んだとみなす
INIT = 3         # 全員の参加を待つ上限（initialization_timeout）
BOUND = 45       # 起動（JAX の import）を含めて、これより長くかかれば「止まらなかった」とみなす
STEPS = 3

# (プロセス数, プロセスごとのデバイス数, ランチャへの引数)
RUNS = {
    # 正常に終わる学習: 2 のべき乗のグローバルデバイス数と、そうでないもの
    "2x4": (2, 4, dict(script_args=["--steps", STEPS], timeout=120)),
    "3x1": (3, 1, dict(script_args=["--steps", STEPS], timeout=120)),
    "2x3": (2, 3, dict(script_args=["--steps", STEPS], timeout=120)),
    # SLURM の環境変数だけを渡す -> スクリプトは引数なしの initialize() で同じ学習をする
    "slurm": (2, 4, dict(as_slurm=True, timeout=120)),
    # 例外で落ちる -> 残りはハートビートの途絶で JAX が止める
    "step": (2, 4, dict(script_args=["--fail-process", 1, "--fail-at", "step", "--heartbeat-timeout", HEARTBEAT],
                        timeout=BOUND, grace=15)),   # grace はハートビートより十分長く（JAX が自分で止めるのを見る）
    # 参加しない -> 残りは initialization_timeout で止まり、参加しないものはランチャが止める
    "join": (2, 4, dict(script_args=["--fail-process", 1, "--fail-at", "join", "--init-timeout", INIT],
                        timeout=BOUND, grace=2)),
    # 参加した後に Python の中で止まる -> JAX は気づけない。ランチャの制限時間が全員を止める
    "hang": (2, 4, dict(script_args=["--fail-process", 1, "--fail-at", "hang"], timeout=10)),
}


FAILURES = ("step", "join", "hang")


def _run_all(keys):
    with ThreadPoolExecutor(len(keys)) as pool:
        futures = {k: pool.submit(multihost.run, RUNS[k][0], RUNS[k][1], **RUNS[k][2]) for k in keys}
        return {k: f.result() for k, f in futures.items()}


@pytest.fixture(scope="module")
def runs():
    """正常に終わる 4 つの起動を同時に。故障の 3 場面はその後で（時間を測るので、ほかの起動と重ねない）。"""
    return _run_all([k for k in RUNS if k not in FAILURES])


@pytest.fixture(scope="module")
def failures(runs):
    return _run_all(FAILURES)


@pytest.fixture(scope="module")
def reference():
    """同じ全データ・同じステップ数を 1 プロセス（このテストのデバイス、数はいくつでもよい）で学習した結果。"""
    return train.run(0, 1, steps=STEPS)


@pytest.mark.parametrize("key, rows", [("2x4", ["0:8, 8:16, 16:24, 24:32", "32:40, 40:48, 48:56, 56:64"]),
                                       ("3x1", ["0:22", "22:44", "44:66"]),
                                       ("2x3", ["0:11, 11:22, 22:33", "33:44, 44:55, 55:66"])])
def test_processes_match_single_process(runs, reference, key, rows):
    n, devices, _ = RUNS[key]
    run = runs[key]
    assert run.returncode == 0, run.stdout[-3000:]
    assert "coordinator 127.0.0.1:" in run.stdout   # ループバックだけ
    assert run.lines("launch")[0].startswith(f"{n} プロセス × CPU デバイス {devices} 個（グローバル {n * devices} 個）")
    assert run.lines("launch")[-1] == f"{n} プロセスすべて正常に終了しました"
    results = run.results()
    assert sorted(results) == list(range(n))
    for r in results.values():
        assert r["num_processes"] == n and r["global_devices"] == n * devices
        assert r["rows"] == train.padded_rows(n * devices) and r["rows"] % (n * devices) == 0
        assert len(r["pred"]) == train.ROWS   # パディングの行は結果に入らない
    # どのプロセスも同じ値を持つ（損失とパラメータは複製、予測は process_allgather で集めた全体）
    for i in range(1, n):
        assert multihost.max_difference(results[0], results[i]) == 0.0
    # 1 プロセス版と一致（足し算の順序の違いだけ）
    for key_ in ("losses", "w", "b", "pred"):
        np.testing.assert_allclose(results[0][key_], reference[key_], rtol=1e-5, atol=1e-5, err_msg=key_)
    # 各プロセスが見たもの: 全員が同じグローバルメッシュ（プロセス順）、自分のデバイスは自分の分だけ、
    # x はほかのプロセスのデバイスにまたがる。シャードを合わせると全部の行を重なりなく覆う
    mesh, layout = multihost.global_layout(results)
    assert mesh["shape"] == [n * devices] and mesh["process_index"] == sorted(mesh["process_index"])
    assert len(set(mesh["device_ids"])) == n * devices and len(layout) == n * devices
    for p, r in results.items():
        assert sorted(r["local_devices"]) == sorted(d for d, q in zip(mesh["device_ids"], mesh["process_index"])
                                                    if q == p)
        assert r["fully_addressable"] is False
    # 各プロセスが持つのは自分の行だけ
    for i, mine in enumerate(rows):
        assert any(f"行 [{mine}]" in line for line in run.lines(f"p{i}")), run.lines(f"p{i}")
    # パディングは、割り切れないときだけ
    padded = "パディング" in run.lines("p0")[2]
    assert padded == (train.ROWS % (n * devices) != 0)
    # 人が読む出力に gloo の接続ログは出ない
    assert "[Gloo]" not in run.stdout and "peer ranks" not in run.stdout


def test_failed_process_stops_the_others(failures):
    run = failures["step"]
    assert run.returncode == 1, run.stdout[-3000:]
    assert run.seconds < BOUND
    lines = run.lines("launch")
    assert lines[-1].startswith("失敗: プロセス 1 が原因です"), lines
    assert any("プロセス 1: 異常終了 (exit code 1)" in line for line in lines), lines
    # プロセス 0 はランチャに殺されたのではなく、JAX が故障を検知して自分で止まった
    assert "プロセス 0: ほかのプロセスの故障を JAX の分散サービスが検知して止めました (SIGABRT)" in lines, lines
    p0 = "\n".join(run.lines("p0"))
    assert "stopped sending heartbeats" in p0 and "Terminating process" in p0
    assert "模擬故障: プロセス 1" in "\n".join(run.lines("p1"))


def test_process_that_never_joins(failures):
    run = failures["join"]
    assert run.returncode == 1, run.stdout[-3000:]
    assert run.seconds < BOUND
    lines = run.lines("launch")
    # プロセス 0 は initialization_timeout で自分から止まり、参加しない プロセス 1 はランチャが止める
    assert "プロセス 0: ほかのプロセスの故障を JAX の分散サービスが検知して止めました (SIGABRT)" in lines, lines
    assert lines[-1].startswith("失敗: プロセス 1 が原因です（ほかのプロセスの失敗から"), lines


def test_process_that_hangs_after_joining(failures):
    """Python の中で止まったプロセスもハートビートは送り続けるので、JAX は気づけない。
    ランチャの制限時間（--timeout）が全員を止める。"""
    run = failures["hang"]
    assert run.returncode == 1, run.stdout[-3000:]
    assert run.seconds < 10 + 10   # ランチャ自身の起動（混んだ機械では数秒）を含めて
    lines = run.lines("launch")
    assert "プロセス 0: 制限時間 10 秒を過ぎても終わらないので、ランチャが止めました" in lines, lines
    assert lines[-1].startswith("失敗: 10 秒以内に終わらず、全プロセスを止めました"), lines


def test_initialize_without_arguments_reads_slurm_variables(runs, reference):
    run = runs["slurm"]
    assert run.returncode == 0, run.stdout[-3000:]
    assert "SLURM の環境変数で指定" in run.lines("launch")[0]
    results = run.results()
    assert sorted(results) == [0, 1] and results[1]["num_processes"] == 2
    np.testing.assert_allclose(results[1]["pred"], reference["pred"], rtol=1e-5, atol=1e-5)


def test_single_process_reports_a_fully_addressable_batch(reference):
    n = len(reference["local_devices"])
    assert reference["fully_addressable"] is True and reference["mesh"]["process_index"] == [0] * n
    mesh, layout = multihost.global_layout({0: reference})
    assert sorted(layout) == sorted(mesh["device_ids"]) == sorted(reference["local_devices"])


def test_result_line_only_when_asked(capsys):
    """RESULT 行（JSON）は --json のときだけ。人が手で動かしたときの出力には出ない。"""
    assert train.main(["--single", "--steps", "1"]) == 0
    out = capsys.readouterr().out
    assert "step 1: loss" in out and "RESULT" not in out
    assert train.main(["--single", "--steps", "1", "--json"]) == 0
    out = capsys.readouterr().out
    assert multihost.results("\n".join(f"[p0] {line}" for line in out.splitlines()))[0]["losses"]


def test_launcher_hides_gloo_noise_and_forwards_json(tmp_path):
    """ランチャの表示: gloo の接続ログは --verbose のときだけ。--json は子の引数に足される。"""
    fake = tmp_path / "fake.py"
    fake.write_text(textwrap.dedent("""
        import sys
        print("[Gloo] Rank 0 is connected to 1 peer ranks. Expected number of connected peer ranks is : 1")
        print("args", " ".join(sys.argv[1:]))
    """), encoding="utf-8")
    base = [sys.executable, "-m", multihost.LAUNCHER, "-n", "2", "--devices", "1", "--script", str(fake)]

    def out(*extra):
        proc = subprocess.run([*base, *extra], capture_output=True, text=True, encoding="utf-8", timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    quiet = out("--json", "--", "--steps", "2")
    assert "[Gloo]" not in quiet
    assert "[p1] args --coordinator 127.0.0.1:" in quiet and "--process-id 1 --steps 2 --json" in quiet
    loud = out("--verbose")
    assert "[p0] [Gloo] Rank 0 is connected" in loud and "--json" not in loud


def test_condense_drops_noise_and_keeps_the_story():
    lines = [
        "step 1: loss 15.981",
        "[Gloo] Rank 0 is connected to 7 peer ranks. Expected number of connected peer ranks is : 7[Gloo] Rank 1",
        " is connected to 7 peer ranks. Expected number of connected peer ranks is : 7",
        "7",
        "",
        "RESULT {}",
        "プロセス 1: エラー RuntimeError: boom",
        "Traceback (most recent call last):",
        '  File "/somewhere/train.py", line 1, in main',
        "    run()",
        "RuntimeError: boom",
        "F1129 19:20:13.780631   13157 client.h:80] Terminating process because X. Second sentence. Third.",
        "RPC: /xla.coordination.CoordinationService/PollForError [type.googleapis.com/tensorflow.X='']",
        "*** Check failure stack trace: ***",
        "    @     0x7fcf62a40634  absl::LogMessage::SendToLog()",
    ]
    assert multihost.condense(lines) == [
        "step 1: loss 15.981",
        "プロセス 1: エラー RuntimeError: boom",
        "JAX ログ (F): Terminating process because X. Second sentence",
    ]


def test_padding_rows_and_mask():
    for n_global in range(1, 17):
        x, y, mask = train.global_batch(n_global)
        assert len(x) == len(y) == len(mask) == train.padded_rows(n_global)
        assert len(mask) % n_global == 0 and train.ROWS <= len(mask) < train.ROWS + n_global
        assert mask.sum() == train.ROWS and not x[train.ROWS:].any()
    # プロセスの分担をつなぐと全体に戻る
    parts = [train.local_data(p, 3, 6) for p in range(3)]
    np.testing.assert_array_equal(np.concatenate([p[0] for p in parts]), train.global_batch(6)[0])


def test_excerpt_reads_the_installed_script(capsys):
    multihost.excerpt("def train_step", "return params, loss")
    out = capsys.readouterr().out
    assert out.startswith("def train_step(params, x, y, mask):") and out.rstrip().endswith("return params, loss")


def test_free_port_is_on_loopback():
    port = launch.free_port()
    with socket.socket() as s:   # 選ばれたポートは 127.0.0.1 で空いている
        s.bind(("127.0.0.1", port))
    env = launch.slurm_env(2, 1, port)
    assert env["JAX_COORDINATOR_BIND_ADDRESS"] == f"127.0.0.1:{port}"
    assert (env["SLURM_NTASKS"], env["SLURM_PROCID"]) == ("2", "1")
