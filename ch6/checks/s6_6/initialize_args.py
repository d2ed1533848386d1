"""6.6-2 initialize_kwargs: クラスタの構成から、あるプロセスが jax.distributed.initialize に渡す引数を作る。

約束（問題文）: ``cluster = {"hosts": [...], "devices_per_host": G, "processes_per_host": k, "port": ポート}``。
コーディネータは hosts の最初のホスト（プロセス 0 が動く）で、全プロセスが同じ "ホスト:ポート" を渡す。
プロセスの総数は ホスト数 × k、ホスト h（hosts の中の位置）の local_rank j のプロセス番号は h·k + j。
そのプロセスが使うデバイスは、そのホストの G / k 個のうち [j·G/k, (j + 1)·G/k)。k = 1 なら None（すべて）でもよい。
"""
from __future__ import annotations

import inspect
from collections.abc import Mapping

import numpy as np

from ...checking import Fail, call, exercise
from ...recorded import recorded
from .common import as_int, exercise_rng

KEYS = ("coordinator_address", "num_processes", "process_id", "local_device_ids")


@recorded
def reference(cluster, host, local_rank):
    hosts, k = cluster["hosts"], cluster["processes_per_host"]
    per = cluster["devices_per_host"] // k
    return {"coordinator_address": f"{hosts[0]}:{cluster['port']}", "num_processes": len(hosts) * k,
            "process_id": hosts.index(host) * k + local_rank,
            "local_device_ids": list(range(local_rank * per, (local_rank + 1) * per))}


def clusters(rng: np.random.Generator) -> list[dict]:
    """GPU 1 枚に 1 プロセス、1 プロセスに GPU 複数、ホストに 1 プロセス（TPU と同じ）、奇数のホストとプロセス。"""
    out = []
    for prefix, n_hosts, g, k in (("gpu-a", 3, 4, 4), ("node", 2, 8, 2), ("tpu-w", 4, 4, 1), ("gpu-b", 5, 6, 3)):
        numbers = rng.choice(np.arange(1, 40), size=n_hosts, replace=False)   # 名前の順とは限らない並び
        out.append({"hosts": [f"{prefix}{int(i):02d}" for i in numbers], "devices_per_host": g,
                    "processes_per_host": k, "port": int(rng.integers(20_000, 30_000))})
    return out


def _describe(cluster, host, j) -> str:
    return f"{host} の local_rank {j}（{len(cluster['hosts'])} 台 × {cluster['processes_per_host']} プロセス）"


def _as_kwargs(out, where: str) -> dict:
    import jax

    if not isinstance(out, Mapping):
        raise Fail(f"{where}: 戻り値は引数の名前をキーにした dict のはずが、{type(out).__name__} でした。")
    params = inspect.signature(jax.distributed.initialize).parameters
    unknown = [key for key in out if key not in params]
    if unknown:
        raise Fail(f"jax.distributed.initialize に {unknown[0]!r} という引数はありません。"
                   f"使う名前は {', '.join(KEYS)} です。")
    return dict(out)


def _device_ids(value, where: str, k: int):
    if value is None:
        if k == 1:
            return None
        raise Fail(f"{where}: local_device_ids が None だと、同じホストの {k} 個のプロセスがどれもすべてのデバイスを使います。"
                   "そのプロセスが使うデバイスの番号を並べます。")
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return [int(value)]
    if isinstance(value, (list, tuple, range, np.ndarray)):
        return sorted(as_int(v, f"{where}: local_device_ids の要素") for v in np.asarray(value).ravel().tolist())
    raise Fail(f"{where}: local_device_ids はデバイスの番号のリストのはずが、{type(value).__name__} でした。")


@exercise("6.6-2", "initialize_kwargs")
def check_initialize_kwargs(fn):
    # 参照の値はすべて学習者を呼ぶ前に（学習者版では、作るときに記録した値を引く）
    wants = {(c, h, j): reference(cluster, host, j) for c, cluster in enumerate(clusters(exercise_rng(2)))
             for h, host in enumerate(cluster["hosts"]) for j in range(cluster["processes_per_host"])}
    rows = []   # (cluster, host, h, j, where, 学習者の dict, 参照の dict)
    for c, cluster in enumerate(clusters(exercise_rng(2))):
        for h, host in enumerate(cluster["hosts"]):
            for j in range(cluster["processes_per_host"]):
                where = _describe(cluster, host, j)
                got = _as_kwargs(call(fn, {**cluster, "hosts": list(cluster["hosts"])}, host, j), where)
                missing = [key for key in KEYS[:3] + (KEYS[3:] if cluster["processes_per_host"] > 1 else ())
                           if key not in got]
                if missing:
                    raise Fail(f"{where}: 引数 {missing[0]} がありません。キーは {', '.join(KEYS)} です。")
                rows.append((cluster, host, h, j, where, got, wants[c, h, j]))
    for check in (_coordinator, _num_processes, _process_id, _local_devices):
        for cluster, host, h, j, where, got, want in rows:
            check(cluster, host, h, j, where, got, want, rows)
    n = sum(len(c["hosts"]) * c["processes_per_host"] for c in clusters(exercise_rng(2)))
    return f"4 通りのクラスタの {n} 個のプロセスのすべてで、4 つの引数が一致しました。"


