"""6.11a-1 furthest_below_roofline: 1 ステップの min_share 以上を占める演算の種類のうち、ルーフラインの下限から最も遠いもの。"""
from __future__ import annotations

import dataclasses

import numpy as np

from ... import hardware, profile
from ...checking import Fail, LearnerError, call, exercise, fmt
from ...recorded import recorded
from .common import exercise_rng, sep, synthetic

# 必須: 種類は (Op.group, Op.xla_category)。時間は正味の時間の和を 1 回の実行あたりに。割合は step_time() に対して。
# バイトのない（None の）種類と、バイトが 0 の種類は除く。FLOP のない（None の）演算は FLOP を 0 として数える。
# 下限は max(FLOP ÷ 最大性能, バイト ÷ 帯域)（1 回の実行あたり、µs）。戻り値は (group, xla_category, 時間 ÷ 下限)
# のタプルかリスト。条件に合う種類がなければ None。一部の演算だけバイトが None の種類は、隠し入力にない（自由）。
RECORDED = ("decode_int8_after", "decode_bf16", "train_step", "decode_int8_before")


@recorded
def answer(prof, chip, min_share, *, duration=False, per_execution=True, threshold=True, smallest=False,
           flops=True, skip_none=True, strict=False, by_name=False, op_name=False, busy=False, percent=False,
           bound_sum=False):
    """参照の答え（と、各引数を変えた誤りの答え）: (group, xla_category, ratio) か None。"""
    groups: dict[tuple[str, str], dict] = {}
    for op in prof.ops:
        key = (op.name if op_name else op.group, "" if by_name else op.xla_category)
        g = groups.setdefault(key, {"time": 0.0, "bytes": 0, "flops": 0})
        g["time"] += op.duration if duration else op.self_time
        g["bytes"] = None if (g["bytes"] is None or op.bytes is None) else g["bytes"] + op.bytes
        g["flops"] += op.flops or 0
    n = prof.n_steps
    limit = (min_share / 100 if percent else min_share) * (prof.busy() if busy else prof.step_time())
    best = None
    for key, g in groups.items():
        time = g["time"] / (n if per_execution else 1)
        if threshold and (time <= limit if strict else time < limit):
            continue
        if g["bytes"] is None and skip_none:
            continue
        nbytes = g["bytes"] or 0
        if nbytes <= 0 and skip_none:
            continue
        terms = (g["flops"] / n / chip.flops if flops else 0.0, nbytes / n / chip.hbm_bw)
        bound = (sum(terms) if bound_sum else max(terms)) * 1e6
        ratio = time / bound if bound > 0 else float("inf")
        if best is None or (ratio < best[2] if smallest else ratio > best[2]):
            best = (key[0], key[1], ratio)
    return best


def _chip(r):
    return dataclasses.replace(hardware.chip("TPU v5e"), name="隠しのチップ", flops=float(r.uniform(1e14, 4e14)),
                               hbm_bw=float(r.uniform(5e11, 1.5e12)))


def _steps(chip, step, n, body):
    """n 回の実行の合成のトレース。body(put, k) が 1 回分の演算を置く。演算の名前は実際のトレースと同じく、
    どの実行でも同じ（fusion.1 など）。"""
    ops, modules = [], []
    for k in range(n):
        t0 = k * (step + 50.0)
        modules.append((t0, step))
        state = {"at": t0 + 1.0, "j": 0}

        def put(name, category, t, nbytes, nflops, at=None, state=state):
            state["j"] += 1
            start = state["at"] if at is None else at
            ops.append((f"{name}.{state['j']}", category, start, t, nbytes, nflops))
            if at is None:
                state["at"] += t + 0.5
            return start
        body(put, k, state)
    return synthetic(ops, modules)


