"""6.11a-1 furthest_below_roofline: ルーフラインの下限から最も遠い演算の種類（割合の条件つき）。"""
from __future__ import annotations

from ch6 import Status
from tests.checkhelp import boom, expect, not_done

EX = "6.11a-1"


def make(duration=False, per_execution=True, threshold=True, smallest=False, flops=True, none_as_zero=False,
         inverse=False, bound_sum=False, busy=False, percent=False, seconds=False, bound_ms=False, time_ms=False,
         time_s=False, ratio_percent=False, keep_zero=False, flops_none=False, by_op_name=False, as_list=False,
         mixed_none=False, empty_max=False, kind=None):
    def furthest_below_roofline(prof, chip, min_share):
        groups = {}
        for op in prof.ops:
            key = (op.name if by_op_name else op.group, op.category if kind == "category" else op.xla_category)
            g = groups.setdefault(key, {"time": 0.0, "bytes": 0, "flops": 0, "counted": 0})
            g["time"] += op.duration if duration else op.self_time
            if none_as_zero:
                g["bytes"] += op.bytes or 0
            elif mixed_none:                            # 数えた演算の分だけ足す（一部だけ None の種類も残る）
                g["bytes"] += op.bytes or 0
                g["counted"] += op.bytes is not None
            else:
                g["bytes"] = None if g["bytes"] is None or op.bytes is None else g["bytes"] + op.bytes
            if flops_none:                              # FLOP が None の演算で TypeError（バイトのない演算は飛ばす）
                if op.bytes is not None:
                    g["flops"] += op.flops
            else:
                g["flops"] += op.flops or 0
        rows = []
        for (name, category), g in groups.items():
            time = g["time"] / (prof.n_steps if per_execution else 1)
            limit = (min_share / 100 if percent else min_share) * (prof.busy() if busy else prof.step_time())
            if threshold and time < limit:
                continue
            if g["bytes"] is None or (mixed_none and g["counted"] == 0):
                continue
            if g["bytes"] <= 0 and not (none_as_zero or keep_zero):
                continue
            parts = (g["flops"] / chip.flops if flops else 0.0, g["bytes"] / chip.hbm_bw)
            bound = (sum(parts) if bound_sum else max(parts)) / prof.n_steps
            bound *= 1.0 if seconds else 1e3 if bound_ms else 1e6
            if none_as_zero and bound == 0:
                ratio = float("inf")
            else:
                ratio = time * (1e-3 if time_ms else 1e-6 if time_s else 1) / bound   # keep_zero: 0 で割る
            rows.append((name, category, ratio * (100 if ratio_percent else 1)))
        if empty_max:
            best = max(rows, key=lambda r: r[2])
        else:
            best = max(rows, key=lambda r: r[2], default=None)
            if smallest and rows:
                best = min(rows, key=lambda r: r[2])
        if inverse and best is not None:
            return best[0], best[1], 1 / best[2]
        if as_list and best is not None:
            return list(best)
        return best
    return furthest_below_roofline


def test_reference_and_library_answers_pass():
    expect(EX, make(), Status.PASS, "最も遠い種類")

    def with_roofline(prof, chip, min_share):      # ライブラリの roofline と top を使う答え
        rows = [r for r in prof.roofline(chip) if r["time"] >= min_share * prof.step_time()]
        best = max(rows, key=lambda r: r["ratio"], default=None)
        return None if best is None else (best["name"], best["xla_category"], best["ratio"])
    expect(EX, with_roofline, Status.PASS)


def test_a_list_and_either_rule_for_partly_counted_bytes_pass():
    expect(EX, make(as_list=True), Status.PASS)
    expect(EX, make(mixed_none=True), Status.PASS)


def test_hidden_inputs_have_no_kind_with_bytes_counted_for_only_some_ops():
    """問題文の「一部の演算だけ bytes が None の種類はどちらでもよい」が、どの隠し入力でも成り立つこと。"""
    from ch6.checks.s6_11a.roofline_group import cases
    for what, prof, *_ in cases():
        seen = {}
        for op in prof.ops:
            seen.setdefault((op.group, op.xla_category), set()).add(op.bytes is None)
        assert all(len(v) == 1 for v in seen.values()), what


def test_the_busy_kind_lies_between_the_two_thresholds():
    from ch6.checks.s6_11a.roofline_group import answer, hidden_case
    prof, chip, share = hidden_case()
    assert prof.busy() < 0.98 * prof.step_time()
    assert answer(prof, chip, share, busy=True)[0] == "reduce_fusion" != answer(prof, chip, share)[0]


