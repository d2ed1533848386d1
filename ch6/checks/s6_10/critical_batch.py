"""6.10-2 decode_critical_batch: デコードの 1 ステップが計算律速になる最小のバッチ（KV キャッシュの読み込みを含む）。"""
from __future__ import annotations

import math

from ...checking import Fail, LearnerError, call_within, exercise
from ...recorded import recorded
from .common import exercise_rng, whole_number

# 必須: 2·B·N / flops >= (w·N + B·context·kv) / hbm_bw を満たす最小の整数 B >= 1。なければ None。

# 境目: 1 行の計算の時間 2N / flops と KV を読む時間 context·kv / hbm_bw がちょうど等しい組（どちらも 4e-5 秒。
# 割り算はどちらも正確な値 4e-5 を丸めるので、浮動小数でも差は 0.0）。バッチを増やしても追いつかないので None
TIE = (2e10, 2, 78_125.0, 1024, 1e15, 2e12)

# 等号の組: 値がどれも 2 の累乗なので、B = 2048 で計算の時間とメモリの時間がどちらも正確に 0.25 秒（浮動小数でも
# 差は 0.0）。>= なら 2048、> で比べる（int(x) + 1 で切り上げる）と 2049
EXACT = (float(2**36), 2, float(2**14), 2**12, float(2**50), float(2**40))

# 答えの大きい組: 1 行の計算が KV の読み込みよりわずかに長いだけなので、B は約 300 万
# （小さい B から上限付きで試す探索は届かない。式の B は 3004807.69… で、整数の境目から遠い）
LARGE = (3e10, 2, 14_646.0, 8192, 1e15, 2e12)

# 答えが 1 の組: 帯域が最大性能に比べて広いチップ（式の B は 0.25 で、B = 1 ですでに計算律速。0 は返さない）
SMALL = (1e9, 2, 1000.0, 128, 1e12, 4e12)
# 1 回の呼び出しの制限時間（秒）。B を 1 から順に試す答えは LARGE（約 300 万）でも数秒で返る。None の組で
# 止まらないループ（差が 0 以下かを先に調べない）は、ここで打ち切ってそう言う（ノートブックが止まらないように）
LIMIT_S = 30.0
# 誤りの形（_answer への引数。"ctx" はその組の context）: プリフィルの形、KV なし、リッジポイント、重みを N のまま
MISTAKE_ARGS = (dict(tokens="ctx"), dict(with_kv=False), dict(with_kv=False, weight=2), dict(weight=1))
LATE = (f"隠しの組の 1 つで、{LIMIT_S:.0f} 秒たっても返りませんでした。1 行の計算の時間が 1 行の KV を読む時間以下の組は"
        " B をいくら増やしても計算律速にならないので、ループの前にそれを調べて None を返します。")


@recorded
def _smallest(compute_per_row: float, mem_fixed: float, mem_per_row: float):
    """compute_per_row·B >= mem_fixed + mem_per_row·B の最小の整数 B >= 1（なければ None）。"""
    gain = compute_per_row - mem_per_row
    if gain <= 0:
        return None
    return max(1, math.ceil(mem_fixed / gain))


@recorded
def _answer(n, w, kv, ctx, flops, bw, *, tokens=1, with_kv=True, weight=None):
    per_row = 2 * n * tokens / flops
    mem_row = (tokens * ctx * kv / bw) if with_kv else 0.0
    return _smallest(per_row, (w if weight is None else weight) * n / bw, mem_row)


@recorded
def _drawn_cases():
    """隠し乱数で引いた 5 組（計算律速になる組 4 つと、ならない組 1 つ。答えが整数の境目に近すぎる組は除く）。"""
    r = exercise_rng(2)
    out = []
    while len(out) < 5:
        n = float(r.integers(10**9, 7 * 10**10))
        w = 1 + len(out) % 2                                    # int8 と bf16 の重みを交互に
        kv = float(r.integers(2 * 10**4, 4 * 10**5))
        ctx = int(r.choice([256, 1024, 4096, 16384]))
        flops, bw = float(r.uniform(2e14, 2e15)), float(r.uniform(8e11, 8e12))
        b = _answer(n, w, kv, ctx, flops, bw)
        gain = 2 * n / flops - ctx * kv / bw
        if b is not None and abs(w * n / bw / gain - round(w * n / bw / gain)) < 1e-3:
            continue                                            # 境目に近すぎる組は使わない
        exists = sum(c[-1] is not None for c in out)
        if (b is None and len(out) - exists >= 1) or (b is not None and exists >= 4):
            continue                                            # 計算律速になる組 4 つと、ならない組 1 つ
        out.append((n, w, kv, ctx, flops, bw, b))
    out.sort(key=lambda c: c[-1] is None)
    return [c[:-1] for c in out]


def _cases():
    return _drawn_cases() + [EXACT, LARGE, SMALL]