def hidden_case():
    """合成のトレース: 3 回の実行。正解（loop fusion の fusion）のほかに、誤りごとに別の種類が選ばれるように置く。"""
    r = exercise_rng(1)
    step = float(r.uniform(800, 1200))
    share = float(r.uniform(0.08, 0.12))
    target = float(r.uniform(1.5, 2.0))
    chip = _chip(r)

    def memory_bound(t, ratio):               # 時間 t（µs）で、下限との比が ratio になるバイト
        return t / ratio * 1e-6 * chip.hbm_bw

    def body(put, k, state):
        jitter = 1 + 0.02 * (k - 1)
        t = 0.13 * step * jitter                                   # 行列積: 計算律速、比 1.05
        put("convolution_fusion", "convolution fusion", t, memory_bound(t, 20.0), t / 1.05 * 1e-6 * chip.flops)
        t = 0.2 * step * jitter                                    # 正解: 比 target（FLOP の項はバイトの項の 0.3 倍）
        put("fusion", "loop fusion", t, memory_bound(t, target), 0.3 * t / target * 1e-6 * chip.flops)
        t = 0.13 * step                                            # while（正味の時間 0.01 × step、比 0.5、FLOP は None）
        start = put("while", "while", t, memory_bound(0.01 * step, 0.5), None, at=state["at"])
        for j in range(2):                                         # while の中の本体: 比 1.3
            put("add_fusion", "loop fusion", 0.06 * step, memory_bound(0.06 * step, 1.3), 0,
                at=start + 0.004 * step + j * 0.061 * step)
        state["at"] = start + t + 0.5
        t = 0.6 * share * step                                     # 1 回あたりは境目の下、3 回の合計は上
        put("copy_fusion", "loop fusion", t, memory_bound(t, target + 1), 0)
        t = 0.99 * share * step                                    # busy() に対してなら境目の上、step_time() なら下
        put("reduce_fusion", "loop fusion", t, memory_bound(t, target + 2), 0)
        t = 0.2 * share * step                                     # 小さいが比の大きい種類
        put("scatter_fusion", "custom fusion", t, memory_bound(t, target + 3), 0)
        t = 0.002 * share * step                                   # min_share ÷ 100 より短く、比が最も大きい種類
        put("dynamic-update-slice", "dynamic-update-slice", t, memory_bound(t, target + 5), 0)
        put("custom-call", "custom-call", 0.125 * step, None, None)  # バイトを数えていない
        put("bitcast", "bitcast", 0.125 * step, 0, 0)                # バイトも FLOP も 0（下限が 0）
    return _steps(chip, step, 3, body), chip, share


def boundary_case():
    """ちょうど境目（時間 = min_share × step_time()、浮動小数でも等しい値）の種類が答えになる合成のトレース。"""
    r = exercise_rng(21)
    chip = dataclasses.replace(hardware.chip("TPU v5e"), name="隠しのチップ", flops=2e14,
                               hbm_bw=float(r.uniform(6e11, 1.2e12)))

    def body(put, k, state):
        put("convolution_fusion", "convolution fusion", 500.0, 500e-6 / 1.2 * chip.hbm_bw, 0)
        put("fusion", "loop fusion", 125.0, 125e-6 / 3.0 * chip.hbm_bw, 0)
    return _steps(chip, 1000.0, 2, body), chip, 0.125


def empty_case():
    """min_share 以上を占める種類が、バイトのない種類とバイトが 0 の種類だけの合成のトレース（答えは None）。"""
    r = exercise_rng(31)
    chip = _chip(r)
    step = float(r.uniform(800, 1200))

    def body(put, k, state):
        put("custom-call", "custom-call", 0.5 * step, None, None)
        put("bitcast", "bitcast", 0.2 * step, 0, 0)
        for name, t, ratio in [("fusion", 0.05 * step, 2.0), ("copy_fusion", 0.04 * step, 3.0)]:
            put(name, "loop fusion", t, t / ratio * 1e-6 * chip.hbm_bw, 0)
    return _steps(chip, step, 2, body), chip, 0.1


def cases():
    """(説明, Profile, チップ, min_share, 答えが None の入力か)。"""
    out = [("合成のトレース", *hidden_case(), False), ("境目の種類を含む合成のトレース", *boundary_case(), False)]
    r = exercise_rng(11)
    v5e = hardware.chip("TPU v5e")
    for name in r.choice(RECORDED, size=2, replace=False):
        out.append((f"記録したトレース {name}", profile.recorded(str(name)), v5e, float(r.choice([0.03, 0.05, 0.1])),
                    False))
    out.append(("min_share 以上を占める種類のない合成のトレース", *empty_case(), True))
    return out


def _result(value, what):
    if value is None:
        return None
    if not isinstance(value, (tuple, list)):
        raise Fail(f"{what}{sep(what)}で、戻り値は (group, xla_category, 比) のタプルのはずが、{type(value).__name__} でした。")
    if len(value) != 3:
        raise Fail(f"{what}{sep(what)}で、戻り値は (group, xla_category, 比) の長さ 3 のタプルのはずが、"
                   f"長さ {len(value)} の {type(value).__name__} でした。")
    name, category, ratio = value
    if not isinstance(name, str) or not isinstance(category, str):
        raise Fail(f"{what}{sep(what)}で、3 つ組の最初の 2 つは文字列（Op.group と Op.xla_category）のはずが、"
                   f"{type(name).__name__} と {type(category).__name__} でした。")
    if isinstance(ratio, (str, bytes, bool, np.bool_)):
        raise Fail(f"{what}{sep(what)}で、3 つ組の最後（時間 ÷ 下限）は数のはずが、{type(ratio).__name__} でした。")
    try:
        ratio = float(ratio)
    except (TypeError, ValueError):
        raise Fail(f"{what}{sep(what)}で、3 つ組の最後（時間 ÷ 下限）は数のはずが、{type(ratio).__name__} でした。") from None
    return name, category, ratio


