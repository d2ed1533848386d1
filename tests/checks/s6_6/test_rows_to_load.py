"""6.6-4 rows_to_load: 参照と別の書き方（np.unique、集合、シャードの行を 1 行ずつ調べる）は通り、持ち主を見ない、
d.process_index を使う、連続した行を仮定する、重複、昇順でない、slice(None) をそのまま使う、owner をデバイスで引く、
列を読む、stop を含める、最小から最大までの行、1 つのデバイスのシャードだけは、それぞれの言葉で落ちる。
持ち主の誤りと重複は、デバイスが 2 個以上（プロセスが 2 つ以上、複製される軸がある）のときだけ見分けられる。"""
import numpy as np
import pytest

from ch6 import Status
from ch6.checks.s6_6.rows_to_load import reference
from ch6.meshes import mesh_2d_shape
from ch6.recorded import input_devices
from tests.checkhelp import boom, not_done

from .common import N, say

EX = "6.6-4"
multi = pytest.mark.skipif(N < 2, reason="1 デバイスではプロセスが 1 つで、どの答えもすべての行になる")


def shard_rows(keep=lambda device, owner, process: owner[device.id] == process, dim=0, extra=0):
    """選んだデバイスのシャードの行を、重複も順番もそのまま並べる（誤りを部品ごとに入れる）。"""
    def rows_to_load(sharding, global_shape, owner, process):
        out = []
        for device, index in sharding.devices_indices_map(tuple(global_shape)).items():
            if keep(device, owner, process):
                start, stop, _ = index[dim].indices(global_shape[dim])
                out.extend(range(start, stop + extra))
        return out
    return rows_to_load


def test_reference_and_other_forms_pass():
    say(EX, reference, Status.PASS, "spec", "各デバイスのプロセスの決め方")
    say(EX, lambda *a: np.unique(shard_rows()(*a)), Status.PASS)
    say(EX, lambda *a: set(shard_rows()(*a)), Status.PASS)

    def one_by_one(sharding, global_shape, owner, process):
        rows = np.arange(global_shape[0])
        mine = [rows[index[0]] for d, index in sharding.devices_indices_map(tuple(global_shape)).items()
                if owner[d.id] == process]
        return sorted({int(r) for part in mine for r in part})
    say(EX, one_by_one, Status.PASS)


@multi
def test_ignoring_the_owner_is_named():
    say(EX, lambda *a: sorted(set(shard_rows(keep=lambda d, o, p: True)(*a))), Status.FAIL, "すべてのデバイスの行ではなく")


@multi
def test_process_index_is_named():
    say(EX, lambda *a: sorted(set(shard_rows(keep=lambda d, o, p: d.process_index == p)(*a))), Status.FAIL,
        "d.process_index", "owner[d.id]")


@multi
def test_contiguous_block_is_named():
    def block(sharding, global_shape, owner, process):
        n_proc = len(set(owner.values()))
        per = global_shape[0] // n_proc
        return list(range(process * per, (process + 1) * per))
    say(EX, block, Status.FAIL, "連続するとは限りません")


@multi
def test_duplicates_are_named():
    say(EX, lambda *a: sorted(shard_rows()(*a)), Status.FAIL, "2 度以上")


def test_unsorted_is_named():
    say(EX, lambda *a: sorted(set(shard_rows()(*a)), reverse=True), Status.FAIL, "昇順ではありません")


def test_none_slice_is_explained():
    def raw_slice(sharding, global_shape, owner, process):
        rows = set()
        for d, index in sharding.devices_indices_map(tuple(global_shape)).items():
            if owner[d.id] == process:
                rows.update(range(index[0].start, index[0].stop))
        return sorted(rows)
    msg = say(EX, raw_slice, Status.FAIL, "slice(None, None)", "indices")
    assert "NoneType" not in msg


def test_owner_by_device_is_named():
    say(EX, shard_rows(keep=lambda d, o, p: o[d] == p), Status.FAIL, "owner[d.id]")


def test_columns_and_inclusive_stop():
    say(EX, lambda *a: sorted(set(shard_rows(dim=1)(*a))), Status.FAIL, "index[0]")
    say(EX, lambda *a: sorted(set(shard_rows(extra=1)(*a))), Status.FAIL, "index[0]")


def test_forms():
    say(EX, lambda *a: np.asarray(reference(*a))[None], Status.FAIL, "1 次元")
    say(EX, lambda *a: "0:8", Status.FAIL, "str")
    say(EX, lambda *a: [float(r) for r in reference(*a)], Status.FAIL, "浮動小数")


def test_not_done_and_learner_error():
    say(EX, not_done, Status.NOT_DONE)
    say(EX, boom, Status.ERROR, "ZeroDivisionError")


@pytest.mark.skipif(N < 3, reason="デバイスが 2 個以下では、どのプロセスの行も 1 つの連続した範囲")
def test_hull_of_the_shards_is_named():
    """シャードの行の最小から最大までを返す（3 デバイスでも、1 つおきの持ち主で飛び飛びになる）。"""
    def hull(*a):
        rows = shard_rows()(*a)
        return list(range(min(rows), max(rows) + 1)) if rows else []
    say(EX, hull, Status.FAIL, "最小から最大まで")


@multi
def test_first_shard_only_is_named():
    def first_shard(sharding, global_shape, owner, process):
        for device, index in sharding.devices_indices_map(tuple(global_shape)).items():
            if owner[device.id] == process:
                return list(range(*index[0].indices(global_shape[0])[:2]))
        return []
    say(EX, first_shard, Status.FAIL, "1 つのデバイスのシャードの行だけ")


def test_pass_line_says_what_this_device_count_cannot_tell():
    msg = say(EX, reference, Status.PASS)
    assert ("確かめられません" in msg) == (min(mesh_2d_shape(input_devices())) == 1), msg


def unique_in_map_order(sharding, global_shape, owner, process):
    """重複は除くが、devices_indices_map の順のまま（昇順に並べない）。"""
    out = []
    for row in shard_rows()(sharding, global_shape, owner, process):
        if row not in out:
            out.append(row)
    return out


def test_map_order_without_sorting():
    if min(mesh_2d_shape(input_devices())) == 1:   # シャードの行はいつもデバイスの順に昇順: 正解の 1 行がそう言う
        say(EX, unique_in_map_order, Status.PASS, "昇順に並べない誤りはこの環境では確かめられません")
    else:
        say(EX, unique_in_map_order, Status.FAIL, "昇順ではありません")


@pytest.mark.skipif(N < 3, reason="1 つおきの持ち主はデバイスが 3 個以上のときだけ")
def test_interleaved_owner_gives_rows_with_gaps():
    """隠しの場合に、1 つのプロセスの行が飛び飛びになる場合がある（デバイスが素数個でも）。"""
    from ch6.checks.s6_6.common import exercise_rng
    from ch6.checks.s6_6.rows_to_load import cases
    gaps = [sharding for sharding, shape, label, owner, n_proc in cases(exercise_rng(4))
            for p in range(n_proc) for rows in [reference(sharding, shape, owner, p)]
            if rows and rows != list(range(rows[0], rows[-1] + 1))]
    assert gaps
