"""6.6-1 local_rows: グローバルなバッチ B 行のうち、プロセス p が読み込む行の範囲 [start, stop)。

約束（問題文）: メッシュはグローバルデバイス P·L 個を 1 本の軸に並べ（プロセスの順）、バッチを P('data') で分割する。
B が P·L で割り切れなければ ValueError。
隠しの構成には奇数のプロセス数・デバイス数と、割り切れ方の違う 4 種類の「割り切れない」構成が入る。
"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, LearnerError, call, exercise
from ...recorded import recorded
from .common import as_int, exercise_rng

# 割り切れない構成: (B, P, L) と、その B が P と L のそれぞれで割り切れるか
BAD = (
    (66, 3, 4),   # P では割り切れ、L では割り切れない
    (44, 3, 4),   # L では割り切れ、P では割り切れない
    (12, 2, 4),   # P でも L でも割り切れるが、P·L = 8 では割り切れない
    (67, 2, 4),   # どれでも割り切れない
)


@recorded
def expected(global_batch: int, process_index: int, process_count: int, local_device_count: int) -> dict:
    """正しい範囲 "rows"（割り切れなければ None）と、名指しする誤りの範囲（1 デバイス分、1 から数える）。"""
    if global_batch % (process_count * local_device_count):
        return {"rows": None}
    per = global_batch // process_count
    per_device = global_batch // (process_count * local_device_count)
    return {"rows": (process_index * per, (process_index + 1) * per),
            "one_device": (process_index * per_device, (process_index + 1) * per_device),
            "from_one": ((process_index + 1) * per, (process_index + 2) * per)}


@recorded
def divisibility_slips(bad: tuple) -> dict:
    """割り切れない構成 bad のそれぞれで、割り切れるかの調べ方の誤りが ValueError を送出するか（誤りの名前 -> 並び）。"""
    return {"process": [b % p != 0 for b, p, _ in bad], "local": [b % ell != 0 for b, _, ell in bad],
            "separately": [b % p != 0 or b % ell != 0 for b, p, ell in bad]}


def reference(global_batch: int, process_index: int, process_count: int, local_device_count: int):
    rows = expected(global_batch, process_index, process_count, local_device_count)["rows"]
    if rows is None:
        raise ValueError("not divisible")
    return rows


def good_cases(rng: np.random.Generator) -> list[tuple[int, int, int]]:
    """割り切れる構成 (B, P, L)。1 プロセス、奇数のプロセス数とデバイス数、隠しの乱数の構成を含む。"""
    cases = [(48, 2, 4), (66, 3, 1), (90, 5, 3), (36, 3, 4), (7, 1, 7)]
    for _ in range(3):
        p, ell = int(rng.integers(2, 7)), int(rng.integers(1, 6))
        cases.append((p * ell * int(rng.integers(1, 5)), p, ell))
    return cases


def _pair(got, what: str) -> tuple[int, int]:
    if isinstance(got, slice):
        if got.step not in (None, 1):
            raise Fail(f"{what}: 行は連続した範囲のはずが、step {got.step} の slice でした。プロセスの行は飛び飛びになりません。")
        got = (got.start, got.stop)
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        shown = f"長さ {len(got)} の {type(got).__name__}" if isinstance(got, (tuple, list)) else type(got).__name__
        raise Fail(f"{what}: 戻り値は (start, stop) の 2 つ組のはずが、{shown} でした。")
    return as_int(got[0], f"{what}: start "), as_int(got[1], f"{what}: stop ")


def _wrong_range(what, want, got, n_local) -> Fail:
    (ws, we), (gs, ge) = want["rows"], got
    said = f"{what} の行は [{ws}, {we}) のはずが、[{gs}, {ge}) でした。"
    one_device = want["one_device"]
    if n_local > 1 and (gs, ge) == one_device:
        return Fail(said + f"1 デバイス分の {one_device[1] - one_device[0]} 行ではなく、"
                    f"ローカルデバイス {n_local} 個分の B / P 行を読みます。")
    if (gs, ge) == (ws, we - 1):
        return Fail(said + "stop は範囲に含まれない（半開区間）ので、最後の行の番号 + 1 にします。")
    if (gs, ge) == want["from_one"]:
        return Fail(said + "プロセス番号は 0 から数えるので、プロセス p の行は p·B/P 行目から始まります。")
    return Fail(said + "プロセス p の行は連続していて、p·B/P から (p + 1)·B/P の手前までです。")


def _raised(fn, case) -> BaseException | None:
    """割り切れない構成で学習者の関数を呼ぶ。送出された例外（なければ None）を返す。"""
    b, n_proc, n_local = case
    try:
        call(fn, b, 0, n_proc, n_local)
    except LearnerError as err:
        return err.exc
    return None


@exercise("6.6-1", "local_rows")
def check_local_rows(fn):
    cases = good_cases(exercise_rng(1))
    # 参照の値はすべて学習者を呼ぶ前に（学習者版では、作るときに記録した値を引く）
    wants = {(b, p, n_proc, n_local): expected(b, p, n_proc, n_local)
             for b, n_proc, n_local in cases for p in range(n_proc)}
    for b, n_proc, n_local in BAD:  # 参照そのもの（reference）を答えとして渡すテストのため、記録にも入れる
        expected(b, 0, n_proc, n_local)
    slips = divisibility_slips(BAD)
    for b, n_proc, n_local in cases:
        for p in range(n_proc):
            what = f"B = {b}、{n_proc} プロセス × ローカルデバイス {n_local} 個のプロセス {p}"
            try:
                out = call(fn, b, p, n_proc, n_local)
            except LearnerError as err:
                if isinstance(err.exc, ValueError):
                    raise Fail(f"{what}: {b} 行はグローバルデバイス {n_proc * n_local} 個で割り切れるのに、"
                               "ValueError が出ました。割り切れないときだけ送出します。") from None
                raise
            got = _pair(out, what)
            want = wants[b, p, n_proc, n_local]
            if got != want["rows"]:
                raise _wrong_range(what, want, got, n_local)
    raised = [_raised(fn, case) for case in BAD]
    for case, exc in zip(BAD, raised):
        if exc is not None and not isinstance(exc, ValueError):
            b, n_proc, n_local = case
            raise Fail(f"B = {b}、{n_proc} プロセス × ローカルデバイス {n_local} 個で送出されたのは {type(exc).__name__} でした。"
                       "割り切れないことは ValueError で知らせます（raise ValueError(...)）。")
    pattern = [exc is not None for exc in raised]
    if all(pattern):
        return (f"{len(cases)} 通りの構成のすべてのプロセスで範囲が一致し、割り切れない {len(BAD)} 通りでは "
                "ValueError になりました。")
    b, n_proc, n_local = next(c for c, hit in zip(BAD, pattern) if not hit)
    head = f"B = {b}、{n_proc} プロセス × ローカルデバイス {n_local} 個では ValueError になるはずが、送出されませんでした。"
    if pattern == slips["process"]:
        raise Fail(head + "プロセス数で割り切れるかではなく、グローバルデバイス数 P·L で割り切れるかを調べます。")
    if pattern == slips["local"]:
        raise Fail(head + "ローカルデバイス数で割り切れるかではなく、グローバルデバイス数 P·L で割り切れるかを調べます。")
    if pattern == slips["separately"]:
        raise Fail(head + f"P と L のそれぞれで割り切れても、P·L = {n_proc * n_local} で割り切れるとは限りません。")
    raise Fail(head + f"B が P·L = {n_proc * n_local} で割り切れないときは、raise ValueError(...) で止めます。")

