"""6.8a-2 peak_activations: スケジュールの表から、ステージごとに持っておく活性値の数の最大を数える。

隠しの表は GPipe・1F1B・順伝播を先に何個か行う順番のほか、「まとめて流す」順番（いくつかずつ F を行ってから、その B を
行う）と、順伝播だけの表を含む。まとめて流す表では最大が最初の B より後に来るので、「最初の B までの F の数」という
近道は通らない。順伝播だけの表では行の終わりに活性値が残るので、行をつないで数える答えは通らない。
"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, LearnerError, call, exercise, fmt
from ...recorded import input_devices, recorded
from .common import exercise_rng, gpipe_order, one_f_one_b_order, peak_stored, simulate, warmup_order


def _as_counts(got, n_stages: int, what: str) -> list[int]:
    """学習者の戻り値を、ステージごとの整数の列にする（違えば何が返ったかを言って不合格）。"""
    if isinstance(got, (bool, np.bool_)) or isinstance(got, (int, np.integer)):
        raise Fail(f"{what}: 長さ {n_stages} の列のはずが、整数 1 つ（{got}）でした。ステージごとに数えて並べます。")
    try:
        arr = np.asarray(got)
    except Exception:
        raise Fail(f"{what}: ステージごとの数の列のはずが、{type(got).__name__} でした。") from None
    if arr.dtype == object or arr.ndim != 1:
        shown = f"形 {fmt(tuple(arr.shape))} の " if arr.ndim >= 1 else ""  # 形 () は配列でない値（None、関数）にも出る
        raise Fail(f"{what}: 長さ {n_stages} の整数の列のはずが、{shown}{type(got).__name__} でした。")
    if len(arr) != n_stages:
        raise Fail(f"{what}: 長さ {n_stages}（ステージの数）の列のはずが、長さ {len(arr)} でした。表の 1 行が 1 ステージです。")
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)) or arr.dtype == np.bool_:
        raise Fail(f"{what}: 整数の列のはずが、要素の型が {arr.dtype} でした。")
    if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr) & (arr == np.round(arr))):
        raise Fail(f"{what}: 活性値の数は整数のはずが、{fmt(tuple(float(v) for v in arr[:4]))} … でした。")
    return [int(v) for v in arr]


@recorded
def _forward_counts(table) -> list[int]:
    return [sum(e.startswith("F") for e in row) for row in table]


@recorded
def _final_counts(table) -> list[int]:
    """表の最後のティックの後に持っている数（途中の最大ではない。すべて逆伝播が済めば 0）。"""
    return [sum(e.startswith("F") for e in row) - sum(e.startswith("B") for e in row) for row in table]


@recorded
def _busy_counts(table) -> list[int]:
    return [sum(bool(e) for e in row) for row in table]


def _burst_order(n_micro: int, groups) -> list:
    """まとめて流す順番: groups の大きさずつ F を行い、その B を後ろから行う（どのステージも同じ順番）。"""
    order, start = [], 0
    for g in groups:
        ms = list(range(start, start + g))
        order += [("F", m) for m in ms] + [("B", m) for m in reversed(ms)]
        start += g
    assert start == n_micro
    return order


@recorded
def _one_digit(table) -> list[int]:
    """番号を 1 文字だけ読んで、持っている番号の集合で数えた数（"F1" と "F10" が同じ番号になる）。"""
    out = []
    for row in table:
        held: set[str] = set()
        best = 0
        for e in row:
            if e.startswith("F"):
                held.add(e[1:2])
                best = max(best, len(held))
            elif e.startswith("B"):
                held.discard(e[1:2])
        out.append(best)
    return out


def _answer(fn, table, n: int, what: str) -> list[int]:
    try:
        got = call(fn, [list(row) for row in table])
    except LearnerError as exc:
        if isinstance(exc.exc, IndexError) and "string index" in str(exc.exc):
            raise Fail(f"{what}で文字列の添字が範囲を超えました（空きのマスは空文字 \"\" です）。"
                       "startswith で調べるか、空きを先に飛ばします。") from None
        raise
    return _as_counts(got, n, what)


@recorded
def _rows_joined(table) -> list[int]:
    """すべての行を 1 本につないで数えた数（前の行の終わりに残った数を次の行へ持ち越す）。"""
    out, live = [], 0
    for row in table:
        best = live
        for e in row:
            live += 1 if e.startswith("F") else -1 if e.startswith("B") else 0
            best = max(best, live)
        out.append(best)
    return out


@recorded
def _along_columns(table) -> list[int]:
    """列（同じティックのステージ）の向きに足して、各行の最大をとった数。"""
    steps = np.array([[1 if e.startswith("F") else -1 if e.startswith("B") else 0 for e in row] for row in table])
    return [int(v) for v in np.cumsum(steps, axis=0).max(axis=1)]


@recorded
def max_before_increment(table) -> list[int]:
    """各ティックで、B なら 1 減らしてから最大をとり、F ならその後で 1 増やした数（F のティックで保存した活性値を
    最大に数えない）。"""
    out = []
    for row in table:
        live = best = 0
        for e in row:
            live -= e.startswith("B")
            best = max(best, live)
            live += e.startswith("F")
        out.append(best)
    return out


@recorded
def before_first_backward(table) -> list[int]:
    """最初の B までの F の数（まとめて流す順番では最大にならない）。"""
    out = []
    for row in table:
        count = 0
        for e in row:
            if e.startswith("B"):
                break
            count += e.startswith("F")
        out.append(count)
    return out


@exercise("6.8a-2", "peak_activations")
def check_peak_activations(fn):
    rng = exercise_rng(2)
    n = max(3, min(6, input_devices()))  # 1 デバイスでも 3 ステージ以上の表で確かめる
    m = 11  # 2 桁の番号（"F10"）も出てくる
    warm = sorted((int(w) for w in rng.integers(0, m, size=n)), reverse=True)
    groups = [2, 5, 4]  # 最初の組より後の組が大きい: 最大は最初の B の後
    cases = [("GPipe", simulate(gpipe_order(n, m))),
             ("1F1B", simulate(one_f_one_b_order(n, m))),
             (f"順伝播を先に {warm} 個ずつ行う順番", simulate(warmup_order(m, warm))),
             (f"{groups} 個ずつまとめて流す順番", simulate([_burst_order(m, groups) for _ in range(n)])),
             ("順伝播だけの順番", simulate([[("F", k) for k in range(m)] for _ in range(n)]))]
    whats = [f"{name}{' ' if name[-1].isascii() else ''}の表（{n} ステージ、M = {m}）" for name, _ in cases]
    tables = [table for _, table in cases]
    mistakes = (  # 名前を言う誤り: (その誤りの答え, その文)。すべての表で同じ答えになるときだけ言う
        (_forward_counts, "順伝播の数を数えていますが、B m が済んだ活性値は捨てるので 1 減らします。"),
        (lambda table: [max(peak_stored(table))] * n, "全ステージで同じ最大値を返していますが、ステージごとに別々に数えます。"),
        (_final_counts, "表の最後に持っている数を返していますが、返すのは途中の最大です。"),
        (_busy_counts, "空きでないマスを数えていますが、F で 1 増え、B で 1 減ります。"),
        (_one_digit, "番号を 1 文字だけ読むと、2 桁の F10 が F1 と同じ番号になります。"),
        (lambda table: [n - i for i in range(n)], "1F1B の S − s を返していますが、表は 1F1B とは限らないので、行を左から読んで数えます。"),
        (lambda table: [w - 1 for w in peak_stored(table)], "どのステージも 1 少ないので、F のティックで 1 増やした後の数も最大に入れます。"),
        (before_first_backward, "最初の B までの F を数えていますが、最大はその後に来ることがあります。"),
        (_rows_joined, "行をつないで前のステージの残りを持ち越しているので、ステージごとに 0 から数え直します。"),
        (_along_columns, "列（ティック）の向きに数えているので、1 行を 1 ステージとして行ごとに左から数えます。"),
        (max_before_increment, "F で 1 増やす前に最大をとっているので、F のティックで保存した活性値も最大に入れます。"),
    )
    # 参照の値と誤りの答えはすべて学習者を呼ぶ前に（学習者版では、作るときに記録した値を引く）
    wants = [peak_stored(table) for table in tables]
    alts = [[rule(table) for table in tables] for rule, _ in mistakes]
    gots = [_answer(fn, table, n, what) for (_, table), what in zip(cases, whats)]
    if gots == wants:
        return (f"{n} ステージ、M = {m} の {len(cases)} つの表（GPipe、1F1B、ほか 3 つの順番）で一致しました"
                f"（1F1B は {wants[1]}）。")

    k = next(i for i, (g, w) in enumerate(zip(gots, wants)) if g != w)
    got, want = gots[k], wants[k]
    s = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
    said = f"{whats[k]}: ステージ {s} の最大が {want[s]} になるはずが {got[s]} でした。"
    for (_, why), alt in zip(mistakes, alts):
        if gots == alt:  # 誤りの名前は、すべての表で同じ答えになるときだけ言う
            raise Fail(said + why)
    raise Fail(said + "行を左から読み、F で 1 増やして最大を更新し、B で 1 減らします。")
