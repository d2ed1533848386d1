"""6.11b-3 exposed_allreduce: 正しい答えは通り、バケットのまとめ方と時刻の自然な誤りはそれぞれの言葉で落ちる。"""
from ch6 import Status, cost, overlap
from ch6.checks.s6_11b.bucket_exposure import MISTAKES, cases, plan, reference
from ch6.checks.s6_11b.common import exercise_rng
from tests.checkhelp import N, boom, expect, not_done


def with_library(sizes, bucket_bytes, n, bw, t_backward, latency):  # ch6.overlap.buckets と同じまとめ方
    end, done, grand = 0.0, 0, sum(sizes)
    for group in overlap.buckets(sizes, bucket_bytes):
        nbytes = sum(sizes[i] for i in group)
        done += nbytes
        end = max(end, t_backward * done / grand) + cost.all_reduce_time(nbytes, n, bw) + latency
    return end - t_backward


def event_by_event(sizes, bucket_bytes, n, bw, t_backward, latency):  # 葉ごとに時刻を進める書き方
    grand, made, end, current = sum(sizes), 0, 0.0, 0
    for size in sizes:
        if current and current + size > bucket_bytes:
            end = max(end, t_backward * made / grand) + 2 * current * (n - 1) / n / bw + latency
            current = 0
        current += size
        made += size
    end = max(end, t_backward) + 2 * current * (n - 1) / n / bw + latency
    return end - t_backward


def variant(kind):
    return lambda sizes, bb, n, bw, tb, lat: reference(sizes, bb, n, bw, tb, lat, kind=kind)


def test_hidden_cases_have_an_oversized_leaf_an_exact_fit_and_a_comm_bound_case():
    todo = cases(exercise_rng(3), N)
    sizes, bb = todo[0][1], todo[0][2]
    groups = plan(sizes, bb)
    assert any(len(g) == 1 and sizes[g[0]] > bb for g in groups)
    assert any(sum(sizes[i] for i in g) == bb for g in groups)
    assert groups == overlap.buckets(sizes, bb)
    want = [reference(*c[1:]) for c in todo]
    for kind, _ in MISTAKES:
        assert [reference(*c[1:], kind=kind) for c in todo] != want, kind


def test_reference_and_other_correct_answers_pass():
    expect("6.11b-3", variant(""), Status.PASS, "3 通り", "通信律速")
    expect("6.11b-3", with_library, Status.PASS)
    expect("6.11b-3", event_by_event, Status.PASS)


def test_time_mistakes_are_named():
    expect("6.11b-3", variant("all_exposed"), Status.FAIL, "すべてのバケット", "逆伝播の終わりより後")
    expect("6.11b-3", variant("last_only"), Status.FAIL, "最後のバケット", "前の all-reduce が終わるのを待つ")
    expect("6.11b-3", variant("total"), Status.FAIL, "t_backward を引いた")
    expect("6.11b-3", variant("first_leaf"), Status.FAIL, "最初の葉", "最後の葉")
    expect("6.11b-3", variant("no_latency"), Status.FAIL, "latency")
    expect("6.11b-3", variant("half"), Status.FAIL, "all-gather", "2 倍")
    expect("6.11b-3", variant("no_n_factor"), Status.FAIL, "(n − 1)/n")
    expect("6.11b-3", variant("equal_buckets"), Status.FAIL, "等しい大きさ")


def test_bucket_mistakes_are_named():
    expect("6.11b-3", variant("over_limit"), Status.FAIL, "上限を超えたバケット")
    expect("6.11b-3", variant("at_limit"), Status.FAIL, "ちょうど上限")
    expect("6.11b-3", variant("oversized_joins"), Status.FAIL, "上限より大きい葉", "それだけで 1 つ")


def test_wrong_types_and_unnamed_errors():
    expect("6.11b-3", lambda *a: None, Status.FAIL, "NoneType")
    expect("6.11b-3", lambda *a: -1.0, Status.FAIL, "0 以上")
    expect("6.11b-3", lambda *a: 1.5 * reference(*a), Status.FAIL, "のはずが")
    expect("6.11b-3", not_done, Status.NOT_DONE)
    expect("6.11b-3", boom, Status.ERROR, "ZeroDivisionError")
