"""6.4-4 fsdp_shard のチェック（ch6/checks/s6_4/fsdp_shard.py）のテスト。"""
import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from ch6.recorded import input_devices
from tests.checkhelp import boom, expect, not_done
from tests.checks.s6_4.common import axis_by, fsdp_ref, longest, place

first = axis_by(lambda ax, shape: ax[0])


last = axis_by(lambda ax, shape: ax[-1])


longest_last = axis_by(lambda ax, shape: max(ax, key=lambda i: (shape[i], i)))


def fsdp_numpy_argmax(tree, mesh):
    # 別解: 割り切れない軸を -1 にして np.argmax（同じ値なら最初の位置を返す）。末尾の None を書いても同じ
    k = mesh.shape["data"]

    def put(a):
        shape = np.shape(a)
        lengths = [d if d % k == 0 else -1 for d in shape]
        if not shape or max(lengths) < 0:
            return jax.device_put(a, NamedSharding(mesh, P()))
        i = int(np.argmax(lengths))
        spec = [None] * len(shape)
        spec[i] = "data"
        return jax.device_put(a, NamedSharding(mesh, P(*spec)))
    return jax.tree.map(put, tree)


def fsdp_set_mesh(tree, mesh):
    # 別解: set_mesh の中で P だけを渡す
    with jax.set_mesh(mesh):
        return jax.tree.map(
            lambda a: jax.device_put(a, P() if longest(np.shape(a), mesh.shape["data"]) is None
                                     else P(*[None] * longest(np.shape(a), mesh.shape["data"]), "data")), tree)


@pytest.mark.parametrize("fn", [fsdp_ref, fsdp_numpy_argmax, fsdp_set_mesh])
def test_6_4_4_correct(fn):
    expect("6.4-4", fn, "pass")


@pytest.mark.parametrize("pick, words", [
    (first, ("最初の軸ではなく",)),
    (last, ("最後の軸ではなく",)),
    (longest_last, ("前の軸",)),
])
def test_6_4_4_which_axis(pick, words):
    # 回帰（issue 13）: バイト数は同じでも、分割した軸が規則と違えば落ちる。どのデバイス数でも（奇数・1 個でも）
    expect("6.4-4", lambda t, m: place(t, m, m.shape["data"], pick=pick), "fail", "の分割のはず", *words)


def test_6_4_4_wrong():
    n = input_devices()  # チェックがメッシュに使うデバイスの数（8 個まで: 記録の範囲）
    expect("6.4-4", lambda t, m: jax.tree.map(lambda a: jax.device_put(a, NamedSharding(m, P())), t),
           "fail", "分割されていません")
    expect("6.4-4", lambda t, m: place(t, m, m.shape["data"], only_2d=True), "fail",
           "1 次元の葉" if n > 1 else "分割されていません")
    if n > 2:
        # jax.device_count() で割り切れるかを調べてしまう誤り。2 次元メッシュ（偶数）か、
        # 一部のデバイスのメッシュ（奇数）で data の大きさが全デバイス数と違うときに見つかる
        # （9 個以上ではチェックは先頭の 8 個を使うので、その数で）
        expect("6.4-4", lambda t, m: place(t, m, input_devices()), "fail", "mesh.shape['data']")
    if n > 1:
        expect("6.4-4", lambda t, m: jax.device_put(t, jax.devices()[0]), "fail", "メッシュのデバイス", "個でした")
    else:
        expect("6.4-4", lambda t, m: jax.device_put(t, jax.devices()[0]), "fail", "NamedSharding")

    def both(t, m):
        # data と model の両方で分割する（model の大きさが 1 でも spec が違う）
        if "model" not in m.axis_names:
            return fsdp_ref(t, m)
        k = m.shape["data"] * m.shape["model"]

        def put(a):
            axis = longest(np.shape(a), k)
            spec = P(*[None] * axis, ("data", "model")) if axis is not None else P()
            return jax.device_put(a, NamedSharding(m, spec))
        return jax.tree.map(put, t)
    expect("6.4-4", both, "fail", "'data' 軸だけ")
    expect("6.4-4", lambda t, m: place(jax.tree.map(lambda a: np.asarray(a) * 1.0, t), m, m.shape["data"]),
           "fail", "dtype")
    expect("6.4-4", lambda t, m: list(jax.tree.leaves(fsdp_ref(t, m))), "fail", "構造")
    if n > 1:
        expect("6.4-4", lambda t, m: jax.tree.map(lambda a: jax.device_put(a, NamedSharding(m, P("data"))), t),
               "fail", "割り切れない軸", "mesh.shape['data']")
    expect("6.4-4", not_done, "not_done", "関数の本体に答えを書いてから")
    expect("6.4-4", boom, "error", "ZeroDivisionError")


def test_6_4_4_own_mesh_same_devices():
    # 渡された mesh ではなく、自分で作ったメッシュ（軸の名前が違う）に置く誤り
    def own(t, m):
        mine = jax.make_mesh(m.devices.shape, tuple(f"my_{a}" for a in m.axis_names), devices=list(m.devices.flat))
        return jax.tree.map(lambda a: jax.device_put(a, NamedSharding(mine, P())), t)
    msg = expect("6.4-4", own, "fail", "渡された mesh", "別のメッシュ", "'my_data'", "引数の mesh")
    # editor2_a: 以前は NamedSharding の葉にも「NamedSharding で配置されていません（NamedSharding）」と言っていた
    assert "配置されていません" not in msg, msg


def test_6_4_4_own_mesh_other_device_order():
    # 同じ軸の名前・同じデバイスでも、並びが違うメッシュは渡された mesh ではない
    if jax.device_count() < 2:
        pytest.skip("デバイスが 1 個では並びを変えられない")

    def reordered(t, m):
        mine = jax.make_mesh(m.devices.shape, m.axis_names, devices=list(m.devices.flat)[::-1])
        return jax.tree.map(lambda a: jax.device_put(a, NamedSharding(mine, P())), t)
    msg = expect("6.4-4", reordered, "fail", "デバイスの並びが違うメッシュ", "引数の mesh")
    assert "配置されていません" not in msg, msg


def test_6_4_4_not_a_named_sharding():
    # 1 つのデバイスに置く（SingleDeviceSharding）: 型の名前を言う
    if jax.device_count() > 1:
        pytest.skip("デバイスが 2 個以上では、デバイスの数の違いで先に落ちる")
    expect("6.4-4", lambda t, m: jax.device_put(t, jax.devices()[0]), "fail", "NamedSharding ではなく",
           "SingleDeviceSharding")
