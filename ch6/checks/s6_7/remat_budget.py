"""6.7-4 choose_remat: 保存する残差が予算に収まり、FLOP がいちばん少ない jax.checkpoint の方針を選び、jit した勾配を返す。

候補ごとの「残差のバイト数」は jax.vjp が返す関数の葉（print_saved_residuals と同じ並び、引数も含む）、
「FLOP」は jax.jit(jax.grad(loss)) をコンパイルした cost_analysis() の flops です。隠しの層は本編と違う形
（ゲート付き MLP: up・gate・act・down の名前付き）で、予算は候補の残差ちょうどと 1 バイト少ない値に置きます。
名指しする誤りは、答えの並びがその誤りの並びと丸ごと一致し、ほかの誤りの並びと重ならないときだけ名指しします。
隠し入力は CPU に置いて渡します（:func:`measuring_device`）。FLOP と一時領域はバックエンドで違うので、こうして
どのマシンでも同じ表と判定にし、学習者版は作るときに記録した表と選択（:func:`measured`、:func:`pick`）を引きます。
"""
from __future__ import annotations

import functools

import numpy as np

from ...checking import Fail, LearnerError, call, exercise, f32, is_close, walk
from ...recorded import recorded
from ..on_cpu import measuring_device, placed_inputs
from .common import compile_events, rng

TIE = 1.05  # FLOP がいちばん少ない候補の 1.05 倍以内なら、同じ FLOP とみなす（問題文の約束）


def _block(p, x):
    import jax.numpy as jnp
    from jax.ad_checkpoint import checkpoint_name

    up = checkpoint_name(x @ p["up"], "up")
    gate = checkpoint_name(x @ p["gate"], "gate")
    act = checkpoint_name(jnp.tanh(gate) * up, "act")
    return checkpoint_name(act @ p["down"], "down") + x


def make_loss(policy):
    """問題で学習者に渡す関数: policy が None なら再計算なし、そうでなければ jax.checkpoint(層, policy=policy)。"""
    import jax
    import jax.numpy as jnp

    body = _block if policy is None else jax.checkpoint(_block, policy=policy)

    def loss(params, x):
        return jnp.mean(body(params, x) ** 2)

    return loss


@functools.cache
def policies() -> dict:
    """候補の名前 -> 方針（関数の同一性で jaxpr の中の方針を見分けるので、1 度だけ作る）。"""
    import jax

    cp = jax.checkpoint_policies
    return {"none": None, "everything_saveable": cp.everything_saveable, "nothing_saveable": cp.nothing_saveable,
            "dots_saveable": cp.dots_saveable, "only_up_gate": cp.save_only_these_names("up", "gate"),
            "only_act": cp.save_only_these_names("act")}


def hidden_inputs(shift: float = 0.0):
    """隠しの params（ゲート付き MLP 1 層）と x。形は rng(4) で決める（本編の 128 → 512 とは違う）。"""
    r = rng(4)
    b, d, h = int(r.integers(6, 11)), int(r.integers(36, 49)), int(r.integers(80, 113))
    params = {"up": f32(r.normal(size=(d, h)) / np.sqrt(d)), "gate": f32(r.normal(size=(d, h)) / np.sqrt(d)),
              "down": f32(r.normal(size=(h, d)) / np.sqrt(h))}
    x = f32(r.normal(size=(b, d)) + shift)
    return params, x


def residual_bytes(loss, params, x) -> int:
    """逆伝播のために保存する値（jax.vjp が返す関数の葉）のバイト数の和。形だけから求める。"""
    import jax

    shapes = jax.eval_shape(lambda p, a: jax.vjp(loss, p, a)[1], params, x)
    return sum(int(np.prod(s.shape)) * np.dtype(s.dtype).itemsize for s in jax.tree.leaves(shapes))


@recorded
def measured(platform: str) -> dict:
    """候補の名前 -> (残差のバイト数, 勾配の FLOP, 一時領域のバイト数, 引数を除いた残差のバイト数)。
    platform（隠し入力を置いたデバイスの種類）で測る。最後の 2 つは、名指しする誤り（残差の代わりに一時領域、
    引数を除いた残差）のため。"""
    import jax

    params, x = placed_inputs(hidden_inputs())
    args = sum(int(a.nbytes) for a in jax.tree.leaves((params, x)))
    rows = {}
    for name, policy in policies().items():
        loss = make_loss(policy)
        compiled = jax.jit(jax.grad(loss)).lower(params, x).compile()
        saved = residual_bytes(loss, params, x)
        rows[name] = (saved, float(compiled.cost_analysis()["flops"]),
                      int(compiled.memory_analysis().temp_size_in_bytes), saved - args)
    return rows


