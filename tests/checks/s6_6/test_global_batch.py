"""6.6-3 global_batch: 参照と別の書き方（bool の mask、np.concatenate のパディング、関数を名前で import）は通り、
jax.device_put で作る答え（1 プロセスでは同じ配列）は、その名前で落ちる。
パディングの誤り（しない、デバイスの総数まで、もう 1 本の軸の大きさまで、割り切れるのに足す、0 でない行）、
spec の誤り（複製、もう 1 本の軸、特徴の軸も分割）、別のメッシュ、mask の誤り（すべて 1、複製、形）、
返す順番と型の誤りは、それぞれの言葉で落ちる。
パディングとメッシュの誤りは、軸の大きさがデバイスの総数と違うとき（2 デバイス以上）だけ見分けられる。"""
import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from ch6 import Status
from ch6.meshes import mesh_2d_shape, multiple_of
from tests.checkhelp import boom, not_done

from .common import N, say
from .common import global_batch_reference as reference

EX = "6.6-3"
A, B = mesh_2d_shape(N)
multi = pytest.mark.skipif(N < 2, reason="1 デバイスでは軸の大きさもデバイスの総数も 1 なので、パディングはいつも 0 行")


def batch(rows_for, spec_for=lambda axis, other: P(axis), mask_spec_for=None, fill=None, mask_ones=False,
          mesh_for=lambda mesh: mesh, mask_dtype=np.float32):
    """パディングの行数・spec・メッシュ・mask を部品ごとに変えられる答え。"""
    def global_batch(x, mesh, axis):
        other = next(a for a in mesh.axis_names if a != axis)
        rows = rows_for(x.shape[0], mesh, axis, other)
        pad = rows - x.shape[0]
        padded = np.concatenate([x, np.zeros((pad, x.shape[1]), x.dtype) if fill is None else fill(x, pad)])
        mask = (np.ones(rows) if mask_ones else np.arange(rows) < x.shape[0]).astype(mask_dtype)
        m = mesh_for(mesh)
        sx = NamedSharding(m, spec_for(axis, other))
        sm = NamedSharding(m, (mask_spec_for or spec_for)(axis, other))
        return (jax.make_array_from_process_local_data(sx, padded, padded.shape),
                jax.make_array_from_process_local_data(sm, mask, mask.shape))
    return global_batch


def right_rows(n, mesh, axis, other):
    return multiple_of(mesh.shape[axis], n)


def test_reference_and_other_forms_pass():
    say(EX, reference, Status.PASS, "形・分割・値・mask")
    say(EX, batch(right_rows, mask_dtype=np.bool_), Status.PASS)


def test_function_imported_by_name_passes():
    """from jax import make_array_from_process_local_data のように名前で読み込んだ答えも、作った関数が見える。"""
    space = {"np": np, "NamedSharding": NamedSharding, "P": P,
             "local": jax.make_array_from_process_local_data, "multiple_of": multiple_of}
    exec("def global_batch(x, mesh, axis):\n"
         "    rows = multiple_of(mesh.shape[axis], x.shape[0])\n"
         "    s = NamedSharding(mesh, P(axis))\n"
         "    m = (np.arange(rows) < x.shape[0]).astype(np.float32)\n"
         "    return local(s, np.pad(x, ((0, rows - x.shape[0]), (0, 0))), (rows, x.shape[1])), local(s, m, (rows,))\n",
         space)
    say(EX, space["global_batch"], Status.PASS)
    assert space["local"] is jax.make_array_from_process_local_data   # チェックの後は元に戻っている


def device_put_batch(which=("x", "mask"), by_name=False):
    """x と mask（の一方）を jax.device_put で作る答え（1 プロセスでは同じ配列になる）。"""
    put = jax.device_put

    def global_batch(x, mesh, axis):
        rows = multiple_of(mesh.shape[axis], x.shape[0])
        s = NamedSharding(mesh, P(axis))
        padded, mask = np.pad(x, ((0, rows - x.shape[0]), (0, 0))), (np.arange(rows) < x.shape[0]).astype(np.float32)
        make = (lambda a, shape: put(a, s)) if by_name else (lambda a, shape: jax.device_put(a, s))
        local = jax.make_array_from_process_local_data
        return tuple(make(a, a.shape) if w in which else local(s, a, a.shape)
                     for w, a in (("x", padded), ("mask", mask)))
    return global_batch