@exercise("6.10-2", "decode_critical_batch")
def check_decode_critical_batch(fn):
    cases = _cases()
    # 参照の値はすべて学習者を呼ぶ前に（学習者版では、作るときに記録した値を引く）
    want = [_answer(*c) for c in cases]
    alts = [[_answer(*c, **{k: (c[3] if v == "ctx" else v) for k, v in kw.items()}) for c in cases]
            for kw in MISTAKE_ARGS]
    tie = _answer(*TIE)
    got = []
    for n, w, kv, ctx, flops, bw in cases:
        value = call_within(LIMIT_S, fn, n, w, kv, ctx, flops, bw, late=LATE)
        got.append(None if value is None else whole_number(value, "decode_critical_batch の戻り値"))
    if got == want:
        _check_tie(fn, tie)
        return (f"隠しのモデルとチップ {len(cases) + 1} 通りで、計算律速になる最小のバッチが一致しました。"
                "計算律速にならない組、差がちょうど 0 の組、等号で決まる組、答えが約 300 万の組、答えが 1 の組を含みます。")
    mistakes = [
        (MISTAKE_ARGS[0], "プリフィルと同じ数え方をしています。デコードの 1 ステップは 1 行につき 1 トークンなので、"
                             "FLOP は 2·B·N、読む KV は B·context·kv です。B·context トークン分の計算はしません。"),
        (MISTAKE_ARGS[1], "KV キャッシュの読み込みを入れていません。各行は毎ステップ context·kv バイトを読むので、"
                              "メモリの時間は (w·N + B·context·kv) / hbm_bw です。"),
        (MISTAKE_ARGS[2], "リッジポイント flops / hbm_bw をそのまま使っています。重みの 1 値のバイト w と"
                                        " KV キャッシュの読み込みを入れて、2·B·N / flops と比べます。"),
        (MISTAKE_ARGS[3], "重みのバイトを N（パラメータの数）のまま数えています。1 値が w バイトなので、"
                         "メモリの時間の重みの項は w·N / hbm_bw です。"),
    ]
    for (_, text), alt in zip(mistakes, alts):
        if got == alt:
            raise Fail(text)
    k = next(i for i, (g, x) in enumerate(zip(got, want)) if g != x)
    if want[k] is None:
        raise Fail(f"計算律速にならない組（1 行の KV を読む時間が 1 行の計算より長い）で {got[k]} を返しています。"
                   "バッチを増やしても追いつかないので None を返します。")
    if cases[k] == EXACT and got[k] == want[k] + 1:
        raise Fail(f"B = {want[k]} で計算の時間とメモリの時間がちょうど等しい組で、{got[k]} を返しています。等しいときは"
                   f"計算律速とみなす決まり（>=）なので、答えは {want[k]} です（int(x) + 1 ではなく math.ceil(x)）。")
    if cases[k] == LARGE and (got[k] is None or got[k] < want[k] - 1):
        raise Fail(f"答えの大きい組（B = {want[k]:,}）で {got[k]!r} が返りました。B を小さい順に上限付きで試すと"
                   "届かないので、式を B について解くか、上限を設けずに探します。")
    if cases[k] == SMALL and got[k] == 0:
        raise Fail("B = 1 ですでに計算の時間がメモリの時間以上になる組で、0 を返しています。"
                   "バッチは 1 以上なので、答えは 1 です（式の B が 1 より小さくても、1 に切り上げます）。")
    if got[k] is None:
        raise Fail(f"計算律速になる組で None を返しています。この組は B = {want[k]} で計算の時間がメモリの時間に届きます。")
    if got[k] == want[k] - 1:
        raise Fail(f"1 つ小さい {got[k]} を返しています。その B ではまだメモリの時間のほうが長いので、"
                   "math.ceil で切り上げてください。int() の切り捨てや round() では、1 つ足りない組が出ます。")
    raise Fail(f"隠しの組の 1 つで、最小のバッチは {want[k]} のはずが {got[k]} でした。"
               "計算の時間 2·B·N / flops とメモリの時間 (w·N + B·context·kv) / hbm_bw を B で解いてください。")


def _check_tie(fn, tie) -> None:
    """1 行の計算と KV の読み込みがちょうど等しい組: None（< 0 で比べると 0 で割る、または巨大な B を返す）。"""
    assert tie is None
    try:
        value = call_within(LIMIT_S, fn, *TIE, late=LATE)
    except LearnerError as err:
        if isinstance(err.exc, ZeroDivisionError):
            raise Fail("1 行の計算の時間と KV を読む時間がちょうど等しい組で、0 で割りました。差が 0 以下ならバッチを"
                       "増やしても追いつかないので、None を返します（< 0 ではなく <= 0 で比べます）。") from None
        raise
    if value is not None:
        raise Fail(f"1 行の計算の時間と KV を読む時間がちょうど等しい組で {value!r} を返しています。等しいときは、"
                   "バッチを増やしても追いつかないので、None を返します（<= 0）。")
