"""ch6.profile: 記録したチップのトレース（切り詰めた実物）と、小さな合成のトレースで、読み方を確かめる。

- 入れ子の演算（while の中の融合）の子の時間を引いた「自分だけの時間」、分類、1 回の実行あたりの時間
- 記録したトレースの中身（日付・チップ・JAX の版、デコードと学習の数字）と measurements.json の一致
- 切り詰め（デバイスの演算とプログラムの実行だけ、最初の数回の実行だけ）
- このマシンの CPU での capture（実際に jax.profiler.trace で書いて読む）
"""
from __future__ import annotations

import gzip
import json

import pytest

from ch6 import hardware, profile


def _trace(ops, modules, device="/device:TPU:0"):
    """合成のトレース: ops は (name, hlo_category, ts, dur, bytes, flops)、modules は (ts, dur)。"""
    events = [{"ph": "M", "pid": 3, "name": "process_name", "args": {"name": device}},
              {"ph": "M", "pid": 3, "tid": 2, "name": "thread_name", "args": {"name": "XLA Modules"}},
              {"ph": "M", "pid": 3, "tid": 3, "name": "thread_name", "args": {"name": "XLA Ops"}},
              {"ph": "M", "pid": 9, "name": "process_name", "args": {"name": "/host:CPU"}},
              {"ph": "M", "pid": 9, "tid": 1, "name": "thread_name", "args": {"name": "python3"}},
              {"ph": "X", "pid": 9, "tid": 1, "ts": 0.0, "dur": 500.0, "name": "PjitFunction(f)"}]
    for ts, dur in modules:
        events.append({"ph": "X", "pid": 3, "tid": 2, "ts": ts, "dur": dur, "name": "jit_f(1)"})
    for name, cat, ts, dur, nbytes, flops in ops:
        args = {"hlo_category": cat, "long_name": f"%{name} = f32[8] fusion()"}
        if nbytes is not None:
            args["bytes_accessed"] = str(nbytes)
        if flops is not None:
            args["model_flops"] = str(flops)
        events.append({"ph": "X", "pid": 3, "tid": 3, "ts": ts, "dur": dur, "name": name, "args": args})
    return {"traceEvents": events}


SYNTH = _trace(
    ops=[("convolution_fusion.1", "convolution fusion", 100.0, 40.0, 819_000, 197_000_000),   # 1 µs / 40 µs
         ("while.2", "while", 140.0, 30.0, None, None),
         ("fusion.3", "loop fusion", 145.0, 10.0, 819_000, 0),          # while の中（入れ子）
         ("fusion.4", "loop fusion", 160.0, 5.0, 819_000, 0),           # while の中（入れ子）
         ("all-reduce-start.5", "async-start", 175.0, 5.0, None, None),
         ("convolution_fusion.6", "convolution fusion", 300.0, 40.0, 819_000, 197_000_000),
         ("copy-done.7", "copy-done", 340.0, 10.0, None, None)],
    modules=[(100.0, 100.0), (300.0, 60.0)])


def test_self_time_subtracts_nested_children_and_categories_follow_xla():
    prof = profile.read(SYNTH)
    assert prof.device == "/device:TPU:0" and prof.n_steps == 2
    by_name = {o.name: o for o in prof.ops}
    assert by_name["while.2"].self_time == pytest.approx(15.0)          # 30 − (10 + 5)
    assert by_name["fusion.3"].self_time == pytest.approx(10.0)
    assert by_name["while.2"].category == profile.CONTROL
    assert by_name["all-reduce-start.5"].category == profile.COLLECTIVE     # 名前で集団通信と分かる
    assert by_name["copy-done.7"].category == profile.COPY
    assert [o.step for o in prof.ops] == [0, 0, 0, 0, 0, 1, 1]
    # 1 回の実行あたり: 行列積 (40 + 40) / 2、演算の合計 (40+15+10+5+5 + 40+10) / 2 = 62.5
    cats = prof.by_category()
    assert cats[profile.MATMUL] == pytest.approx(40.0)
    assert prof.busy() == pytest.approx(62.5)
    assert prof.step_time() == pytest.approx(80.0)                      # 100 と 60 の中央値
    assert cats[profile.IDLE] == pytest.approx(80.0 - 62.5)
    assert prof.gaps() == [(200.0 - 100.0, 100.0)]                      # 開始 100 µs（最初の実行から）、長さ 100