def _coordinator(cluster, host, h, j, where, got, want, rows):
    hosts, port = cluster["hosts"], cluster["port"]
    want, value = want["coordinator_address"], got["coordinator_address"]
    if value == want:
        return
    said = f"{where}: coordinator_address は {want!r} のはずが、{value!r} でした。"
    if not isinstance(value, str):
        raise Fail(said + "'ホスト:ポート' の形の文字列にします。")
    if value == f"{host}:{port}":
        raise Fail(said + "全プロセスが同じアドレス（最初のホスト、プロセス 0 が動くホスト）を渡してください。")
    if value == f"{min(hosts)}:{port}":
        raise Fail(said + "hosts を名前の順に並べ替えず、渡された順の最初のホスト（プロセス 0 が動くホスト）を使ってください。")
    if value == hosts[0]:
        raise Fail(said + "ポートが抜けているので、'ホスト:ポート' の形にします。")
    if value.startswith(("127.0.0.1", "localhost")):
        raise Fail(said + "ループバックアドレスには、ほかのホストから届きません。")
    raise Fail(said + "コーディネータは hosts の最初のホストの cluster['port'] で動きます。")


def _num_processes(cluster, host, h, j, where, got, want, rows):
    n_hosts, g, k = len(cluster["hosts"]), cluster["devices_per_host"], cluster["processes_per_host"]
    want = want["num_processes"]
    value = as_int(got["num_processes"], f"{where}: num_processes ")
    if value == want:
        return
    said = f"{where}: num_processes は {want} のはずが、{value} でした。"
    if value == n_hosts:
        raise Fail(said + f"ホストの数ではなく、プロセスの数（1 ホストに {k} 個）を数えます。")
    if value == n_hosts * g:
        raise Fail(said + f"デバイスの数ではなく、プロセスの数（1 ホストに {k} 個）を数えます。")
    if value == k:
        raise Fail(said + "1 ホストのプロセスの数ではなく、全ホストのプロセスを合わせた数を渡します。")
    raise Fail(said + "プロセスの総数は、ホストの数 × 1 ホストのプロセスの数です。")


# process_id のよくある誤り: (その番号の決め方（want は正しい番号）, 説明)。すべてのプロセスで一致したときだけ、その名前を言う
# （local_rank 0 では h + j も h も同じ値なので、1 つのプロセスの値だけでは決めない）
_ID_SLIPS = (
    (lambda n_hosts, g, k, h, j, want: j,
     lambda g, k: f"local_rank だけでは、ほかのホストのプロセスと番号が重なります（ホスト h は h·{k} から）。"),
    (lambda n_hosts, g, k, h, j, want: h,
     lambda g, k: "ホストの位置だけでは、同じホストのプロセスの番号が重なります（h·k + local_rank にします）。"),
    (lambda n_hosts, g, k, h, j, want: h + j,
     lambda g, k: f"h + local_rank ではホストをまたいで番号が重なるので、ホストの位置に 1 ホストのプロセスの数 {k} を掛けます。"),
    (lambda n_hosts, g, k, h, j, want: j * n_hosts + h,
     lambda g, k: "番号は先にホストをまたがず、ホストごとに続けて h·k + local_rank と数えます。"),
    (lambda n_hosts, g, k, h, j, want: h * g + j,
     lambda g, k: f"ホストの位置に掛けるのはデバイスの数 {g} ではなく、1 ホストのプロセスの数 {k} です。"),
    (lambda n_hosts, g, k, h, j, want: want + 1,
     lambda g, k: "プロセス番号は 0 から数えます。"),
)


def _process_id(cluster, host, h, j, where, got, want, rows):
    g, k = cluster["devices_per_host"], cluster["processes_per_host"]
    want = want["process_id"]
    value = as_int(got["process_id"], f"{where}: process_id ")
    if value == want:
        return
    said = f"{where}: process_id は {want} のはずが、{value} でした。"
    values = [(c, hh, jj, as_int(v["process_id"], f"{w}: process_id "), ref["process_id"])
              for c, _, hh, jj, w, v, ref in rows]
    for rule, hint in _ID_SLIPS:
        if all(v == rule(len(c["hosts"]), c["devices_per_host"], c["processes_per_host"], hh, jj, pid)
               for c, hh, jj, v, pid in values):
            raise Fail(said + hint(g, k))
    raise Fail(said + "hosts の中の位置 h と local_rank から h·k + local_rank と数えます。")


def _local_devices(cluster, host, h, j, where, got, want, rows):
    g, k = cluster["devices_per_host"], cluster["processes_per_host"]
    pid, want = want["process_id"], want["local_device_ids"]
    per = len(want)
    value = _device_ids(got.get("local_device_ids"), where, k)
    if value is None or value == want:
        return
    said = f"{where}: local_device_ids は {want} のはずが、{value} でした。"
    if per > 1 and value == [j]:
        raise Fail(said + f"1 プロセスが使うデバイスは {g} / {k} = {per} 個です。")
    if k > 1 and value == list(range(g)):
        raise Fail(said + f"ホストのすべてを渡すと、同じホストの {k} 個のプロセスが同じデバイスを使います。")
    if value == [pid] or value == list(range(pid * per, (pid + 1) * per)):
        raise Fail(said + f"プロセス番号ではなく、そのホストの中のデバイスの番号（0 から {g - 1}）を渡します。")
    raise Fail(said + f"local_rank j のプロセスは、そのホストのデバイス j·{per} から {per} 個を使います。")
