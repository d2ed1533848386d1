"""6.7-4 choose_remat: 参照と別の正解は通り、名指しする誤り（< で比べる、5 % の許容なし、残差の多いほう、後ろの候補、
一時領域と比べる、FLOP を見ない 2 通り）、呼ぶたびに jit を作り直す関数、jit しない関数、名前と違う方針はそれぞれの言葉で落ちる。"""
import jax
import pytest

from tests.checkhelp import boom, expect, not_done

_MEASURED = {}


def _measure(make_loss, params, x, policy, lowered=False):
    """(残差のバイト数, 勾配の FLOP, 一時領域): 方針ごとに 1 度だけ測る（テストを速くするため）。"""
    key = (id(policy), lowered, jax.device_count())
    if key not in _MEASURED:
        loss = make_loss(policy)
        _, vjp_fn = jax.vjp(loss, params, x)
        saved = sum(a.nbytes for a in jax.tree.leaves(vjp_fn))
        low = jax.jit(jax.grad(loss)).lower(params, x)
        if lowered:
            _MEASURED[key] = (saved, low.cost_analysis()["flops"], 0)
        else:
            compiled = low.compile()
            _MEASURED[key] = (saved, compiled.cost_analysis()["flops"], compiled.memory_analysis().temp_size_in_bytes)
    return _MEASURED[key]


def chooser(strict=False, tie=1.05, more_bytes=False, last=False, size=0, by="flops", lowered=False,
            make_fn=None):
    """規則の一部を変えた choose_remat（誤りの答えを作る）。make_fn(make_loss, policy) が返す関数を返す。"""
    def choose_remat(make_loss, params, x, candidates, budget):
        rows = []
        for i, (name, policy) in enumerate(candidates.items()):
            m = _measure(make_loss, params, x, policy, lowered)
            if (m[size] < budget) if strict else (m[size] <= budget):
                rows.append((m[1], m[0], i, name, policy))
        if not rows:
            return None, None
        if by == "first":
            pick = rows[0]
        elif by == "bytes":
            pick = min(rows, key=lambda r: (r[1], r[2]))
        else:
            low = min(r[0] for r in rows)
            tied = [r for r in rows if r[0] <= tie * low]
            pick = min(tied, key=lambda r: ((-1 if more_bytes else 1) * r[1], -r[2] if last else r[2]))
        fn = (make_fn or (lambda ml, p: jax.jit(jax.grad(ml(p)))))(make_loss, pick[4])
        return pick[3], fn
    return choose_remat


def ref(make_loss, params, x, candidates, budget):
    """解答と同じ書き方（キャッシュなし）。"""
    rows = []
    for i, (name, policy) in enumerate(candidates.items()):
        loss = make_loss(policy)
        _, vjp_fn = jax.vjp(loss, params, x)
        saved = sum(a.nbytes for a in jax.tree.leaves(vjp_fn))
        flops = jax.jit(jax.grad(loss)).lower(params, x).compile().cost_analysis()["flops"]
        if saved <= budget:
            rows.append((flops, saved, i, name, loss))
    if not rows:
        return None, None
    low = min(r[0] for r in rows)
    _, _, _, name, loss = min((r for r in rows if r[0] <= 1.05 * low), key=lambda r: (r[1], r[2]))
    return name, jax.jit(jax.grad(loss))


def eval_shape_bytes(make_loss, params, x, candidates, budget):
    """別の正解: 残差を jax.eval_shape で形だけから数え、予算に収まる候補を先に絞る。"""
    sizes = {}
    for name, policy in candidates.items():
        loss = make_loss(policy)
        shapes = jax.eval_shape(lambda p, a, f=loss: jax.vjp(f, p, a)[1], params, x)
        sizes[name] = sum(s.size * s.dtype.itemsize for s in jax.tree.leaves(shapes))
    fits = [n for n in candidates if sizes[n] <= budget]
    if not fits:
        return None, None
    flops = {n: jax.jit(jax.grad(make_loss(candidates[n]))).lower(params, x).compile().cost_analysis()["flops"]
             for n in fits}
    low = min(flops.values())
    best = sorted((n for n in fits if flops[n] <= 1.05 * low), key=lambda n: sizes[n])[0]  # sorted は安定
    return best, jax.jit(jax.grad(make_loss(candidates[best])))