def test_an_op_that_starts_a_rounding_step_before_the_previous_one_ends_is_not_nested():
    """記録したトレースの時刻は 0.001 µs に丸めてある: 行列積が前のコピーの終わりより 0.001 µs 早く始まっても、
    コピーの子ではない（以前は、コピーの自分だけの時間が 0 になっていた）。本当の入れ子（while の中）は引く。"""
    trace = _trace(ops=[("copy-done.1", "copy-done", 100.0, 44.678, None, None),
                        ("fusion.2", "convolution fusion", 144.677, 1418.39, 100, 100),
                        ("while.3", "while", 1600.0, 30.0, None, None),
                        ("fusion.4", "loop fusion", 1610.0, 20.0005, 10, 0)],   # 丸めで while の終わりを 0.0005 越える
                   modules=[(100.0, 1600.0)])
    by_name = {o.name: o for o in profile.read(trace).ops}
    assert by_name["copy-done.1"].self_time == pytest.approx(44.678)
    assert by_name["fusion.2"].self_time == pytest.approx(1418.39)
    assert by_name["while.3"].self_time == pytest.approx(30.0 - 20.0005)


def test_recorded_matmul_keeps_every_copy():
    prof = profile.recorded("matmul")
    copies = [o for o in prof.ops if o.name == "copy-done"]
    assert copies and all(o.self_time == pytest.approx(o.duration) for o in copies)
    one, mu = profile.recorded("train_step").by_category(), profile.recorded("train_step_mu_bf16").by_category()
    assert one[profile.MATMUL] == pytest.approx(mu[profile.MATMUL], rel=0.002)   # 変えたのは Adam だけ


def test_groups_top_and_roofline_per_execution():
    prof = profile.read(SYNTH)
    top = prof.top(2)
    assert top[0]["name"] == "convolution_fusion" and top[0]["count"] == 1 and top[0]["time"] == pytest.approx(40)
    assert top[0]["share"] == pytest.approx(40 / 80)
    v5e = hardware.chip("TPU v5e")
    roof = {r["name"]: r for r in prof.roofline(v5e)}
    # 行列積: 1 回の実行あたり 197e6 FLOP と 819e3 バイト → 下限は max(1 µs, 1 µs) = 1 µs、測った 40 µs
    assert roof["convolution_fusion"]["bound"] == pytest.approx(1.0)
    assert roof["convolution_fusion"]["ratio"] == pytest.approx(40.0)
    assert "while" not in roof                                          # バイトを数えていない演算は入らない


def test_cpu_threads_are_read_by_name():
    events = [{"ph": "M", "pid": 7, "name": "process_name", "args": {"name": "/host:CPU"}},
              {"ph": "M", "pid": 7, "tid": 5, "name": "thread_name", "args": {"name": "tf_XLAExecute/123"}},
              {"ph": "X", "pid": 7, "tid": 5, "ts": 10.0, "dur": 50.0, "name": "ThunkExecutor::Execute"},
              {"ph": "X", "pid": 7, "tid": 5, "ts": 12.0, "dur": 20.0, "name": "ynn_fusion.3"},
              {"ph": "X", "pid": 7, "tid": 5, "ts": 32.0, "dur": 0.1, "name": "end: ynn_fusion.3"},
              {"ph": "X", "pid": 7, "tid": 5, "ts": 35.0, "dur": 10.0, "name": "copy_bitcast_fusion"}]
    prof = profile.read({"traceEvents": events})
    assert [(o.name, o.category) for o in prof.ops] == [("ynn_fusion.3", profile.MATMUL),
                                                         ("copy_bitcast_fusion", profile.COPY)]
    assert prof.n_steps == 1 and prof.step_time() == pytest.approx(50.0)


def test_cpu_threads_of_older_jax_are_read_too():
    """JAX 0.10 の CPU のトレース（TPU のマシンで記録）: 演算は tf_XLAPjRtCpuClient と tf_XLAEigen のスレッドに並び、
    実行の区間の名前は「ThunkExecutor::Execute (wait for completion)」で、演算を囲まないので使わない（実行は、最初の
    演算の名前が現れるたびに始まるとする）。"""
    events = [{"ph": "M", "pid": 7, "name": "process_name", "args": {"name": "/host:CPU"}},
              {"ph": "M", "pid": 7, "tid": 5, "name": "thread_name", "args": {"name": "tf_XLAPjRtCpuClient/-29"}},
              {"ph": "M", "pid": 7, "tid": 6, "name": "thread_name", "args": {"name": "tf_XLAEigen/55"}}]
    for k in range(3):
        t = 100.0 * k
        events += [{"ph": "X", "pid": 7, "tid": 5, "ts": t, "dur": 60.0,
                    "name": "ThunkExecutor::Execute (wait for completion)"},
                   {"ph": "X", "pid": 7, "tid": 5, "ts": t + 1, "dur": 20.0, "name": "dot"},
                   {"ph": "X", "pid": 7, "tid": 5, "ts": t + 22, "dur": 5.0, "name": "SlinkyThreadPool::Await"},
                   {"ph": "X", "pid": 7, "tid": 6, "ts": t + 30, "dur": 10.0, "name": "multiply_subtract_fusion"},
                   {"ph": "X", "pid": 7, "tid": 6, "ts": t + 41, "dur": 1.0, "name": "ThreadpoolListener::Record"}]
    prof = profile.read({"traceEvents": events})
    assert prof.n_steps == 3 and prof.step_time() == pytest.approx(39.0)       # dot の始まりから融合の終わりまで
    assert [o.name for o in prof.step_ops(1)] == ["dot", "multiply_subtract_fusion"]
    assert prof.by_category(idle=False)[profile.MATMUL] == pytest.approx(20.0)


