"""6.3c-1 make_migrated_step のチェック（ch6/checks/s6_3c/migrated_step.py）のテスト。"""
import functools

import jax
import pytest
from jax import lax
from jax.sharding import PartitionSpec as P

from ch6.checking import CANNOT_TELL, cannot_tell
from tests.checkhelp import N, boom, expect, not_done

LR_LOGISTIC = 0.5  # ノートブックの学習率（チェックは別の学習率を渡す）
AX = ("host", "local")  # 採点のメッシュの軸。バッチは P(AX) で 2 つの軸をまとめて分割


# 6.3c-1 -------------------------------------------------------------------------------
SPECS = dict(in_specs=(P(), P(AX), P(AX)), out_specs=P())


def _update(params, grads, lr):
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


def make_ref(mesh, loss_fn, lr):
    def body(params, x, y):
        loss, grads = jax.value_and_grad(lambda p: lax.pmean(loss_fn(p, x, y), AX))(params)
        return _update(params, grads, lr), loss
    return jax.jit(jax.shard_map(body, mesh=mesh, **SPECS))


def make_pcast(mesh, loss_fn, lr):
    # パラメータを「デバイスごとに違いうる」値にしてから grad し、勾配を pmean する（pmap と同じ書き順）
    def body(params, x, y):
        local = jax.tree.map(lambda a: lax.pcast(a, AX, to="varying"), params)
        loss, grads = jax.value_and_grad(loss_fn)(local, x, y)
        return _update(params, lax.pmean(grads, AX), lr), lax.pmean(loss, AX)
    return jax.jit(jax.shard_map(body, mesh=mesh, **SPECS))


def make_no_vma(mesh, loss_fn, lr):
    # pmap と同じ check_vma=False なら、元のコードをそのまま写せる。返すのはリストでもよい
    def body(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return [_update(params, lax.pmean(grads, AX), lr), lax.pmean(loss, AX)]
    return jax.jit(jax.shard_map(body, mesh=mesh, check_vma=False, in_specs=SPECS["in_specs"], out_specs=[P(), P()]))


def make_jit_of_lambda(mesh, loss_fn, lr):
    # jit の中で shard_map を作っても、jit が 1 度トレースするだけ（作り直しではない）
    sm = functools.partial(jax.shard_map, mesh=mesh, **SPECS)

    def body(params, x, y):
        loss, grads = jax.value_and_grad(lambda p: lax.pmean(loss_fn(p, x, y), AX))(params)
        return _update(params, grads, lr), loss
    return jax.jit(lambda *a: sm(body)(*a))


def make_decorated(mesh, loss_fn, lr):
    @jax.jit
    @functools.partial(jax.shard_map, mesh=mesh, **SPECS)
    def step(params, x, y):
        def global_loss(p):
            return lax.pmean(loss_fn(p, x, y), AX)
        loss, grads = jax.value_and_grad(global_loss)(params)
        return _update(params, grads, lr), loss
    return step


@pytest.mark.parametrize("fn", [make_ref, make_pcast, make_no_vma, make_jit_of_lambda, make_decorated])
def test_6_3c_1_correct(fn):
    expect("6.3c-1", fn, "pass", "レガシー版と同じ", "トレースし直しませんでした")


def make_naive(mesh, loss_fn, lr):
    # pmap の中身をそのまま写した（check_vma=True で勾配が自動で psum され、更新が n 倍）
    def body(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return _update(params, lax.pmean(grads, AX), lr), lax.pmean(loss, AX)
    return jax.jit(jax.shard_map(body, mesh=mesh, **SPECS))


def make_stacked(mesh, loss_fn, lr):
    def body(params, x, y):
        loss, grads = jax.value_and_grad(lambda p: lax.pmean(loss_fn(p, x, y), AX))(params)
        return jax.tree.map(lambda a: a[None], _update(params, grads, lr)), loss
    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=SPECS["in_specs"], out_specs=(P(AX), P())))


def make_plain_jit(mesh, loss_fn, lr):
    # jit + NamedSharding への移行としては正しいが、この演習は shard_map を求める
    @jax.jit
    def step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return _update(params, grads, lr), loss
    return step


def make_gather(mesh, loss_fn, lr):
    def body(params, x, y):
        xa, ya = lax.all_gather(x, AX, tiled=True), lax.all_gather(y, AX, tiled=True)
        loss, grads = jax.value_and_grad(loss_fn)(params, xa, ya)
        return _update(params, grads, lr), loss
    return jax.jit(jax.shard_map(body, mesh=mesh, check_vma=False, **SPECS))


