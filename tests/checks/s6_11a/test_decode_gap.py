"""6.11a-3 decode_gap: 達成できる帯域による下限と、下限で説明できない割合。"""
from __future__ import annotations

from ch6 import Status
from ch6.hardware import chip
from tests.checkhelp import boom, expect, not_done

EX = "6.11a-3"


def make(stream_wall=False, decode_wall=False, gigabytes=False, twice=False, datasheet=False, over_bound=False,
         busy=False, explained=False, ms=False, us=False, percent=False, total=False):
    def decode_gap(stream, stream_run, decode, decode_run):
        def device_seconds(prof):
            t = sum(d for _, _, d in prof.steps) if total else (prof.busy() if busy else prof.step_time())
            return t * (1 if us else 1e-6)
        seconds = stream_run["seconds"] if stream_wall else device_seconds(stream)
        if twice:
            seconds /= stream.n_steps
        size = stream_run["gib"] * (1e9 if gigabytes else 2**30)
        bandwidth = chip("TPU v5e").hbm_bw if datasheet else size / seconds
        bound = decode_run["read"] / bandwidth
        if decode_wall:
            device = decode_run["seconds"]
        else:
            device = device_seconds(decode)
        if twice:
            device /= decode.n_steps
        share = (device - bound) / (bound if over_bound else device)
        share = 1 - share if explained else share
        return bound * (1e3 if ms else 1), share * (100 if percent else 1)
    return decode_gap


def test_reference_and_busy_pass():
    expect(EX, make(), Status.PASS, "一致しました")
    expect(EX, make(busy=True), Status.PASS)


def test_named_mistakes():
    expect(EX, make(stream_wall=True), Status.FAIL, "壁時計の秒で求めています")
    expect(EX, make(decode_wall=True), Status.FAIL, "decode_run の壁時計")
    expect(EX, make(gigabytes=True), Status.FAIL, "2**30")
    expect(EX, make(twice=True), Status.FAIL, "2 度割って")
    expect(EX, make(datasheet=True), Status.FAIL, f"{chip('TPU v5e').hbm_bw / 1e9:.0f} GB/s")
    expect(EX, make(over_bound=True), Status.FAIL, "下限で割って")
    expect(EX, make(explained=True), Status.FAIL, "説明できる側")
    expect(EX, make(ms=True), Status.FAIL, "ミリ秒")


def test_units_percent_total_and_keys_are_named():
    expect(EX, make(us=True), Status.FAIL, "下限がマイクロ秒になっています", "× 1e-6 で秒に")
    expect(EX, make(percent=True), Status.FAIL, "割合を百分率にしています", "0〜1 の数で返します")
    expect(EX, make(total=True), Status.FAIL, "すべての実行の合計の時間", "step_time()")

    def lesson_key(stream, stream_run, decode, decode_run):
        return decode_run["read"] / (stream_run["bytes"] / stream.step_time() * 1e6), 0.1
    expect(EX, lesson_key, Status.FAIL, "'bytes'", '"gib"', '"read"')


def test_malformed_answers():
    expect(EX, lambda *a: 0.5, Status.FAIL, "2 つ組")
    expect(EX, lambda *a: ("a", 0.1), Status.FAIL, "数のはず")
    expect(EX, lambda *a: (float("nan"), 0.1), Status.FAIL, "NaN")
    expect(EX, lambda *a: (0.0025, 0.2), Status.FAIL, "のはずが")


def test_not_done_and_learner_error():
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR, "ZeroDivisionError")