@functools.cache
def table() -> dict:
    """:func:`measured` の表（1 度だけ測る。学習者版では記録した表）。隠しの場面の前提も確かめる。"""
    rows = measured(measuring_device().platform)
    _check_design(rows)
    return rows


def _check_design(t: dict) -> None:
    """隠しの場面が、名指しする誤りを見分けられる形であること（JAX が変わって崩れたらチェッカの不具合として止まる）。"""
    low = min(row[1] for row in t.values())
    cheap = {"none", "everything_saveable", "dots_saveable", "only_up_gate"}
    assert all(t[n][1] <= 1.02 * low for n in cheap), t
    assert all(t[n][1] >= 1.15 * low for n in ("nothing_saveable", "only_act")), t
    assert t["nothing_saveable"][0] < t["only_act"][0] < t["dots_saveable"][0] < t["none"][0], t
    assert t["dots_saveable"][:2] == t["only_up_gate"][:2] and t["none"][0] == t["everything_saveable"][0], t
    assert t["none"][1] < t["dots_saveable"][1], t


def scenarios(t: dict) -> list[tuple[str, list[str], int]]:
    """(説明, 候補の名前の並び, 予算): 予算は候補の残差ちょうど・1 バイト少ない値・余裕のある値。
    最後の場面は、FLOP の多い候補が先頭にあり、FLOP の少ない 2 つ（残差の多いほうが先）が続く。"""
    top, dots = t["none"][0], t["dots_saveable"][0]
    return [
        ("予算が最大の残差ちょうど", ["none", "everything_saveable", "nothing_saveable", "dots_saveable", "only_act"], top),
        ("予算が dots_saveable の残差ちょうど",
         ["everything_saveable", "only_up_gate", "dots_saveable", "only_act", "nothing_saveable"], dots),
        ("予算が dots_saveable の残差より 1 バイト少ない", ["only_act", "dots_saveable", "nothing_saveable"], dots - 1),
        ("候補が 1 つで予算が 1 バイト足りない", ["nothing_saveable"], t["nothing_saveable"][0] - 1),
        ("候補が 1 つで予算ちょうど", ["only_act"], t["only_act"][0]),
        ("予算に余裕がある", ["dots_saveable", "none"], 2 * top),
        ("予算に余裕があり、FLOP の多い候補が先頭", ["nothing_saveable", "everything_saveable", "dots_saveable"], 2 * top),
    ]


SIZES = {"bytes": 0, "temp": 2, "no_args": 3}  # 残差として比べる値（table の列）


@recorded
def pick(t: dict, names: list[str], budget: float, *, strict: bool = False, tie: float = TIE, then: str = "bytes",
         size: str = "bytes", by: str = "flops"):
    """規則どおりの選択。キーワードは名指しする誤りの答えを作るため: strict（< で比べる）、tie（同じとみなす幅）、
    then（同じ FLOP の中の選び方: "bytes" が規則、"more" は残差の多いほう、"last" は同じ残差で後ろ、"order" は
    残差を見ずに先の候補、"flops" は FLOP の少ないほう）、size（残差の代わりに一時領域 "temp" や引数を除いた
    残差 "no_args" で比べる）、by（FLOP を見ずに "first" 収まる最初、"bytes" 残差の最少）。"""
    col = SIZES[size]
    fits = [n for n in names if (t[n][col] < budget if strict else t[n][col] <= budget)]
    if not fits:
        return None
    if by == "first":
        return fits[0]
    if by == "bytes":
        return min(fits, key=lambda n: (t[n][col], names.index(n)))
    low = min(t[n][1] for n in fits)
    tied = [n for n in fits if t[n][1] <= tie * low]
    keys = {"bytes": lambda n: (t[n][col], names.index(n)), "more": lambda n: (-t[n][col], names.index(n)),
            "last": lambda n: (t[n][col], -names.index(n)), "order": names.index,
            "flops": lambda n: (t[n][1], names.index(n))}
    return min(tied, key=keys[then])


_FEWEST_FLOPS = ("FLOP の差が 5 % 以内の候補から、FLOP のいちばん少ない候補を選んでいます。"
                 "5 % 以内は同じ FLOP とみなし、その中で残差のいちばん少ない候補を選びます。")
