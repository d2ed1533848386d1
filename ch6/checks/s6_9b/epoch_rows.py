"""6.9b-1 process_rows: エポックごとに窓を並べ替え（重複なし）、プロセスの行だけを返すデータのシャード。

約束（問題文）: 文章を重ならない窓（長さ seq + 1）W = len(data) // (seq + 1) 個に切り、エポック e の順序は
``default_rng((seed, e)).permutation(W)``。窓の列はエポック 0、1、… の順序をつないだもの。ステップ t の
グローバルバッチはその列の [t·B, (t+1)·B) 番目、プロセス p（P 個のうち）はその行 [p·B/P, (p+1)·B/P)。
隠しの文章の長さ・seq・B・seed で、エポックの境目をまたぐステップと、いくつものプロセスの数で確かめます。
"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, call, exercise
from ...recorded import is_recording, recorded
from .common import exercise_rng


def windows(data: np.ndarray, seq: int) -> np.ndarray:
    w = len(data) // (seq + 1)
    return data[: w * (seq + 1)].reshape(w, seq + 1)


@recorded
def stream_ids(n_windows: int, start: int, count: int, seed: int) -> np.ndarray:
    """窓の列の [start, start + count) 番目の窓の番号。"""
    out = []
    for k in range(start, start + count):
        e, i = divmod(k, n_windows)
        out.append(np.random.default_rng((seed, e)).permutation(n_windows)[i])
    return np.asarray(out)


@recorded
def reference(data, step, process_index, process_count, batch, seq, seed):
    win = windows(np.asarray(data), seq)
    ids = stream_ids(len(win), step * batch, batch, seed)
    per = batch // process_count
    return win[ids[process_index * per:(process_index + 1) * per]].astype(np.int32)


@recorded
def wrong_answer(kind, data, step, p, count, batch, seq, seed):
    """名指しする誤り（kind ごと）の答え。"""
    win = windows(data, seq)
    per = batch // count
    if kind == "lesson":  # ステップごとに乱数で位置を選ぶ（重複あり、6.9a の ByteBatches）
        starts = np.random.default_rng((seed, step)).integers(0, len(data) - seq - 1, size=batch)
        rows = data[starts[:, None] + np.arange(seq + 1)]
        return rows[p * per:(p + 1) * per]
    if kind == "process_seed":  # プロセスごとに種を変える
        return reference(data, step, 0, 1, batch, seq, seed + p)[:per]
    if kind == "strided":  # 行を飛び飛びに取る
        return reference(data, step, 0, 1, batch, seq, seed)[p::count]
    if kind == "one_epoch":  # エポックの境目で、前のエポックの残りを捨てて次のエポックから始める
        steps_per_epoch = len(win) // batch
        e, s = divmod(step, steps_per_epoch)
        ids = np.random.default_rng((seed, e)).permutation(len(win))[s * batch:(s + 1) * batch]
        return win[ids][p * per:(p + 1) * per]
    if kind == "batch_epoch":  # バッチ全体に、先頭の窓のエポック t·B // W の順序を使う
        e = step * batch // len(win)
        order = np.random.default_rng((seed, e)).permutation(len(win))
        ids = [order[k % len(win)] for k in range(step * batch, (step + 1) * batch)]
        return win[np.asarray(ids)][p * per:(p + 1) * per]
    if kind == "seed_sum":  # 種を (seed, e) の組ではなく seed + e にする
        ids = [np.random.default_rng(seed + k // len(win)).permutation(len(win))[k % len(win)]
               for k in range(step * batch, (step + 1) * batch)]
        return win[np.asarray(ids)][p * per:(p + 1) * per]
    if kind == "per_process_stride":  # ステップの先頭を step·B ではなく step·(B/P) にする
        ids = stream_ids(len(win), step * per + p * per, per, seed)
        return win[ids]
    if kind == "inverse":  # 並べ替えの逆（argsort）を順序に使う
        ids = [np.argsort(np.random.default_rng((seed, k // len(win))).permutation(len(win)))[k % len(win)]
               for k in range(step * batch, (step + 1) * batch)]
        return win[np.asarray(ids)][p * per:(p + 1) * per]
    if kind == "one_generator":  # 1 つの default_rng(seed) から、エポックごとに続けて並べ替えを引く
        rng = np.random.default_rng(seed)
        last = ((step + 1) * batch - 1) // len(win)
        order = np.concatenate([rng.permutation(len(win)) for _ in range(last + 1)])
        return win[order[step * batch:(step + 1) * batch]][p * per:(p + 1) * per]
    if kind == "padded":  # 余りのバイトを 0 で埋めて、最後の半端な窓も数える（W を切り上げる）
        w = -(-len(data) // (seq + 1))
        if w * (seq + 1) == len(data):
            return reference(data, step, p, count, batch, seq, seed)
        padded = np.concatenate([data, np.zeros(w * (seq + 1) - len(data), data.dtype)]).reshape(w, seq + 1)
        return padded[stream_ids(w, step * batch + p * per, per, seed)]
    if kind == "own_seed":  # プロセスごとに種を変え、自分の行の位置から取る
        return reference(data, step, p, count, batch, seq, seed + p)
    if kind == "same_order":  # どのエポックも同じ並べ替え（エポック 0 の順序）
        ids = [np.random.default_rng((seed, 0)).permutation(len(win))[k % len(win)]
               for k in range(step * batch, (step + 1) * batch)]
        return win[np.asarray(ids)][p * per:(p + 1) * per]
    raise ValueError(kind)


_MISTAKES = (
    ("lesson", "ステップごとに乱数で位置を選んでいます（6.9a の ByteBatches の方法）。この問題は、重ならない窓をエポックごとに並べ替えて、重複なく使います。"),
    ("process_seed", "プロセスごとに乱数の種を変えたので、プロセスの数を変えるとグローバルバッチが変わります。並べ替えはプロセスによらず (seed, エポック) だけで決めます。"),
    ("strided", "行を飛び飛びに（p, p + P, …）取っています。プロセス p はグローバルバッチの連続した行 p·B/P から (p+1)·B/P までを受け持ちます。"),
    ("one_epoch", "エポックの境目で前のエポックの残りの窓を捨てています。窓の列はエポックをつないだものなので、境目をまたぐバッチは前のエポックの残りと次のエポックの先頭から作ります。"),
    ("batch_epoch", "境目をまたぐバッチで、次のエポックに入った窓にも前のエポックの順序を使っています。窓ごとに e = k // W を求め、そのエポックの順序から取ります。"),
    ("own_seed", "プロセスごとに乱数の種を変えたので（seed + p）、プロセスの数を変えるとグローバルバッチが変わります。"
                 "並べ替えはプロセスによらず (seed, エポック) だけで決めます。"),
    ("inverse", "窓の列に、並べ替えの逆（np.argsort(perm)）を使っています。エポック e の k 番目の窓は perm[k]"
                "（perm = default_rng((seed, e)).permutation(W)）です。"),
    ("one_generator", "1 つの default_rng(seed) から、エポックごとに続けて並べ替えを引いています。エポック e の順序は、"
                      "そのたびに新しく作る default_rng((seed, e)) の並べ替えです（途中のエポックから再開しても同じ順序）。"),
    ("padded", "余りのバイトを埋めて、最後の半端な窓も窓に数えています。窓は W = len(data) // (seq + 1) 個で、"
               "余りのバイトは使いません。"),
    ("same_order", "どのエポックも同じ順序で窓を並べています。エポック e の順序は default_rng((seed, e)) の並べ替えです。"),
    ("seed_sum", "乱数の種を seed + e にしています。エポック e の順序は、seed と e の組を渡した default_rng((seed, e)) の並べ替えです。"),
    ("per_process_stride", "ステップ t の先頭を t·(B/P) にしています。グローバルバッチはプロセスの数によらず窓の列の t·B 番目から"
                           "始まり、プロセス p はそこから p·B/P 行ずれた所を受け持ちます。"),
)


def cases(r):
    """(説明, data, batch, seq, seed, steps, counts): エポックの境目をまたぐステップを含む。"""
    out = []
    for seq, batch, length in ((7, 12, 700), (5, 24, 1000), (9, 6, 311)):
        data = r.integers(0, 256, size=length).astype(np.uint8)
        w = length // (seq + 1)
        cross = (w // batch) if w % batch else max(0, w // batch - 1)   # エポックの境目をまたぐステップ
        # 境目をまたがないことの多い遅いステップを境目より先に確かめる（「どのエポックも同じ順序」を先に名指す）
        steps = list(dict.fromkeys([0, 3 * w // batch + 1, cross, cross + 1]))
        counts = [c for c in (1, 2, 3, 4, 6) if batch % c == 0]
        out.append((f"隠しの文章（{length} バイト、seq {seq}、バッチ {batch}）", data, batch, seq, int(r.integers(1, 99)),
                    steps, counts))
    return out


def _window_ids(rows: np.ndarray, win: np.ndarray) -> list[int | None]:
    """各行が何番の窓か（どの窓とも一致しなければ None）。"""
    out = []
    for row in rows:
        hit = np.flatnonzero((win == row).all(axis=1))
        out.append(int(hit[0]) if len(hit) else None)
    return out


def _short(ids) -> str:
    ids = [("?" if i is None else int(i)) for i in ids]
    return "[" + ", ".join(map(str, ids[:6])) + (", …" if len(ids) > 6 else "") + "]"


def _mismatch(where, got, want, data, step, p, count, batch, seq, seed) -> str:
    """名指しの誤りに当たらないとき: 期待した窓の番号と、返った行の窓の番号（窓でなければその行）を並べる。"""
    win = windows(data, seq)
    per = batch // count
    want_ids = stream_ids(len(win), step * batch + p * per, per, seed)
    got_ids = _window_ids(got, win)
    for other in (step + 1, step - 1):
        if other >= 0 and (got == reference(data, other, p, count, batch, seq, seed)).all():
            return (f"{where}: ステップ {other} の行が返りました（ステップ {step} の窓の番号は {_short(want_ids)}）。"
                    "ステップ t のグローバルバッチは、窓の列の t·B 番目から始まります（t は 0 から数えます）。")
    if None in got_ids:
        i = got_ids.index(None)
        return (f"{where}: 返った行 {i} は、窓のどれとも一致しません。"
                "窓は、文章を先頭から重ならずに切ったものです（窓 j は data[j·(seq+1):(j+1)·(seq+1)]）。"
                f"このプロセスの窓の番号は {_short(want_ids)} のはずです。")
    return (f"{where}: このプロセスの行は窓の番号 {_short(want_ids)} のはずが、窓 {_short(got_ids)} が返りました"
            f"（窓の列のステップ {step} の行と一致しません）。")


def _record_all(hidden) -> None:
    """学習者版を作るときだけ: どの答えでも使いうる参照の値（正しい行、名指しする誤り、隣のステップ、窓の番号）。"""
    for _, data, batch, seq, seed, steps, counts in hidden:
        n_windows = len(windows(data, seq))
        for step in steps:
            for count in counts:
                per = batch // count
                for p in range(count):
                    for other in (step - 1, step, step + 1):
                        if other >= 0:
                            reference(data, other, p, count, batch, seq, seed)
                    for kind, _ in _MISTAKES:
                        wrong_answer(kind, data, step, p, count, batch, seq, seed)
                    stream_ids(n_windows, step * batch + p * per, per, seed)


@exercise("6.9b-1", "process_rows")
def check_process_rows(fn):
    r = exercise_rng(1)
    hidden = cases(r)
    if is_recording():
        _record_all(hidden)
    for label, data, batch, seq, seed, steps, counts in hidden:
        for step in steps:
            for count in counts:
                for p in range(count):
                    out = call(fn, data.copy(), step, p, count, batch, seq, seed)
                    want = reference(data, step, p, count, batch, seq, seed)
                    where = f"{label}、ステップ {step}、{count} プロセスのうちプロセス {p}"
                    if not (hasattr(out, "shape") and hasattr(out, "dtype")):
                        raise Fail(f"{where}: 形 {want.shape}・int32 の配列のはずが、{type(out).__name__} が返りました"
                                   "（行のリストなら np.stack(rows) で 1 つの配列にします）。")
                    try:
                        got = np.asarray(out)
                    except Exception:
                        raise Fail(f"{where}: 配列のはずが {type(out).__name__} が返りました。") from None
                    if got.shape != want.shape:
                        whole = (f"グローバルバッチ全体の {batch} 行を返しています。" if count > 1 and got.ndim == 2
                                 and got.shape[0] == batch else "")
                        raise Fail(f"{where}: 形 {want.shape}（このプロセスの行数 B/P, seq + 1）の配列のはずが、"
                                   f"形 {got.shape} が返りました。{whole}")
                    if not np.issubdtype(got.dtype, np.integer):
                        raise Fail(f"{where}: バイトのトークンは整数（int32）で返します。dtype は {got.dtype} でした。")
                    if got.dtype != np.int32:
                        raise Fail(f"{where}: トークンは int32 で返す決まりです（学習ステップは int32 の入力でコンパイル"
                                   f"します）。dtype は {got.dtype} でした（.astype(np.int32) で変えます）。")
                    if (got == want).all():
                        continue
                    for kind, message in _MISTAKES:
                        alt = wrong_answer(kind, data, step, p, count, batch, seq, seed)
                        if alt.shape == got.shape and (alt == got).all():
                            raise Fail(f"{where}: {message}")
                    if (np.sort(got, axis=0) == np.sort(want, axis=0)).all():
                        raise Fail(f"{where}: 窓は合っていますが、行の順序が違います。行はグローバルバッチの順に並べます。")
                    raise Fail(_mismatch(where, got, want, data, step, p, count, batch, seq, seed))
    return "隠しの 3 つの文章で、エポックの境目をまたぐステップとどのプロセスの数でも、行が一致しました。"
