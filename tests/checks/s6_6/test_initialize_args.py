"""6.6-2 initialize_kwargs: 参照と別の書き方（タプル、整数 1 個、ホストに 1 プロセスなら None）は通り、
コーディネータ（各自のホスト、ポートなし、ループバックアドレス）、プロセスの総数（ホスト数、デバイス数、1 ホストの数）、
プロセス番号（local_rank だけ、ホストだけ、ホストをまたいで先に数える、デバイス数を掛ける、1 から）、
ローカルデバイス（1 個だけ、ホストのすべて、プロセス番号から、None）、引数の名前と戻り値の型の誤りは、それぞれの言葉で落ちる。
デバイスを使わないので、デバイスの数によらず同じ結果になる。"""
from ch6 import Status
from ch6.checks.s6_6.common import exercise_rng
from ch6.checks.s6_6.initialize_args import clusters, reference
from tests.checkhelp import boom, not_done

from .common import say

EX = "6.6-2"


def changed(**fields):
    """参照の dict のうち fields の値だけを、関数 f(cluster, host, h, j, 参照) で置き換えた答え。"""
    def initialize_kwargs(cluster, host, local_rank):
        out = reference(cluster, host, local_rank)
        h = cluster["hosts"].index(host)
        for key, f in fields.items():
            out[key] = f(cluster, host, h, local_rank, out)
        return out
    return initialize_kwargs


def test_hidden_clusters_cover_the_three_layouts():
    cs = clusters(exercise_rng(2))
    layouts = {(c["devices_per_host"] // c["processes_per_host"] == 1, c["processes_per_host"] == 1) for c in cs}
    assert layouts == {(True, False), (False, False), (False, True)}   # GPU 1 枚、GPU 複数、ホストに 1 プロセス
    assert any(len(c["hosts"]) % 2 for c in cs) and any(c["hosts"] != sorted(c["hosts"]) for c in cs)


def test_reference_and_other_forms_pass():
    say(EX, reference, Status.PASS, "35 個のプロセス")
    say(EX, changed(local_device_ids=lambda c, host, h, j, out: tuple(out["local_device_ids"])), Status.PASS)
    say(EX, changed(local_device_ids=lambda c, host, h, j, out: (
        None if c["processes_per_host"] == 1 else out["local_device_ids"])), Status.PASS)
    say(EX, changed(local_device_ids=lambda c, host, h, j, out: (
        out["local_device_ids"][0] if len(out["local_device_ids"]) == 1 else out["local_device_ids"])), Status.PASS)


def test_coordinator_mistakes_are_named():
    say(EX, changed(coordinator_address=lambda c, host, h, j, out: f"{host}:{c['port']}"), Status.FAIL,
        "全プロセスが同じアドレス", "最初のホスト")
    say(EX, changed(coordinator_address=lambda c, host, h, j, out: c["hosts"][0]), Status.FAIL, "ポートが抜けて")
    say(EX, changed(coordinator_address=lambda c, host, h, j, out: f"127.0.0.1:{c['port']}"), Status.FAIL,
        "ループバックアドレス")
    say(EX, changed(coordinator_address=lambda c, host, h, j, out: (c["hosts"][0], c["port"])), Status.FAIL,
        "'ホスト:ポート' の形の文字列")
    say(EX, changed(coordinator_address=lambda c, host, h, j, out: f"{sorted(c['hosts'])[0]}:{c['port']}"),
        Status.FAIL, "名前の順に並べ替えず")


def test_num_processes_mistakes_are_named():
    say(EX, changed(num_processes=lambda c, host, h, j, out: len(c["hosts"])), Status.FAIL, "ホストの数ではなく")
    say(EX, changed(num_processes=lambda c, host, h, j, out: len(c["hosts"]) * c["devices_per_host"]), Status.FAIL,
        "デバイスの数ではなく")
    say(EX, changed(num_processes=lambda c, host, h, j, out: c["processes_per_host"]), Status.FAIL,
        "1 ホストのプロセスの数")


def test_process_id_mistakes_are_named():
    say(EX, changed(process_id=lambda c, host, h, j, out: j), Status.FAIL, "local_rank だけ", "重なります")
    say(EX, changed(process_id=lambda c, host, h, j, out: h), Status.FAIL, "ホストの位置だけ")
    say(EX, changed(process_id=lambda c, host, h, j, out: j * len(c["hosts"]) + h), Status.FAIL, "ホストをまたがず")
    say(EX, changed(process_id=lambda c, host, h, j, out: h * c["devices_per_host"] + j), Status.FAIL,
        "デバイスの数", "プロセスの数")
    say(EX, changed(process_id=lambda c, host, h, j, out: out["process_id"] + 1), Status.FAIL, "0 から数えます")


def test_local_device_mistakes_are_named():
    say(EX, changed(local_device_ids=lambda c, host, h, j, out: [j]), Status.FAIL, "1 プロセスが使うデバイスは")
    say(EX, changed(local_device_ids=lambda c, host, h, j, out: list(range(c["devices_per_host"]))), Status.FAIL,
        "ホストのすべてを渡すと")
    say(EX, changed(local_device_ids=lambda c, host, h, j, out: [out["process_id"]]), Status.FAIL,
        "ホストの中のデバイスの番号")
    say(EX, changed(local_device_ids=lambda c, host, h, j, out: None), Status.FAIL, "None")
    say(EX, changed(local_device_ids=lambda c, host, h, j, out: [v + 1 for v in out["local_device_ids"]]),
        Status.FAIL, "local_rank j のプロセスは")
    say(EX, changed(local_device_ids=lambda c, host, h, j, out: "0,1"), Status.FAIL, "str")


def test_names_and_forms():
    def misspelt(cluster, host, local_rank):
        out = reference(cluster, host, local_rank)
        out["coordinator"] = out.pop("coordinator_address")
        return out
    say(EX, misspelt, Status.FAIL, "'coordinator' という引数はありません")

    def missing(cluster, host, local_rank):
        out = reference(cluster, host, local_rank)
        del out["num_processes"]
        return out
    say(EX, missing, Status.FAIL, "num_processes がありません")
    say(EX, lambda *a: tuple(reference(*a).values()), Status.FAIL, "dict", "tuple")
    say(EX, changed(num_processes=lambda c, host, h, j, out: float(out["num_processes"])), Status.FAIL, "浮動小数")


def test_not_done_and_learner_error():
    say(EX, not_done, Status.NOT_DONE)
    say(EX, boom, Status.ERROR, "ZeroDivisionError")
    say(EX, lambda cluster, host, local_rank: cluster["nodes"], Status.ERROR, "KeyError")
