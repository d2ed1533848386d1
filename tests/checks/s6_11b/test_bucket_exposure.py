"""6.11b-3 exposed_allreduce: 正しい答えは通り、バケットのまとめ方と時刻の自然な誤りはそれぞれの言葉で落ちる。"""
from ch6 import Status, cost, overlap
from ch6.checks.s6_11b.bucket_exposure import MISTAKES, cases, plan, reference
from ch6.checks.s6_11b.common import exercise_rng
from ch6.recorded import input_devices
from tests.checkhelp import boom, expect, not_done


def with_plan(sizes, bucket_bytes, n, bw, t_backward, latency, group_by=plan):  # 自分で書いたまとめ方（plan）
    end, done, grand = 0.0, 0, sum(sizes)
    for group in group_by(sizes, bucket_bytes):
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
    todo = cases(exercise_rng(3), input_devices())  # チェックと同じ数（9 個以上では 8）
    sizes, bb = todo[0][1], todo[0][2]
    groups = plan(sizes, bb)
    assert any(len(g) == 1 and sizes[g[0]] > bb for g in groups)
    assert any(sum(sizes[i] for i in g) == bb for g in groups)
    assert groups == overlap.buckets(sizes, bb)
    want = [reference(*c[1:]) for c in todo]
    seen = {}
    for kind, _ in MISTAKES:
        answers = tuple(round(reference(*c[1:], kind=kind), 12) for c in todo)
        assert answers != tuple(round(w, 12) for w in want), kind
        assert answers not in seen, (kind, seen.get(answers))  # 前の誤りの言葉に隠れない
        seen[answers] = kind
    first_big = [c for c in todo if c[1][0] > c[2]]  # 最初の葉が上限より大きく、latency > 0 の入力
    assert first_big and first_big[0][6] > 0


def test_reference_and_other_correct_answers_pass():
    expect("6.11b-3", variant(""), Status.PASS, "4 通り", "通信律速")
    expect("6.11b-3", with_plan, Status.PASS)


def test_the_lessons_buckets_is_named():
    """問題文の必須: まとめ方は ch6.overlap.buckets と同じだが、使わずに書く。呼べば値は正しくても、その呼び出しを言う。"""
    def with_library(sizes, bucket_bytes, n, bw, t_backward, latency):
        return with_plan(sizes, bucket_bytes, n, bw, t_backward, latency, group_by=overlap.buckets)
    expect("6.11b-3", with_library, Status.FAIL, "本編の overlap.buckets を呼んでいます")
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


def test_trial_mistakes_are_named():
    """学習者の試行: 負の秒が生の浮動小数のまま「0 以上」とだけ言われ、ミリ秒の答えと逆順の葉には一般のヒント、
    最初の葉が上限より大きいときの空のバケットは通っていた。"""
    def before_bucket(sizes, bucket_bytes, n, bw, t_backward, latency):  # そろう時刻をバケットの前までのバイトで
        grand, done, end = sum(sizes), 0, 0.0
        for group in plan(sizes, bucket_bytes):
            nbytes = sum(sizes[i] for i in group)
            end = max(end, t_backward * done / grand) + cost.all_reduce_time(nbytes, n, bw) + latency
            done += nbytes
        return end - t_backward

    def empty_first(sizes, bucket_bytes, n, bw, t_backward, latency):  # 今のバケットが空でも閉じる
        groups, current, total = [], [], 0
        for size in sizes:
            if total + size > bucket_bytes:
                groups.append(current)
                current, total = [], 0
            current.append(size)
            total += size
        groups.append(current)
        grand, done, end = sum(sizes), 0, 0.0
        for group in groups:
            done += sum(group)
            end = max(end, t_backward * done / grand) + cost.all_reduce_time(sum(group), n, bw) + latency
        return end - t_backward

    msg = expect("6.11b-3", before_bucket, Status.FAIL, "最初の葉の前まで", "最後の葉までのバイトの和")
    assert "e-0" not in msg, msg
    expect("6.11b-3", lambda *a: 1e3 * with_plan(*a), Status.FAIL, "ミリ秒で返して", "秒で返します")
    expect("6.11b-3", lambda s, *a: with_plan(s[::-1], *a), Status.FAIL, "逆の順", "並べ替えずに")
    expect("6.11b-3", empty_first, Status.FAIL, "空のバケット", "latency")


def test_wrong_types_and_unnamed_errors():
    expect("6.11b-3", lambda *a: None, Status.FAIL, "NoneType")
    msg = expect("6.11b-3", lambda *a: -1.0, Status.FAIL, "-1000 ms（負）", "0 より大きく")
    assert "e-0" not in msg, msg
    expect("6.11b-3", lambda *a: float("nan"), Status.FAIL, "有限の数")
    expect("6.11b-3", lambda *a: 1.5 * reference(*a), Status.FAIL, "のはずが")
    expect("6.11b-3", not_done, Status.NOT_DONE)
    expect("6.11b-3", boom, Status.ERROR, "ZeroDivisionError")
