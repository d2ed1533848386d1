"""6.11a-3 decode_gap: ストリーミングの記録から達成できる帯域を求め、デコードの下限と、下限で説明できない割合。"""
from __future__ import annotations

from ... import profile
from ...checking import Fail, LearnerError, call, exercise, fmt
from ...hardware import chip
from ...recorded import recorded
from .common import exercise_rng, pair_of_numbers, sep, synthetic

# 必須: 帯域 = stream_run["gib"] × 2**30 バイト ÷ stream のデバイスの時間（1 回の実行、秒）。
# 下限 = decode_run["read"] ÷ 帯域（秒）。割合 = (decode のデバイスの時間 − 下限) ÷ decode のデバイスの時間。
# 戻り値は (下限の秒, 割合)。デバイスの時間は step_time() でも busy() でもよい（下限は相対 1 %、割合は 0.008 まで）。
RTOL = 1e-2
SHARE_ATOL = 8e-3
DATASHEET = chip("TPU v5e").hbm_bw  # 公表値（データシートの行。訂正はここにも届く）


@recorded
def answer(stream, stream_run, decode, decode_run, *, stream_wall=False, decode_wall=False, gigabytes=False,
           twice=False, datasheet=False, over_bound=False, total=False):
    def device_seconds(prof):
        if total:
            return sum(d for _, _, d in prof.steps) * 1e-6
        return prof.step_time() * 1e-6 / (prof.n_steps if twice else 1)
    seconds = stream_run["seconds"] if stream_wall else device_seconds(stream)
    size = stream_run["gib"] * (1e9 if gigabytes else 2**30)
    bandwidth = DATASHEET if datasheet else size / seconds
    bound = decode_run["read"] / bandwidth
    device = decode_run["seconds"] if decode_wall else device_seconds(decode)
    return bound, (device - bound) / (bound if over_bound else device)


def _stream(r, gib, steps):
    """合成のストリーミングの記録: 達成できる帯域は 450〜700 GB/s（公表値から遠い）、壁時計はデバイスの 1.2〜1.4 倍。"""
    seconds = gib * 2**30 / float(r.uniform(450e9, 700e9))
    us = seconds * 1e6
    ops = [("convert_reduce_fusion", "loop fusion", k * (us + 40) + 0.2, us - 0.4, gib * 2**30, gib * 2**30 / 2)
           for k in range(steps)]
    prof = synthetic(ops, [(k * (us + 40), us) for k in range(steps)])
    return prof, {"gib": gib, "seconds": seconds * float(r.uniform(1.2, 1.4))}


def _decode(r, steps, read, bandwidth):
    """合成のデコードの記録: デバイスの時間は、達成できる帯域による下限の 1.15〜1.6 倍。"""
    us = read / bandwidth * float(r.uniform(1.15, 1.6)) * 1e6
    ops = []
    for k in range(steps):
        t0 = k * (us + 60)
        ops += [("fusion.1", "convolution fusion", t0 + 0.5, 0.7 * us, read * 0.8, 1e9),
                ("fusion.2", "loop fusion", t0 + 0.7 * us + 1, 0.2 * us, read * 0.2, 1e6),
                ("copy-done.3", "copy-done", t0 + 0.9 * us + 1.5, 0.1 * us - 2.5, 1e6, 0)]
    return synthetic(ops, [(k * (us + 60), us) for k in range(steps)]), {"read": read, "seconds": us * 1e-6 * 1.1}


@recorded
def _achieved(stream, gib):
    """合成のストリーミングの記録から測れる、達成できる帯域（バイト/秒）。デコードの記録を作るのに使う。"""
    return gib * 2**30 / (stream.step_time() * 1e-6)


def cases():
    r = exercise_rng(3)
    out = []
    for gib, steps in [(1.5, 3), (3.0, 2)]:
        stream, stream_run = _stream(r, gib, steps)
        decode, decode_run = _decode(r, 4 - steps + 1, float(r.uniform(0.8e9, 1.5e9)),
                                     _achieved(stream, stream_run["gib"]))
        out.append(("合成の記録", stream, stream_run, decode, decode_run))
    record = profile.measurements()["scenarios"]
    name = str(r.choice(["decode_int8_after", "decode_int8_token", "decode_bf16"]))
    run = record["decode"]["runs"][name]
    out.append((f"記録した stream と {name}", profile.recorded("stream"),
                {"gib": record["stream"]["bytes"] / 2**30, "seconds": record["stream"]["seconds"]},
                profile.recorded(name), {"read": run["read"], "seconds": run["seconds"]}))
    return out