def test_device_put_is_named():
    say(EX, device_put_batch(), Status.FAIL, "x と mask を jax.device_put", "make_array_from_process_local_data")
    msg = say(EX, device_put_batch(which=("mask",)), Status.FAIL, "mask を jax.device_put", "ローカルなデータ")
    # editor2_a: mask だけが誤りのとき、理由の文で x を名指ししない
    assert " x " not in msg and "x と" not in msg, msg
    assert jax.device_put is not None


def test_device_put_by_name_is_named():
    """device_put を名前で持っていても（関数のグローバル変数ではなく閉包）、make_array を呼ばなければそう言う。"""
    say(EX, device_put_batch(by_name=True), Status.FAIL, "make_array_from_process_local_data が呼ばれていません")


def test_one_device_pass_line_says_what_it_cannot_tell():
    msg = say(EX, reference, Status.PASS)
    assert ("確かめられません" in msg) == (N == 1), msg


@multi
def test_no_padding_is_explained_without_jax_english():
    msg = say(EX, batch(lambda n, mesh, axis, other: n), Status.FAIL, "パディングしてから", "ValueError")
    assert "evenly" not in msg


@multi
def test_padding_to_the_device_count_is_named():
    say(EX, batch(lambda n, mesh, axis, other: multiple_of(N, n)), Status.FAIL, f"デバイスの総数 {N}", "倍数まで")


@pytest.mark.skipif(not (A > B > 1 and A % B == 0), reason="もう 1 本の軸の倍数が行を分割する軸で割り切れるメッシュでだけ形に出る")
def test_padding_to_the_other_axis_is_named():
    say(EX, batch(lambda n, mesh, axis, other: multiple_of(mesh.shape[other], n)), Status.FAIL, "パディングも")


def test_padding_when_it_divides_is_named():
    say(EX, batch(lambda n, mesh, axis, other: (n // mesh.shape[axis] + 1) * mesh.shape[axis]), Status.FAIL,
        "パディングは要りません")


@multi
def test_nonzero_padding_is_named():
    say(EX, batch(right_rows, fill=lambda x, pad: x[:pad]), Status.FAIL, "0 でない値")


@multi
def test_spec_mistakes_are_named():
    say(EX, batch(lambda n, mesh, axis, other: multiple_of(N, n), spec_for=lambda axis, other: P()), Status.FAIL,
        "複製")
    say(EX, batch(lambda n, mesh, axis, other: multiple_of(N, n), spec_for=lambda axis, other: P(other)),
        Status.FAIL, "ではありません")
    say(EX, batch(right_rows, mask_spec_for=lambda axis, other: P()), Status.FAIL, "mask の spec")


@pytest.mark.skipif(B < 2, reason="もう 1 本の軸の大きさが 1 なら、特徴の軸を分割しても配置は同じ")
def test_splitting_the_features_is_named():
    say(EX, batch(right_rows, spec_for=lambda axis, other: P(axis, other), mask_spec_for=lambda axis, other: P(axis)),
        Status.FAIL, "特徴の軸")


@multi
def test_own_mesh_is_named():
    say(EX, batch(right_rows, mesh_for=lambda mesh: jax.make_mesh(tuple(mesh.shape.values()), mesh.axis_names)),
        Status.FAIL, "別のメッシュ", "渡された mesh")


@multi
def test_mask_of_ones_is_named():
    say(EX, batch(right_rows, mask_ones=True), Status.FAIL, "すべて 1")


def test_order_type_and_value_mistakes():
    say(EX, lambda x, mesh, axis: reference(x, mesh, axis)[::-1], Status.FAIL, "(x, mask) の順")
    say(EX, lambda x, mesh, axis: tuple(np.asarray(a) for a in reference(x, mesh, axis)), Status.FAIL,
        "jax.Array", "make_array_from_process_local_data")
    say(EX, lambda x, mesh, axis: reference(x[::-1].copy(), mesh, axis), Status.FAIL, "順番を変えず")
    say(EX, lambda x, mesh, axis: reference(x, mesh, axis)[0], Status.FAIL, "2 つ組")

    def mask_per_feature(x, mesh, axis):
        gx, _ = reference(x, mesh, axis)
        m = (np.arange(gx.shape[0]) < x.shape[0]).astype(np.float32)[:, None] * np.ones(x.shape[1], np.float32)
        return gx, jax.make_array_from_process_local_data(NamedSharding(mesh, P(axis)), m, m.shape)
    say(EX, mask_per_feature, Status.FAIL, "1 行に 1 つ")


def test_not_done_and_learner_error():
    say(EX, not_done, Status.NOT_DONE)
    say(EX, boom, Status.ERROR, "ZeroDivisionError")
