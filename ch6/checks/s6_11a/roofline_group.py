"""6.11a-1 furthest_below_roofline: 1 ステップの min_share 以上を占める演算の種類のうち、ルーフラインの下限から最も遠いもの。"""
from __future__ import annotations

import dataclasses

from ... import hardware, profile
from ...checking import Fail, LearnerError, call, exercise, fmt
from .common import exercise_rng, sep, synthetic

# 必須: 種類は (Op.group, Op.xla_category)。時間は正味の時間の和を 1 回の実行あたりに。割合は step_time() に対して。
# バイトのない（None の）種類は除く。下限は max(FLOP ÷ 最大性能, バイト ÷ 帯域)（1 回の実行あたり、µs）。
# 戻り値は (group, xla_category, 時間 ÷ 下限)。条件に合う種類がなければ None。
RECORDED = ("decode_int8_after", "decode_bf16", "train_step", "decode_int8_before")


def answer(prof, chip, min_share, *, duration=False, per_execution=True, threshold=True, smallest=False,
           flops=True, skip_none=True, strict=False, by_name=False):
    """参照の答え（と、各引数を変えた誤りの答え）: (group, xla_category, ratio) か None。"""
    groups: dict[tuple[str, str], dict] = {}
    for op in prof.ops:
        g = groups.setdefault((op.group, "" if by_name else op.xla_category), {"time": 0.0, "bytes": 0, "flops": 0})
        g["time"] += op.duration if duration else op.self_time
        g["bytes"] = None if (g["bytes"] is None or op.bytes is None) else g["bytes"] + op.bytes
        g["flops"] += op.flops or 0
    n = prof.n_steps
    step = prof.step_time()
    best = None
    for key, g in groups.items():
        time = g["time"] / (n if per_execution else 1)
        if threshold and (time <= min_share * step if strict else time < min_share * step):
            continue
        if g["bytes"] is None and skip_none:
            continue
        nbytes = g["bytes"] or 0
        if nbytes <= 0 and skip_none:
            continue
        bound = max(g["flops"] / n / chip.flops if flops else 0.0, nbytes / n / chip.hbm_bw) * 1e6
        ratio = time / bound if bound > 0 else float("inf")
        if best is None or (ratio < best[2] if smallest else ratio > best[2]):
            best = (key[0], key[1], ratio)
    return best


def hidden_case():
    """合成のトレース: 3 回の実行。正解（loop fusion の fusion）のほかに、誤りごとに別の種類が選ばれるように置く。"""
    r = exercise_rng(1)
    step = float(r.uniform(800, 1200))
    share = float(r.uniform(0.08, 0.12))
    target = float(r.uniform(1.5, 2.0))
    chip = dataclasses.replace(hardware.chip("TPU v5e"), name="隠しのチップ", flops=float(r.uniform(1e14, 4e14)),
                               hbm_bw=float(r.uniform(5e11, 1.5e12)))

    def memory_bound(t, ratio):               # 時間 t（µs）で、下限との比が ratio になるバイト
        return t / ratio * 1e-6 * chip.hbm_bw

    ops, modules = [], []
    for k in range(3):
        t0 = k * (step + 50.0)
        modules.append((t0, step))
        jitter = 1 + 0.02 * (k - 1)
        at = t0 + 1.0

        def put(name, category, t, nbytes, nflops, k=k):
            nonlocal at
            ops.append((f"{name}.{10 * k + len(ops) % 10}", category, at, t, nbytes, nflops))
            at += t + 0.5
        t = 0.25 * step * jitter                                   # 行列積: 計算律速、比 1.05
        put("convolution_fusion", "convolution fusion", t, memory_bound(t, 20.0), t / 1.05 * 1e-6 * chip.flops)
        t = 0.2 * step * jitter                                    # 正解: 比 target
        put("fusion", "loop fusion", t, memory_bound(t, target), 0)
        loop_start, t = at, 0.15 * step                            # while（正味の時間 0.01 × step、比 0.5）
        ops.append((f"while.{k}", "while", loop_start, t, memory_bound(0.01 * step, 0.5), None))
        for j in range(2):                                         # while の中の本体: 比 1.3
            ops.append((f"add_fusion.{k}{j}", "loop fusion", loop_start + 0.005 * step + j * 0.07 * step,
                        0.07 * step, memory_bound(0.07 * step, 1.3), 0))
        at = loop_start + t + 0.5
        t = 0.6 * share * step                                     # 1 回あたりは境目の下、3 回の合計は上
        put("copy_fusion", "loop fusion", t, memory_bound(t, target + 1), 0)
        t = 0.2 * share * step                                     # 小さいが比の大きい種類
        put("scatter_fusion", "custom fusion", t, memory_bound(t, target + 3), 0)
        put("custom-call", "custom-call", 0.13 * step, None, None)  # バイトを数えていない
        put("bitcast", "bitcast", 0.13 * step, 0, 0)                # バイトも FLOP も 0（下限が 0）
    return synthetic(ops, modules), chip, share


def boundary_case():
    """ちょうど境目（時間 = min_share × step_time()、浮動小数でも等しい値）の種類が答えになる合成のトレース。"""
    r = exercise_rng(21)
    chip = dataclasses.replace(hardware.chip("TPU v5e"), name="隠しのチップ", flops=2e14,
                               hbm_bw=float(r.uniform(6e11, 1.2e12)))
    ops, modules = [], []
    for k in range(2):
        t0 = k * 1100.0
        modules.append((t0, 1000.0))
        ops.append((f"convolution_fusion.{k}", "convolution fusion", t0 + 1.0, 500.0, 500e-6 / 1.2 * chip.hbm_bw, 0))
        ops.append((f"fusion.{k}", "loop fusion", t0 + 502.0, 125.0, 125e-6 / 3.0 * chip.hbm_bw, 0))
    return synthetic(ops, modules), chip, 0.125