_MISTAKES = (
    (dict(strict=True), "予算ちょうどの残差を収まらないとしています（< で比べている）。予算以下（<=）なら収まります。"),
    (dict(tie=1.0), _FEWEST_FLOPS),
    (dict(then="flops"), _FEWEST_FLOPS),
    (dict(then="order"), "FLOP が 5 % 以内の候補の中で、残差を見ずに candidates の先の候補を選んでいます。"
                         "その中では残差のいちばん少ない候補を選びます。"),
    (dict(then="more"), "同じ FLOP とみなす候補の中で、残差のいちばん多い候補を選んでいます。選ぶのは残差のいちばん少ない候補です。"),
    (dict(then="last"), "FLOP も残差も同じ候補の中で、後ろの候補を選んでいます。同じなら candidates で先に並ぶ候補です。"),
    (dict(size="temp"), "どの予算でも、残差の代わりに一時領域（temp_size_in_bytes）で比べたときの候補を選んでいます。"
                        "残差は jax.vjp が返す関数の葉の nbytes の和です。"),
    (dict(size="no_args"), "どの予算でも、残差から引数（params と x）の分を除いて比べたときの候補を選んでいます。"
                           "残差は jax.vjp が返す関数の葉のすべてで、引数も含みます。"),
    (dict(by="first"), "どの予算でも、収まる最初の候補を選んでいます。収まる候補のうち、勾配の FLOP がいちばん少ない候補を選びます。"),
    (dict(by="bytes"), "どの予算でも、収まる中で残差のいちばん少ない候補を選んでいます。"
                       "勾配の FLOP（順伝播ではなく jax.grad の cost_analysis）の最小の 1.05 倍以内から選びます。"),
)


def same_as_slips(got: list, slips: list[tuple[list, str]]) -> str:
    """got と同じ並びになる誤りの説明。測ったバックエンドの FLOP では 2 つの誤りが同じ並びになることがある（隠し入力を
    TPU v5e に置いたときは none と dots_saveable の FLOP が 0.4 % しか違わず、「FLOP のいちばん少ない」と「残差の
    いちばん多い」が重なった）。
    そのときはどちらとも言い切れないので、両方を挙げる。どれとも同じでなければ空文字列。"""
    found = list(dict.fromkeys(message for answers, message in slips if answers == got))
    if len(found) <= 1:
        return "".join(found)
    return ("このバックエンドの FLOP と残差では、次の誤りのどれとも同じ選び方です（どれかに当たります）: "
            + " / ".join(found))


def _answer(out, names: list[str], label: str):
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        what = f"{len(out)} 要素" if isinstance(out, (tuple, list)) else f"{type(out).__name__} "
        raise Fail(f"{label}: 戻り値が {what}でした。(方針の名前, jit した勾配の関数) の 2 つ組を返します。")
    name, grad_fn = out
    if name is None:
        if grad_fn is not None:
            raise Fail(f"{label}: 名前が None なのに関数が返りました。どれも収まらないときは (None, None) を返します。")
        return None, None
    if not isinstance(name, str) or name not in names:
        raise Fail(f"{label}: 名前 {name!r} は candidates にありません。candidates のキーのどれかを返します。")
    if not callable(grad_fn):
        raise Fail(f"{label}: {name} を選んだのに、関数ではなく {type(grad_fn).__name__} が返りました。"
                   "jax.jit(jax.grad(loss)) を返します。")
    return name, grad_fn


def _explain(t: dict, label: str, budget: int, got, want) -> str:
    if want is None:
        return (f"{label}: 予算 {budget:,} バイトにはどの候補の残差も収まらないので、"
                f"(None, None) のはずが {got} でした。")
    if got is None:
        return f"{label}: {want} の残差 {t[want][0]:,} バイトは予算 {budget:,} バイト以下なのに、None が返りました。"
    if t[got][0] > budget:
        return f"{label}: {got} の残差は {t[got][0]:,} バイトで予算 {budget:,} バイトを超えるので、{want} のはずでした。"
    return (f"{label}: {got}（FLOP {t[got][1]:,.0f}、残差 {t[got][0]:,} バイト）より "
            f"{want}（FLOP {t[want][1]:,.0f}、残差 {t[want][0]:,} バイト）が規則に合います。")