def make_local_loss(mesh, loss_fn, lr):
    def body(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return _update(params, lax.pmean(grads, AX), lr), loss
    return jax.jit(jax.shard_map(body, mesh=mesh, check_vma=False, **SPECS))


def make_psum_loss(mesh, loss_fn, lr):
    def body(params, x, y):
        loss, grads = jax.value_and_grad(lambda p: lax.psum(loss_fn(p, x, y), AX))(params)
        return _update(params, grads, lr), loss
    return jax.jit(jax.shard_map(body, mesh=mesh, **SPECS))


def make_per_call(mesh, loss_fn, lr):
    # 以前の模範解答の形: 呼ぶたびに jit(shard_map(...)) を作り直す（毎回トレースされる）
    def step(params, x, y):
        return make_ref(mesh, loss_fn, lr)(params, x, y)
    return step


def make_no_jit(mesh, loss_fn, lr):
    # jit を付けない shard_map は、呼ぶたびにトレースされる
    def body(params, x, y):
        loss, grads = jax.value_and_grad(lambda p: lax.pmean(loss_fn(p, x, y), AX))(params)
        return _update(params, grads, lr), loss
    return jax.shard_map(body, mesh=mesh, **SPECS)


def make_double_loss(mesh, loss_fn, lr):
    # 損失を 2 度呼ぶ（loss と grad を別々に）のは正しい: 1 回目に 2 回呼ばれても、2 回目の呼び出しで増えなければよい
    def body(params, x, y):
        loss = lax.pmean(loss_fn(params, x, y), AX)
        grads = jax.grad(lambda p: lax.pmean(loss_fn(p, x, y), AX))(params)
        return _update(params, grads, lr), loss
    return jax.jit(jax.shard_map(body, mesh=mesh, **SPECS))


def make_fixed_lr(mesh, loss_fn, lr):
    return make_ref(mesh, loss_fn, LR_LOGISTIC)


def make_memo(mesh, loss_fn, lr):
    # 1 回目の結果を覚えて返し続ける（2 回目の別の入力で値が違う）
    step, memo = make_ref(mesh, loss_fn, lr), []

    def remembered(*args):
        if not memo:
            memo.append(step(*args))
        return memo[0]
    return remembered


def test_6_3c_1_wrong():
    if N > 1:
        expect("6.3c-1", make_naive, "fail", f"{N} 倍大きすぎます", "損失を pmean")
        expect("6.3c-1", make_stacked, "fail", "積み重な", "out_specs=P()")
        expect("6.3c-1", make_local_loss, "fail", "loss", "値が違います")
        expect("6.3c-1", make_psum_loss, "fail", "loss", "値が違います")
    expect("6.3c-1", make_plain_jit, "fail", "shard_map がありません")
    expect("6.3c-1", make_gather, "fail", "all-gather")
    expect("6.3c-1", make_fixed_lr, "fail", "学習率 0.5 相当", "引数 lr")
    expect("6.3c-1", make_memo, "fail", "2 回目", "値が違います")
    expect("6.3c-1", lambda mesh, loss_fn, lr: {"w": 0, "b": 0}, "fail", "ステップ関数のはず")
    expect("6.3c-1", lambda mesh, loss_fn, lr: (lambda p, x, y: p), "fail", "2 つ組")
    wrong_spec = lambda mesh, loss_fn, lr: jax.jit(jax.shard_map(  # noqa: E731
        lambda p, x, y: (p, lax.pmean(loss_fn(p, x, y), AX)), mesh=mesh,
        in_specs=(P(), P(), P()), out_specs=P()))
    expect("6.3c-1", wrong_spec, "fail", "in_specs の P(None, None)", "P(('host', 'local'))")
    expect("6.3c-1", not_done, "not_done")
    expect("6.3c-1", boom, "error", "ZeroDivisionError")


def test_6_3c_1_gather_is_named_where_the_compiler_drops_it(monkeypatch):
    """TPU でデバイスが 1 個だと、コンパイラは大きさ 1 の all-gather を消す（チップで見つけた）。jaxpr の all_gather で
    名指しする。ここではコンパイル結果に集団通信がないふりをして確かめる。"""
    from ch6 import hlo

    monkeypatch.setattr(hlo, "count_collectives", lambda *a, **k: {})
    expect("6.3c-1", make_gather, "fail", "all-gather")


def test_6_3c_1_retracing_is_named_correctly():
    # issue 14 の 7: 呼ぶたびに作り直す答えは、2 回目の呼び出しのトレースで見つかる
    expect("6.3c-1", make_per_call, "fail", "2 回目もトレース", "1 度だけ作って")
    expect("6.3c-1", make_no_jit, "fail", "2 回目もトレース", "jit がないか")
    # 損失を 2 度呼ぶだけの正しい答えを「作り直している」と誤って責めない
    expect("6.3c-1", make_double_loss, "pass", "トレースし直しませんでした")


def test_6_3c_1_says_what_one_device_cannot_tell():
    """デバイス 1 個では、損失を psum する答えも平均しない答えも解答例と同じ更新になる（tools/mutate.py が少ない
    デバイスで試して見つけた）。✅ の行がそう断り、2 個以上では断らない（そこでは test_6_3c_1_wrong が落とす）。"""
    msg = expect("6.3c-1", make_ref, "pass")
    if N > 1:
        assert CANNOT_TELL not in msg
        return
    assert cannot_tell("全デバイスでの平均") in msg
    for fn in (make_psum_loss, make_local_loss):
        expect("6.3c-1", fn, "pass", CANNOT_TELL)