def _same(got, want) -> bool:
    return (got is None and want is None) or (
        got is not None and want is not None and got[:2] == want[:2]
        and abs(got[2] - want[2]) <= 1e-3 * abs(want[2]))


def _variant(prof, change):
    return dataclasses.replace(prof, ops=[dataclasses.replace(o, **change(o)) for o in prof.ops])


def _runs(fn, prof, chip, share) -> bool:
    try:
        call(fn, prof, chip, share)
    except LearnerError:
        return False
    return True


def _error(fn, err, what, p, c, s, empty):
    """学習者のコードの例外の原因を、入力を 1 か所ずつ直して呼び直して確かめる（わからなければ err）。"""
    exc = err.exc
    if isinstance(exc, TypeError) and "NoneType" in str(exc):
        if _runs(fn, _variant(p, lambda o: {"flops": 0 if o.flops is None else o.flops}), c, s):
            return Fail(f"{what}{sep(what)}で、バイトはあるが FLOP が None の演算（while など）で計算が止まりました。"
                        "FLOP のない演算は FLOP を 0 として下限を求めます。")
        if _runs(fn, dataclasses.replace(p, ops=[o for o in p.ops if o.bytes is not None]), c, s):
            return Fail(f"{what}{sep(what)}で、バイトのない演算（bytes が None）で計算が止まりました。XLA がバイトを"
                        "数えていない種類は、下限を求められないので除きます。")
    if isinstance(exc, ZeroDivisionError) and _runs(fn, dataclasses.replace(p, ops=[o for o in p.ops if o.bytes != 0]),
                                                    c, s):
        return Fail(f"{what}{sep(what)}で、バイトが 0 の種類（bitcast など）で 0 で割りました。下限が 0 になるので、"
                    "bytes が None の種類と同じく、bytes が 0 の種類も除きます。")
    if empty:
        return Fail(f"{what}{sep(what)}でエラーになりました。"
                    "条件に合う種類がなければ None を返します。")
    return err


MISTAKES = [
    (dict(duration=True), "while の区間の長さ（duration）で数えています。入れ子の中の演算の時間が 2 度入るので、"
                          "正味の時間（self_time）を足します。"),
    (dict(per_execution=False), "記録したすべての実行の合計で割合を比べています。時間は実行の回数（n_steps）で割り、"
                                "1 回の実行の時間 step_time() と比べます。"),
    (dict(busy=True), "割合を busy()（演算が動いていた時間）に対して比べています。割合は、空き時間を含む "
                      "1 回の実行の時間 step_time() に対して求めます。"),
    (dict(percent=True), "min_share を百分率として 100 で割っています。min_share は 0〜1 の割合なので、"
                         "そのまま step_time() に掛けます。"),
    (dict(threshold=False), "割合の条件（min_share 以上）を使っていません。短い演算の比は大きくなりやすいので、"
                            "1 回の実行の min_share 以上を占める種類だけから選びます。"),
    (dict(strict=True), "時間がちょうど min_share × step_time() の種類を除いています。条件は「以上」なので、"
                        "境目の種類も比べます（< ではなく >= で残します）。"),
    (dict(smallest=True), "比が最も小さい種類（ルーフラインに最も近いもの）を返しています。下限から最も遠いのは、"
                          "時間 ÷ 下限 が最も大きい種類です。"),
    (dict(flops=False), "下限にバイトの項しか入れていません。行列積は FLOP の項のほうが大きいので、"
                        "下限は max(FLOP ÷ 最大性能, バイト ÷ 帯域) です。"),
    (dict(bound_sum=True), "下限を 2 つの項の和にしています。計算とメモリの転送は重なって進むので、"
                           "下限は大きいほうの項 max(FLOP ÷ 最大性能, バイト ÷ 帯域) です。"),
]

# 種類は合っていて比だけが違うとき: 比 ÷ 正しい比 と、その原因
FACTORS = [
    (1e6, "下限を秒のままにしています。FLOP ÷ chip.flops とバイト ÷ chip.hbm_bw は秒なので、"
          "× 1e6 でマイクロ秒にしてから時間を割ります。"),
    (1e3, "下限をミリ秒にしています。時間（self_time）はマイクロ秒なので、下限も × 1e6 でマイクロ秒にします。"),
    (1e-3, "時間をミリ秒にしています。下限はマイクロ秒なので、時間も self_time のマイクロ秒のまま割ります。"),
    (1e-6, "時間を秒にしています。下限をマイクロ秒で求めるなら、時間も self_time のマイクロ秒のまま割ります。"),
    (100.0, "比を百分率にしています。時間 ÷ 下限 をそのまま返します（1 ならルーフラインの上）。"),
]