def test_recorded_traces_carry_their_chip_date_and_version():
    names = profile.recorded_names()
    for name in ("decode_bf16", "decode_bf16_token", "decode_int8_before", "decode_int8_after", "decode_int8_token",
                 "matmul", "stream", "train_step", "train_step_mu_bf16"):
        assert name in names
    record = profile.measurements()
    for name in names:
        prof = profile.recorded(name)
        assert prof.meta["scenario"] == name
        assert prof.meta["date"] == record["date"] and prof.meta["jax"] == record["jax"]
        assert prof.meta["device_kind"].startswith("TPU") and prof.device == "/device:TPU:0"
        assert prof.ops and prof.steps
    with pytest.raises(ValueError, match="decode_bf16"):
        profile.recorded("no_such_trace")


def test_recorded_decode_and_training_agree_with_the_measurements():
    """記録したトレースのデバイスの時間は、同じ実行で測った壁時計の時間より短く、その 80 % より長い。"""
    record = profile.measurements()["scenarios"]
    for name, run in record["decode"]["runs"].items():
        prof = profile.recorded(name)
        device = prof.step_time() * 1e-6
        assert 0.8 * run["seconds"] < device <= run["seconds"], (name, device, run["seconds"])
        assert prof.by_category()[profile.IDLE] < 0.01 * prof.step_time()    # 実行の中で、チップはほぼ休まない
    train = profile.recorded("train_step")
    cats = train.by_category()
    assert sum(cats.values()) == pytest.approx(train.step_time(), rel=0.01)
    assert 0.7 < cats[profile.MATMUL] / train.step_time() < 0.9
    assert record["train_step"]["batch_16"]["seconds"] > train.step_time() * 1e-6


def test_trim_keeps_only_device_events_and_the_first_executions():
    small = profile.trim(SYNTH, {"scenario": "synth"}, steps=1)
    assert small["ch6"] == {"scenario": "synth"}
    xs = [e for e in small["traceEvents"] if e["ph"] == "X"]
    assert all(e["pid"] == 3 for e in xs)                              # ホストの区間は落ちる
    assert max(e["ts"] for e in xs) < 300.0                            # 2 回目の実行は落ちる
    again = profile.read(small)
    assert again.n_steps == 1 and again.meta["scenario"] == "synth"
    assert {o.name for o in again.ops} == {"convolution_fusion.1", "while.2", "fusion.3", "fusion.4",
                                           "all-reduce-start.5"}


def test_trim_folder_writes_small_files(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "synth.json.gz").write_bytes(gzip.compress(json.dumps(SYNTH).encode()))
    (raw / "measurements.json").write_text(json.dumps({"date": "2026-12-06", "jax": "0", "backend": "tpu",
                                                        "device_kind": "TPU v5 lite", "python": "3", "scenarios": {}}))
    written = profile.trim_folder(raw, tmp_path / "out")
    assert sorted(p.name for p in written) == ["measurements.json", "synth.json.gz"]
    prof = profile.read(tmp_path / "out" / "synth.json.gz")
    assert prof.meta["device_kind"] == "TPU v5 lite" and prof.n_steps == 1


def test_capture_on_this_machine():
    import jax
    import jax.numpy as jnp

    f = jax.jit(lambda x: jnp.tanh(x @ x).sum())
    x = jnp.ones((64, 64))
    prof = profile.capture(lambda: f(x), runs=3)
    assert prof.meta["backend"] == jax.default_backend()
    assert prof.ops and prof.n_steps == 3
    assert sum(prof.by_category(idle=False).values()) > 0