def _close(got, want) -> bool:
    """下限（1 つ目）は相対の誤差、割合（2 つ目）は絶対の誤差で比べる。"""
    tol = [RTOL * abs(want[0]) + 1e-12, SHARE_ATOL]
    return all(abs(g - w) <= t for g, w, t in zip(got, want, tol))


MISTAKES = [
    (dict(stream_wall=True), "帯域を stream_run の壁時計の秒で求めています。壁時計には呼び出しと待ちの時間が入るので、"
                             "stream のトレースのデバイスの時間（step_time()）で割ります。"),
    (dict(decode_wall=True), "デコードの時間に decode_run の壁時計の秒を使っています。下限で説明できない割合は、"
                             "decode のトレースのデバイスの時間（step_time()）に対して求めます。"),
    (dict(gigabytes=True), "GiB を 10 の 9 乗バイトとして数えています。1 GiB は 2**30 バイトなので、"
                           "stream_run[\"gib\"] × 2**30 です。"),
    (dict(twice=True), "実行の回数で 2 度割っています。step_time() はすでに 1 回の実行の時間なので、n_steps で割りません。"),
    (dict(total=True), "すべての実行の合計の時間を使っています。使うのは 1 回の実行の時間（step_time()）です。"),
    (dict(datasheet=True), f"データシートの {DATASHEET / 1e9:.0f} GB/s を使っています。ここで求めるのは、stream の記録から測った"
                           "達成できる帯域による下限です。"),
    (dict(over_bound=True), "割合を下限で割っています。デバイスの時間のうちの割合なので、(デバイスの時間 − 下限) ÷ "
                            "デバイスの時間です。"),
]


@exercise("6.11a-3", "decode_gap")
def check_decode_gap(fn):
    todo = cases()
    # 参照の値はすべて学習者を呼ぶ前に（学習者版では、作るときに記録した値を引く）
    expected = [(answer(*case[1:]), [answer(*case[1:], **kw) for kw, _ in MISTAKES]) for case in todo]
    for (what, stream, stream_run, decode, decode_run), (want, alts) in zip(todo, expected):
        try:
            value = call(fn, stream, dict(stream_run), decode, dict(decode_run))
        except LearnerError as err:
            if isinstance(err.exc, KeyError):
                raise Fail(f"辞書にないキー {err.exc.args[0]!r} を読んで止まりました。stream_run のキーは \"gib\" と "
                           "\"seconds\"、decode_run のキーは \"read\" と \"seconds\" です。") from None
            raise
        got = pair_of_numbers(value, f"{what}{sep(what)}の戻り値", "(下限の秒, 割合)")
        if _close(got, want):
            continue
        for (_, text), alt in zip(MISTAKES, alts):
            if _close(got, alt) or (not _close(got[:1], want[:1]) and _close(got[:1], alt[:1])):
                raise Fail(f"{what}{sep(what)}で、{text}")
        if _close(got[:1], want[:1]) and abs(got[1] - (1 - want[1])) <= SHARE_ATOL:
            raise Fail(f"{what}{sep(what)}で、割合が説明できる側（下限 ÷ デバイスの時間）になっています。"
                       "説明できない割合は 1 からそれを引いた値です。")
        if _close(got[:1], [want[0] * 1e6]):
            raise Fail(f"{what}{sep(what)}で、下限がマイクロ秒になっています。step_time() はマイクロ秒なので "
                       "× 1e-6 で秒にします。")
        if _close(got[:1], want[:1]) and abs(got[1] - 100 * want[1]) <= 100 * SHARE_ATOL:
            raise Fail(f"{what}{sep(what)}で、割合を百分率にしています。0〜1 の数で返します。")
        if _close(got[:1], [want[0] * 1e3]):
            raise Fail(f"{what}{sep(what)}で、下限がミリ秒になっています。秒で返します。")
        raise Fail(f"{what}{sep(what)}で、(下限, 割合) は ({fmt(want[0])} 秒, {fmt(want[1])}) のはずが、"
                   f"({fmt(got[0])}, {fmt(got[1])}) でした。")
    return "合成の記録 2 通りと記録したトレースで、達成できる帯域による下限と、説明できない割合が一致しました。"
