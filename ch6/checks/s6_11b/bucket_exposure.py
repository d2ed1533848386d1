"""6.11b-3 exposed_allreduce: 大きさの違う葉をバケットにまとめ、逆伝播と重ねて all-reduce したとき、見える通信の秒。

約束（問題文）: 葉は逆伝播が勾配を作る順。前から順に、足しても bucket_bytes を超えないなら今のバケットに足し、超えるなら
新しいバケットを始める（上限より大きい葉は、それだけで 1 つのバケット）。逆伝播は一定の速さでバイトを作るので、
バケットがそろう時刻は t_backward × (そのバケットの最後の葉までのバイトの和) ÷ (全体のバイト)。all-reduce は 1 つずつ順に、
バケットがそろい、前の all-reduce が終わってから始め、1 つの秒は cost.all_reduce_time(バケットのバイト, n, bw) + latency。
答えは最後の all-reduce が終わる時刻 − t_backward。最後のバケットは逆伝播の終わりにそろうので、答えはいつも正。
4 つ目の隠し入力は最初の葉が上限より大きく、逆伝播が短い（通信律速）: 最初に空のバケットを作ると、その latency が
最後まで残る。
"""
from __future__ import annotations

import math

from ...checking import Fail, call, exercise
from ...cost import all_gather_time, all_reduce_time, bucketed_allreduce_time
from ...recorded import input_devices, recorded
from ..lesson_calls import lesson_calls
from .common import as_seconds, exercise_rng

RTOL = 1e-6


def plan(sizes, bucket_bytes, kind=""):
    """葉の番号のバケット（kind を渡すと、名指しする誤りのまとめ方）。"""
    out, current, total = [], [], 0
    for i, size in enumerate(sizes):
        if kind == "empty_first" and not current and not out and size > bucket_bytes:
            out.append([])  # 「足すと超える」で、空の今のバケットまで閉じてしまう
        if kind == "oversized_joins" and size > bucket_bytes:
            current.append(i)  # 上限より大きい葉を今のバケットに足してしまう
            total += size
            continue
        full = total + size >= bucket_bytes if kind == "at_limit" else total + size > bucket_bytes
        if kind == "over_limit":  # 足してから上限を超えたら閉じる（閉じたバケットは上限を超えている）
            current.append(i)
            total += size
            if total > bucket_bytes:
                out.append(current)
                current, total = [], 0
            continue
        if current and full:
            out.append(current)
            current, total = [], 0
        current.append(i)
        total += size
    if current:
        out.append(current)
    return out


@recorded
def reference(sizes, bucket_bytes, n, bw, t_backward, latency, kind=""):
    """正しい秒（kind を渡すと、名指しする誤りの秒）。"""
    if kind == "reversed":
        sizes = sizes[::-1]
    groups = plan(sizes, bucket_bytes, kind)
    if kind == "equal_buckets":
        return bucketed_allreduce_time(sum(sizes), n, bw, t_backward, len(groups), latency).exposed
    grand = sum(sizes)
    done = end = 0.0
    times = []
    for g in groups:
        nbytes = sum(sizes[i] for i in g)
        before, first = done, done + (sizes[g[0]] if g else 0)
        done += nbytes
        ready = t_backward * {"first_leaf": first, "before_bucket": before}.get(kind, done) / grand
        if kind == "half":
            t = all_gather_time(nbytes, n, bw)
        elif kind == "no_n_factor":
            t = 2 * nbytes / bw
        else:
            t = all_reduce_time(nbytes, n, bw)
        t += 0.0 if kind == "no_latency" else latency
        times.append(t)
        end = max(end, ready) + t
    if kind == "all_exposed":
        return sum(times)
    if kind == "last_only":
        return times[-1]
    if kind == "total":
        return end
    if kind == "ms":
        return 1e3 * (end - t_backward)
    return end - t_backward


def cases(rng, n_dev: int):
    """(説明, sizes, bucket_bytes, n, bw, t_backward, latency)。"""
    ring = n_dev + 3  # all-reduce のリングのデバイスの数（隠しの n）
    mb = 1 << 20
    base = [int(s) * mb for s in rng.integers(3, 9, size=5)]
    sizes_a = [base[0], 20 * mb, base[2], 12 * mb - base[2], base[3], base[4]]  # 上限より大きい葉と、ちょうど上限の組
    bw = float(rng.uniform(8e10, 2e11))
    t_a = 1.4 * all_reduce_time(sum(sizes_a), ring, bw)        # 逆伝播のほうが長い
    sizes_b = [int(s) * mb for s in rng.integers(2, 12, size=9)]
    t_b = 0.3 * all_reduce_time(sum(sizes_b), ring + 2, bw)    # 通信律速
    sizes_c = [5 * mb, 5 * mb, 30 * mb, 2 * mb, 7 * mb, 3 * mb]
    sizes_d = [24 * mb] + [int(s) * mb for s in rng.integers(2, 7, size=5)]  # 最初の葉が上限 8 MiB より大きい
    t_d = 0.1 * all_reduce_time(sum(sizes_d), ring, bw)         # 通信律速: 空のバケットの latency が最後まで残る
    return [
        (f"{len(sizes_a)} 個の葉・上限 12 MiB", sizes_a, 12 * mb, ring, bw, t_a, 2e-5),
        (f"{len(sizes_b)} 個の葉・通信律速", sizes_b, 16 * mb, ring + 2, bw, t_b, 5e-5),
        (f"{len(sizes_c)} 個の葉・上限 10 MiB", sizes_c, 10 * mb, 2 * ring, 1.5 * bw, 0.02, 1e-4),
        (f"{len(sizes_d)} 個の葉・最初の葉が上限 8 MiB より大きい", sizes_d, 8 * mb, ring, bw, t_d, 3e-4),
    ]