def _result(value, what):
    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        raise Fail(f"{what}{sep(what)}で、戻り値は (group, xla_category, 比) の 3 つ組のはずが、{type(value).__name__} でした。")
    name, category, ratio = value
    if not isinstance(name, str) or not isinstance(category, str):
        raise Fail(f"{what}{sep(what)}で、3 つ組の最初の 2 つは文字列（Op.group と Op.xla_category）のはずが、"
                   f"{type(name).__name__} と {type(category).__name__} でした。")
    try:
        ratio = float(ratio)
    except (TypeError, ValueError):
        raise Fail(f"{what}{sep(what)}で、3 つ組の最後（時間 ÷ 下限）は数のはずが、{type(ratio).__name__} でした。") from None
    return name, category, ratio


def _same(got, want) -> bool:
    return (got is None and want is None) or (
        got is not None and want is not None and got[:2] == want[:2]
        and abs(got[2] - want[2]) <= 1e-3 * abs(want[2]))


MISTAKES = [
    (dict(duration=True), "while の区間の長さ（duration）で数えています。入れ子の中の演算の時間が 2 度入るので、"
                          "正味の時間（self_time）を足します。"),
    (dict(per_execution=False), "記録したすべての実行の合計で割合を比べています。時間は実行の回数（n_steps）で割り、"
                                "1 回の実行の時間 step_time() と比べます。"),
    (dict(threshold=False), "割合の条件（min_share 以上）を使っていません。短い演算の比は大きくなりやすいので、"
                            "1 回の実行の min_share 以上を占める種類だけから選びます。"),
    (dict(strict=True), "時間がちょうど min_share × step_time() の種類を除いています。条件は「以上」なので、"
                        "境目の種類も比べます（< ではなく >= で残します）。"),
    (dict(smallest=True), "比が最も小さい種類（ルーフラインに最も近いもの）を返しています。下限から最も遠いのは、"
                          "時間 ÷ 下限 が最も大きい種類です。"),
    (dict(flops=False), "下限にバイトの項しか入れていません。行列積は FLOP の項のほうが大きいので、"
                        "下限は max(FLOP ÷ 最大性能, バイト ÷ 帯域) です。"),
]


@exercise("6.11a-1", "furthest_below_roofline")
def check_furthest_below_roofline(fn):
    prof, chip, share = hidden_case()
    cases = [("合成のトレース", prof, chip, share), ("境目の種類を含む合成のトレース", *boundary_case())]
    r = exercise_rng(11)
    v5e = hardware.chip("TPU v5e")
    for name in r.choice(RECORDED, size=2, replace=False):
        cases.append((f"記録したトレース {name}", profile.recorded(str(name)), v5e, float(r.choice([0.03, 0.05, 0.1]))))
    for what, p, c, s in cases:
        try:
            got = _result(call(fn, p, c, s), what)
        except LearnerError as err:
            if isinstance(err.exc, TypeError) and "NoneType" in str(err.exc):
                raise Fail(f"{what}のバイトのない演算（bytes が None）で計算が止まりました。XLA がバイトを数えていない"
                           "種類は、下限を求められないので除きます。") from None
            raise
        want = answer(p, c, s)
        if _same(got, want):
            continue
        if got is not None and want is not None:
            names = {(o.group, o.xla_category): o for o in p.ops}
            op = names.get(tuple(got[:2]))
            if op is not None and op.bytes is None:
                raise Fail(f"{what}{sep(what)}で、バイトのない演算の種類 {got[0]} を返しました。XLA がバイトを数えていない種類は"
                           "下限を求められないので除きます。")
            if got[:2] == want[:2] and abs(got[2] * want[2] - 1) < 1e-3:
                raise Fail(f"{what}{sep(what)}で、比が逆数（下限 ÷ 時間）になっています。時間 ÷ 下限 を返します。")
        for kw, text in MISTAKES:
            if got is not None and _same(got, answer(p, c, s, **kw)):
                raise Fail(f"{what}{sep(what)}で、{text}")
        merged = answer(p, c, s, by_name=True)
        if got is not None and merged is not None and got[0] == merged[0] and abs(got[2] - merged[2]) <= 1e-3 * merged[2]:
            raise Fail(f"{what}{sep(what)}で、名前 {got[0]} が同じで XLA の分類が違う演算をまとめています。種類は "
                       "(Op.group, Op.xla_category) の組で数えます。")
        if got is not None and want is not None and got[:2] == want[:2]:
            raise Fail(f"{what}{sep(what)}で、種類 {want[0]}（{want[1]}）は合っていますが、比が {fmt(want[2])} のはずが "
                       f"{fmt(got[2])} でした。時間と下限をどちらも 1 回の実行あたりで求めます。")
        raise Fail(f"{what}{sep(what)}で、{want[0]}（{want[1]}）の比 {fmt(want[2])} が答えのはずが、"
                   f"{'None' if got is None else f'{got[0]}（{got[1]}）'} でした。")
    return ("合成のトレース（入れ子の while、バイトのない演算、割合の境目の種類を含む）と記録したトレース 2 つで、"
            "下限から最も遠い種類と比が一致しました。")