def _grads_like(got, want) -> bool:
    import jax

    try:
        if jax.tree.structure(got) != jax.tree.structure(want):
            return False
    except Exception:
        return False
    return all(is_close(g, w, rtol=1e-4, atol=1e-6) for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)))


def _inspect(name: str, grad_fn, label: str) -> None:
    """返した勾配の関数: 値、2 回目以降にトレースもコンパイルもしないこと、jit されていること、方針がその名前のものか。"""
    import jax

    inputs = [placed_inputs(hidden_inputs(shift)) for shift in (0.0, 0.5, -0.25)]  # 数えはじめる前に配置しておく
    want = jax.grad(make_loss(None))(*inputs[0])
    first = call(grad_fn, *inputs[0])
    if not _grads_like(first, want):
        raise Fail(f"{label}: 返した関数の値が params と同じ形の勾配になっていません。jax.jit(jax.grad(loss)) を返します。")
    with compile_events() as seen:
        for args in inputs[1:]:
            call(grad_fn, *args)
    if seen["compile"] or seen["trace"]:
        raise Fail(f"{label}: 同じ形で 2 回呼ぶ間に {seen['compile']} 回コンパイルし、{seen['trace']} 回トレースしました。"
                   "jax.jit は選んだあと 1 度だけ作って返します。")
    try:
        eqns = list(walk(jax.make_jaxpr(grad_fn)(*inputs[0]).jaxpr))
    except Exception as exc:
        raise LearnerError(exc) from exc
    if not any(e.primitive.name in ("jit", "pjit") for e in eqns):
        raise Fail(f"{label}: 返した関数が jit されていないので、呼ぶたびに演算を 1 つずつ実行します。jax.jit で包んで返します。")
    found = {id(e.params["policy"]) for e in eqns if "policy" in e.params}
    want_policy = policies()[name]
    if found != ({id(want_policy)} if want_policy is not None else set()):
        used = [f"{n} の方針で" for n, p in policies().items() if p is not None and id(p) in found]
        raise Fail(f"{label}: 名前は {name} なのに、返した関数は {(used or ['jax.checkpoint なしで'])[0]}作られています。"
                   "選んだ候補の方針で make_loss を呼びます。")


def lowered_cost_is_none() -> bool:
    """隠し入力を置くバックエンドで、コンパイル前の Lowered.cost_analysis() が None を返すか（TPU v5e の JAX 0.10 が
    そう）。"""
    import jax

    try:
        one = jax.device_put(np.float32(1.0), measuring_device())
        return jax.jit(lambda a: a * 2.0).lower(one).cost_analysis() is None
    except Exception:
        return False


def _call(fn, *args):
    """学習者の関数を呼ぶ。コンパイル前の cost_analysis() が None で ["flops"] を読めなかったときは、その理由を言う。"""
    try:
        return call(fn, *args)
    except LearnerError as exc:
        if (isinstance(exc.exc, TypeError) and "'NoneType' object is not subscriptable" in str(exc.exc)
                and lowered_cost_is_none()):
            raise Fail("このバックエンドではコンパイル前の lower(...).cost_analysis() が None を返すので、"
                       "[\"flops\"] を読めませんでした。lower(...).compile().cost_analysis() から読みます。") from None
        raise


@exercise("6.7-4", "choose_remat")
def check_choose_remat(fn):
    t = table()
    params, x = placed_inputs(hidden_inputs())
    cases = scenarios(t)
    # 参照の値はすべて学習者を呼ぶ前に（学習者版では、作るときに記録した値を引く）
    want = [pick(t, names, budget) for _, names, budget in cases]
    slips = [([pick(t, names, budget, **kw) for _, names, budget in cases], message) for kw, message in _MISTAKES]
    answers = []
    for label, names, budget in cases:
        candidates = {n: policies()[n] for n in names}
        answers.append(_answer(_call(fn, make_loss, params, x, candidates, budget), names, label))
    got = [name for name, _ in answers]
    if got != want:
        named = same_as_slips(got, slips)
        if named:
            raise Fail(named)
        i = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
        raise Fail(_explain(t, cases[i][0], cases[i][2], got[i], want[i]))
    for (label, _, _), (name, grad_fn) in zip(cases, answers):
        if name in ("only_up_gate", "only_act"):
            _inspect(name, grad_fn, label)
    return (f"隠しのゲート付き MLP と {len(cases)} つの予算で方針が一致し、"
            "返した勾配の関数は 1 度だけコンパイルされました。")