def test_reference():
    expect("6.7-4", ref, "pass", "正解", "1 度だけコンパイル")


@pytest.mark.parametrize("fn", [
    chooser(lowered=True),  # FLOP は lower().cost_analysis() から（コンパイル前）
    eval_shape_bytes,
    chooser(make_fn=lambda ml, p: (lambda g: lambda params, x: g(params, x))(jax.jit(jax.grad(ml(p))))),  # 包んだだけ
], ids=["lowered-flops", "eval-shape-bytes", "wrapper-of-one-jit"])
def test_other_correct(fn):
    expect("6.7-4", fn, "pass", "正解")


@pytest.mark.parametrize(("kw", "words"), [
    (dict(strict=True), ("< で比べている", "<=")),
    (dict(tie=1.0), ("5 % 以内",)),
    (dict(more_bytes=True), ("残差の多いほう",)),
    (dict(last=True), ("後ろの候補",)),
    (dict(size=2), ("一時領域", "temp_size_in_bytes")),
    (dict(by="first"), ("収まる最初の候補",)),
    (dict(by="bytes"), ("残差のいちばん少ない",)),
], ids=["strict", "no-tie", "more-bytes", "last", "temp", "first-fit", "fewest-bytes"])
def test_named_choice_mistakes(kw, words):
    expect("6.7-4", chooser(**kw), "fail", *words)


def test_returned_function_mistakes():
    def retrace_each_call(ml, p):
        return lambda params, x: jax.jit(jax.grad(ml(p)))(params, x)
    expect("6.7-4", chooser(make_fn=retrace_each_call), "fail", "コンパイルし", "1 度だけ作って")

    expect("6.7-4", chooser(make_fn=lambda ml, p: jax.grad(ml(p))), "fail", "jit されていない")

    def other_policy(ml, p):
        return jax.jit(jax.grad(ml(jax.checkpoint_policies.dots_saveable)))
    expect("6.7-4", chooser(make_fn=other_policy), "fail", "dots_saveable の方針で作られて")

    expect("6.7-4", chooser(make_fn=lambda ml, p: jax.jit(jax.grad(ml(None)))), "fail", "jax.checkpoint なしで")
    expect("6.7-4", chooser(make_fn=lambda ml, p: jax.jit(jax.value_and_grad(ml(p)))), "fail", "勾配になっていません")


def test_answer_shape_mistakes():
    expect("6.7-4", lambda *a: "dots_saveable", "fail", "2 つ組")
    expect("6.7-4", lambda ml, p, x, c, b: ("none_of_these", None), "fail", "candidates にありません")
    expect("6.7-4", lambda ml, p, x, c, b: (next(iter(c)), "jit"), "fail", "関数ではなく str")
    expect("6.7-4", lambda ml, p, x, c, b: (None, jax.jit(jax.grad(ml(None)))), "fail", "(None, None)")


def test_generic_messages_name_the_case():
    # どの誤りの並びとも一致しない答え: 最初に違った場面を、残差と予算の数値で言う
    def first_candidate(make_loss, params, x, candidates, budget):
        name = next(iter(candidates))
        return name, jax.jit(jax.grad(make_loss(candidates[name])))
    expect("6.7-4", first_candidate, "fail", "予算", "バイト")
    expect("6.7-4", lambda *a: (None, None), "fail", "None が返りました")


def test_not_done_and_learner_error():
    expect("6.7-4", not_done, "not_done", "まだ解答されていません")
    expect("6.7-4", boom, "error", "ZeroDivisionError")