MISTAKES = (
    ("ms", "ミリ秒で返しています。秒で返します。"),
    ("before_bucket", "そろう時刻を、バケットの最初の葉の前までのバイトで求めています。"
                      "t_backward × (最後の葉までのバイトの和) ÷ (全体のバイト) で求めます。"),
    ("reversed", "葉を逆の順に使っています。sizes はすでに逆伝播が勾配を作る順なので、並べ替えずに前から使います。"),
    ("all_exposed", "すべてのバケットの all-reduce を見える通信として足しています。逆伝播と重なった分は隠れ、"
                    "見えるのは逆伝播の終わりより後の分だけです。"),
    ("last_only", "最後のバケットの all-reduce の秒だけを返しています。通信律速では前の all-reduce が終わるのを待つので、"
                  "1 つずつ順に終わりの時刻を求めます。"),
    ("total", "最後の all-reduce が終わる時刻を返しています。見える通信は、そこから t_backward を引いた秒です。"),
    ("over_limit", "葉を足してから上限を超えたかを調べているので、上限を超えたバケットがあります。"
                   "足すと超えるなら、先に新しいバケットを始めます。"),
    ("at_limit", "ちょうど上限になる葉でも新しいバケットを始めています。足しても bucket_bytes を超えないなら、同じバケットに入れます。"),
    ("empty_first", "最初の葉が上限より大きいとき、空のバケットを作っています。空のバケットの all-reduce も latency の分だけ"
                    "時間を使うので、作っているバケットが空なら新しいバケットを始めずに葉を入れます。"),
    ("oversized_joins", "上限より大きい葉を、作っているバケットに足しています。その葉は、それだけで 1 つのバケットにします。"),
    ("first_leaf", "バケットの all-reduce を、最初の葉ができた時刻から始めています。始められるのは、バケットの最後の葉ができてからです。"),
    ("no_latency", "1 回の all-reduce の秒に latency を足していません。バケットを増やすと、この固定の秒も回数だけ増えます。"),
    ("half", "all-reduce の秒を all-gather の秒で数えています。リングの all-reduce は reduce-scatter と all-gather で、その 2 倍です。"),
    ("no_n_factor", "all-reduce の秒が 2·バイト/bw で、(n − 1)/n がありません。cost.all_reduce_time(バイト, n, bw) を使います。"),
    ("equal_buckets", "バケットを等しい大きさとして cost.bucketed_allreduce_time で求めています。"
                      "ここでは葉の大きさが違うので、まとめたバケットのバイトとそろう時刻を 1 つずつ使います。"),
)


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=RTOL, abs_tol=1e-12)


@exercise("6.11b-3", "exposed_allreduce")
def check_exposed_allreduce(fn):
    todo = cases(exercise_rng(3), input_devices())
    # 参照の値はすべて学習者を呼ぶ前に（学習者版では、作るときに記録した値を引く）
    want = [reference(*case[1:]) for case in todo]
    alts = [[reference(*case[1:], kind=kind) for case in todo] for kind, _ in MISTAKES]
    with lesson_calls(fn, "ch6.overlap", "buckets") as called:
        got = [as_seconds(call(fn, list(sizes), bb, n, bw, tb, lat), label)
               for label, sizes, bb, n, bw, tb, lat in todo]
    if called:  # 問題文の必須: まとめ方は overlap.buckets と同じだが、使わずに書く
        raise Fail("本編の overlap.buckets を呼んでいます。葉をバケットにまとめる処理も、この関数の中で自分で書いてください。")
    if all(_same(g, w) for g, w in zip(got, want)):
        return (f"大きさの違う葉の {len(todo)} 通り（上限より大きい葉、ちょうど上限、通信律速）で一致しました"
                f"（例: {todo[0][0]} → {want[0] * 1e3:.3f} ms）。")
    for (_, message), alt in zip(MISTAKES, alts):
        if all(_same(g, a) for g, a in zip(got, alt)):
            raise Fail(message)
    i = next(i for i, (g, w) in enumerate(zip(got, want)) if not _same(g, w))
    if got[i] < 0:
        raise Fail(f"{todo[i][0]}: 見える通信が {got[i] * 1e3:.4g} ms（負）でした。最後のバケットは逆伝播の終わりにそろうので、"
                   "最後の all-reduce はその後に終わり、答えは 0 より大きくなります。")
    raise Fail(f"{todo[i][0]}: 見える通信は {want[i] * 1e3:.4g} ms のはずが {got[i] * 1e3:.4g} ms でした。"
               "バケットのまとめ方と、各 all-reduce の始まり（そろう時刻と前の終わりの遅いほう）を確かめてください。")