def test_named_mistakes():
    expect(EX, make(duration=True), Status.FAIL, "合成のトレースで", "duration", "self_time")
    expect(EX, make(per_execution=False), Status.FAIL, "n_steps")
    expect(EX, make(threshold=False), Status.FAIL, "min_share")
    expect(EX, make(smallest=True), Status.FAIL, "最も小さい")
    expect(EX, make(flops=False), Status.FAIL, "FLOP の項")
    expect(EX, make(none_as_zero=True), Status.FAIL, "バイトのない演算の種類 custom-call")
    expect(EX, make(inverse=True), Status.FAIL, "逆数")
    expect(EX, make(bound_sum=True), Status.FAIL, "合成のトレースで", "2 つの項の和")


def test_threshold_against_busy_or_as_a_percentage_is_named():
    expect(EX, make(busy=True), Status.FAIL, "busy()", "空き時間を含む", "step_time()")
    expect(EX, make(percent=True), Status.FAIL, "百分率として 100 で割って")


def test_unit_slips_in_the_ratio_are_named_by_their_factor():
    expect(EX, make(seconds=True), Status.FAIL, "下限を秒のままにしています", "× 1e6")
    expect(EX, make(bound_ms=True), Status.FAIL, "下限をミリ秒にしています")
    expect(EX, make(time_ms=True), Status.FAIL, "時間をミリ秒にしています")
    expect(EX, make(time_s=True), Status.FAIL, "時間を秒にしています")
    expect(EX, make(ratio_percent=True), Status.FAIL, "比を百分率にしています")


def test_per_execution_hint_only_when_the_ratio_is_off_by_n_steps():
    def per_run_time_total_bound(prof, chip, min_share):     # 下限だけ n_steps で割り忘れる
        best = make()(prof, chip, min_share)
        return None if best is None else (best[0], best[1], best[2] * prof.n_steps)
    expect(EX, per_run_time_total_bound, Status.FAIL, "は合っていますが", "1 回の実行あたり")

    def slightly_off(prof, chip, min_share):
        best = make()(prof, chip, min_share)
        return None if best is None else (best[0], best[1], best[2] * 1.1)
    message = expect(EX, slightly_off, Status.FAIL, "は合っていますが", "max(FLOP ÷ chip.flops")
    assert "1 回の実行あたりで求めます" not in message, message


def test_none_case():
    expect(EX, make(empty_max=True), Status.FAIL, "min_share 以上を占める種類のない合成のトレースでエラーになりました",
           "None を返します")

    def empty_tuple(prof, chip, min_share):
        return make()(prof, chip, min_share) or ()
    expect(EX, empty_tuple, Status.FAIL, "空の tuple", "None を返します")

    def first_kind_when_none_qualifies(prof, chip, min_share):
        best = make()(prof, chip, min_share)
        if best is None:
            rows = [r for r in prof.roofline(chip)]
            return rows[0]["name"], rows[0]["xla_category"], rows[0]["ratio"]
        return best
    expect(EX, first_kind_when_none_qualifies, Status.FAIL, "種類がない入力で", "を返しました", "None を返します")


def test_crash_on_flops_none_is_told_from_bytes_none():
    expect(EX, make(flops_none=True), Status.FAIL, "バイトはあるが FLOP が None の演算", "FLOP を 0 として")


def test_zero_bytes():
    expect(EX, make(keep_zero=True), Status.FAIL, "バイトが 0 の種類（bitcast など）で 0 で割りました",
           "bytes が 0 の種類も除きます")

    def returns_zero_byte_kind(prof, chip, min_share):
        rows = []
        for r in prof.by_group():
            if r["bytes"] is None or r["time"] < min_share * prof.step_time():
                continue
            bound = max((r["flops"] or 0) / chip.flops, r["bytes"] / chip.hbm_bw) * 1e6
            rows.append((r["name"], r["xla_category"], float("inf") if bound == 0 else r["time"] / bound))
        return max(rows, key=lambda r: r[2], default=None)
    expect(EX, returns_zero_byte_kind, Status.FAIL, "バイトが 0 の種類 bitcast を返しました")


def test_keying_by_op_name_or_course_category_is_named():
    expect(EX, make(by_op_name=True), Status.FAIL, "演算の名前（通し番号付きの fusion.82 など）ごと",
           "Op.group と xla_category の組")
    expect(EX, make(kind="category"), Status.FAIL, "ch6.profile の分類", "Op.xla_category")


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
    expect(EX, lambda prof, chip, s: "fusion", Status.FAIL, "タプルのはずが、str")
    expect(EX, lambda prof, chip, s: ("fusion", 1.7), Status.FAIL, "長さ 3 のタプル", "長さ 2 の tuple")
    expect(EX, lambda prof, chip, s: (1, 2, 3), Status.FAIL, "文字列")
    expect(EX, lambda prof, chip, s: ("a", "b", "c"), Status.FAIL, "数のはず")
    expect(EX, lambda prof, chip, s: ("fusion", "loop fusion", "1.712"), Status.FAIL, "数のはず", "str")


def test_not_done_and_learner_error():
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR, "ZeroDivisionError")