def _named(got, want, alts, merged, what, p, empty) -> str | None:
    """誤りの答えの原因（具体的なものから）。"""
    if got is not None:
        names = {o.name: o for o in p.ops}
        groups = {(o.group, o.xla_category): o for o in p.ops}
        if got[0] in names and got[0] != names[got[0]].group:
            return ("演算の名前（通し番号付きの fusion.82 など）ごとにまとめています。"
                    "種類は Op.group と xla_category の組です。")
        op = groups.get(tuple(got[:2]))
        if op is not None and op.bytes is None:
            return (f"バイトのない演算の種類 {got[0]} を返しました。XLA がバイトを数えていない種類は"
                    "下限を求められないので除きます。")
        if op is not None and sum(o.bytes or 0 for o in p.ops if (o.group, o.xla_category) == tuple(got[:2])) == 0:
            return (f"バイトが 0 の種類 {got[0]} を返しました。下限が 0 になって比が求められないので、"
                    "bytes が 0 の種類も除きます。")
        if want is not None and got[0] == want[0] and got[1] != want[1] and (got[0], got[1]) not in groups \
                and any(o.group == got[0] and o.category == got[1] for o in p.ops):
            return (f"2 つ目に ch6.profile の分類（Op.category の「{got[1]}」）を返しています。2 つ目は XLA の分類 "
                    f"Op.xla_category（ここでは {want[1]}）です。")
        if want is not None and got[:2] == want[:2] and want[2] > 0 and got[2] > 0:
            if abs(got[2] * want[2] - 1) < 1e-3:
                return "比が逆数（下限 ÷ 時間）になっています。時間 ÷ 下限 を返します。"
            for factor, text in FACTORS:
                if abs(got[2] / want[2] / factor - 1) < 1e-3:
                    return text
    for (_, text), alt in zip(MISTAKES, alts):
        if got is not None and _same(got, alt):
            return text
    if got is not None and merged is not None and got[0] == merged[0] and abs(got[2] - merged[2]) <= 1e-3 * merged[2]:
        return f"名前 {got[0]} が同じで XLA の分類が違う演算をまとめています。種類は (Op.group, Op.xla_category) の組で数えます。"
    if empty:
        return (f"1 回の実行の min_share 以上を占める種類がない入力で、{got[0]}（{got[1]}）を返しました。"
                "条件に合う種類がなければ None を返します。")
    if got is not None and want is not None and got[:2] == want[:2]:
        text = f"種類 {want[0]}（{want[1]}）は合っていますが、比が {fmt(want[2])} のはずが {fmt(got[2])} でした。"
        n = p.n_steps
        if n > 1 and any(abs(got[2] / want[2] / f - 1) < 1e-3 for f in (n, 1 / n)):
            return text + "時間と下限をどちらも 1 回の実行あたりで求めます。"
        return text + "下限は、1 回の実行あたりの max(FLOP ÷ chip.flops, バイト ÷ chip.hbm_bw) をマイクロ秒にしたものです。"
    return None


@exercise("6.11a-1", "furthest_below_roofline")
def check_furthest_below_roofline(fn):
    todo = cases()
    # 参照の値はすべて学習者を呼ぶ前に（学習者版では、作るときに記録した値を引く）
    expected = [(answer(p, c, s), [answer(p, c, s, **kw) for kw, _ in MISTAKES], answer(p, c, s, by_name=True))
                for _, p, c, s, _ in todo]
    for (what, p, c, s, empty), (want, alts, merged) in zip(todo, expected):
        try:
            value = call(fn, p, c, s)
        except LearnerError as err:
            raise _error(fn, err, what, p, c, s, empty) from None
        if empty and isinstance(value, (tuple, list)) and len(value) == 0:
            raise Fail(f"{what}{sep(what)}で、空の {type(value).__name__} を返しました。条件に合う種類がなければ None を返します。")
        got = _result(value, what)
        if _same(got, want):
            continue
        text = _named(got, want, alts, merged, what, p, empty)
        if text is not None:
            raise Fail(f"{what}{sep(what)}で、{text}")
        raise Fail(f"{what}{sep(what)}では、{want[0]}（{want[1]}）の比 {fmt(want[2])} が答えです。"
                   f"返ってきたのは {'None' if got is None else f'{got[0]}（{got[1]}）'} でした。")
    return ("合成のトレース 3 つと記録したトレース 2 つで、下限から最も遠い種類と比が一致しました。"
            "合成の側は、入れ子の while、バイトのない演算、割合の境目の種類、条件に合う種類のない入力です。")
