"""6.11a-1 furthest_below_roofline: ルーフラインの下限から最も遠い演算の種類（割合の条件つき）。"""
from __future__ import annotations

from ch6 import Status
from tests.checkhelp import boom, expect, not_done

EX = "6.11a-1"


def make(duration=False, per_execution=True, threshold=True, smallest=False, flops=True, none_as_zero=False,
         inverse=False, bound_sum=False):
    def furthest_below_roofline(prof, chip, min_share):
        groups = {}
        for op in prof.ops:
            g = groups.setdefault((op.group, op.xla_category), {"time": 0.0, "bytes": 0, "flops": 0})
            g["time"] += op.duration if duration else op.self_time
            if none_as_zero:
                g["bytes"] += op.bytes or 0
            else:
                g["bytes"] = None if g["bytes"] is None or op.bytes is None else g["bytes"] + op.bytes
            g["flops"] += op.flops or 0
        best = None
        for (name, category), g in groups.items():
            time = g["time"] / (prof.n_steps if per_execution else 1)
            if threshold and time < min_share * prof.step_time():
                continue
            if g["bytes"] is None or (g["bytes"] <= 0 and not none_as_zero):
                continue
            parts = (g["flops"] / chip.flops if flops else 0.0, g["bytes"] / chip.hbm_bw)
            bound = (sum(parts) if bound_sum else max(parts)) / prof.n_steps * 1e6
            ratio = float("inf") if bound == 0 else time / bound
            if best is None or (ratio < best[2] if smallest else ratio > best[2]):
                best = (name, category, ratio)
        if inverse and best is not None:
            return best[0], best[1], 1 / best[2]
        return best
    return furthest_below_roofline


def test_reference_and_library_answers_pass():
    expect(EX, make(), Status.PASS, "最も遠い種類")

    def with_roofline(prof, chip, min_share):      # ライブラリの roofline と top を使う答え
        rows = [r for r in prof.roofline(chip) if r["time"] >= min_share * prof.step_time()]
        best = max(rows, key=lambda r: r["ratio"], default=None)
        return None if best is None else (best["name"], best["xla_category"], best["ratio"])
    expect(EX, with_roofline, Status.PASS)


def test_named_mistakes():
    expect(EX, make(duration=True), Status.FAIL, "duration", "self_time")
    expect(EX, make(per_execution=False), Status.FAIL, "n_steps")
    expect(EX, make(threshold=False), Status.FAIL, "min_share")
    expect(EX, make(smallest=True), Status.FAIL, "最も小さい")
    expect(EX, make(flops=False), Status.FAIL, "FLOP の項")
    expect(EX, make(none_as_zero=True), Status.FAIL, "バイトのない演算の種類")
    expect(EX, make(inverse=True), Status.FAIL, "逆数")
    expect(EX, make(bound_sum=True), Status.FAIL, "比が")


def test_grouping_by_name_only_is_named():
    def by_name(prof, chip, min_share):
        groups = {}
        for op in prof.ops:
            g = groups.setdefault(op.group, {"time": 0.0, "bytes": 0, "flops": 0, "category": op.xla_category})
            g["time"] += op.self_time
            g["bytes"] = None if g["bytes"] is None or op.bytes is None else g["bytes"] + op.bytes
            g["flops"] += op.flops or 0
        best = None
        for name, g in groups.items():
            time = g["time"] / prof.n_steps
            if g["bytes"] is None or g["bytes"] <= 0 or time < min_share * prof.step_time():
                continue
            bound = max(g["flops"] / chip.flops, g["bytes"] / chip.hbm_bw) / prof.n_steps * 1e6
            if best is None or time / bound > best[2]:
                best = (name, g["category"], time / bound)
        return best
    from ch6 import run_check
    message = run_check(EX, by_name).message
    assert "XLA の分類が違う演算をまとめています" in message and "decode_bf16 で、" in message, message


def test_none_bytes_that_stop_the_learner_code_are_named():
    def adds_none(prof, chip, min_share):
        total = {}
        for op in prof.ops:
            total[op.group] = total.get(op.group, 0) + op.bytes
        return None
    expect(EX, adds_none, Status.FAIL, "bytes が None")


def test_hard_coded_and_malformed_answers():
    expect(EX, lambda prof, chip, s: ("fusion", "loop fusion", 1.7), Status.FAIL, "のはずが")
    expect(EX, lambda prof, chip, s: None, Status.FAIL, "None")
    expect(EX, lambda prof, chip, s: "fusion", Status.FAIL, "3 つ組")
    expect(EX, lambda prof, chip, s: (1, 2, 3), Status.FAIL, "文字列")
    expect(EX, lambda prof, chip, s: ("a", "b", "c"), Status.FAIL, "数のはず")


def test_not_done_and_learner_error():
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR, "ZeroDivisionError")
