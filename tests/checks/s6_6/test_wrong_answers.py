"""6.6 の問題文から書いた、ありそうな誤答（issue 39）。どれも 1・3・8 デバイスで、その誤りの名前で落ちるか、
そのデバイスの数では見分けられないことを正解の 1 行が言う。"""
import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from ch6 import Status
from ch6.meshes import mesh_2d_shape, multiple_of

from .common import N, say

# ---- 6.6-1 local_rows

def test_assert_instead_of_value_error():
    def local_rows(b, p, n_proc, n_local):
        assert b % (n_proc * n_local) == 0
        return p * (b // n_proc), (p + 1) * (b // n_proc)
    say("6.6-1", local_rows, Status.FAIL, "AssertionError", "ValueError")


def test_strided_rows():
    def local_rows(b, p, n_proc, n_local):
        if b % (n_proc * n_local):
            raise ValueError(b)
        return slice(p, b, n_proc)
    say("6.6-1", local_rows, Status.FAIL, "step", "飛び飛び")


def test_b_over_local_devices_per_process():
    def local_rows(b, p, n_proc, n_local):
        if b % (n_proc * n_local):
            raise ValueError(b)
        return p * (b // n_local), (p + 1) * (b // n_local)
    msg = say("6.6-1", local_rows, Status.FAIL, "p·B/P")
    assert "0の行" not in msg


# ---- 6.6-2 initialize_kwargs

def kwargs(process_id=None, device_ids=None):
    def initialize_kwargs(cluster, host, j):
        hosts, k = cluster["hosts"], cluster["processes_per_host"]
        per, h = cluster["devices_per_host"] // k, hosts.index(host)
        pid = h * k + j if process_id is None else process_id(h, j, k)
        ids = list(range(j * per, (j + 1) * per)) if device_ids is None else device_ids(pid, per)
        return {"coordinator_address": f"{hosts[0]}:{cluster['port']}", "num_processes": len(hosts) * k,
                "process_id": pid, "local_device_ids": ids}
    return initialize_kwargs


def test_h_plus_local_rank_is_named_as_such():
    """local_rank 0 では h + j も h も同じ値: ホストの位置だけとは言わない。"""
    msg = say("6.6-2", kwargs(process_id=lambda h, j, k: h + j), Status.FAIL, "h + local_rank")
    assert "ホストの位置だけ" not in msg


def test_global_device_ids():
    say("6.6-2", kwargs(device_ids=lambda pid, per: list(range(pid * per, (pid + 1) * per))), Status.FAIL,
        "プロセス番号ではなく")


# ---- 6.6-3 global_batch

def batch(mask_dtype=np.float32, front=False):
    def global_batch(x, mesh, axis):
        rows = multiple_of(mesh.shape[axis], x.shape[0])
        s, pad = NamedSharding(mesh, P(axis)), rows - x.shape[0]
        padded = np.pad(x, ((pad, 0) if front else (0, pad), (0, 0)))
        m = ((np.arange(rows) >= pad) if front else (np.arange(rows) < x.shape[0])).astype(mask_dtype)
        return (jax.make_array_from_process_local_data(s, padded, padded.shape),
                jax.make_array_from_process_local_data(s, m, m.shape))
    return global_batch


def test_integer_mask():
    say("6.6-3", batch(mask_dtype=np.int32), Status.FAIL, "dtype", "int32")


def test_padding_in_front():
    if N == 1:   # どの軸の大きさも 1 でパディングが要らない
        say("6.6-3", batch(front=True), Status.PASS, "確かめられません")
    else:
        say("6.6-3", batch(front=True), Status.FAIL, "順番を変えずに先頭")


# ---- 6.6-4 rows_to_load

def shards(sharding, shape, owner, process):
    return [list(range(*index[0].indices(shape[0])[:2]))
            for device, index in sharding.devices_indices_map(tuple(shape)).items() if owner[device.id] == process]


def test_hull_of_the_shards():
    def hull(*a):
        rows = [r for s in shards(*a) for r in s]
        return list(range(min(rows), max(rows) + 1)) if rows else []
    if N <= 2:
        say("6.6-4", hull, Status.PASS, "確かめられません")
    else:
        say("6.6-4", hull, Status.FAIL, "最小から最大まで")


def test_first_shard_only():
    def first(*a):
        return next(iter(shards(*a)), [])
    if N == 1:
        say("6.6-4", first, Status.PASS, "デバイスのプロセスを取り違える誤り")
    else:
        say("6.6-4", first, Status.FAIL, "1 つのデバイスのシャードの行だけ")


def test_concatenated_shards():
    def concat(*a):
        return [r for s in shards(*a) for r in s]
    if N == 1:
        say("6.6-4", concat, Status.PASS, "確かめられません")
    else:
        say("6.6-4", concat, Status.FAIL, "2 度以上")


def test_unsorted_union_says_when_it_cannot_tell():
    def unsorted(*a):
        out = []
        for s in shards(*a):
            out += [r for r in s if r not in out]
        return out
    if min(mesh_2d_shape(N)) == 1:
        say("6.6-4", unsorted, Status.PASS, "昇順に並べない誤り")
    else:
        say("6.6-4", unsorted, Status.FAIL, "昇順ではありません")
