"""6.6-4 rows_to_load: シャーディングとデバイスの持ち主から、あるプロセスが読み込む行（重複なし、昇順）。

約束（問題文）: ``owner[d.id]`` がデバイス d を持つプロセスの番号（このカーネルは 1 プロセスなので
``d.process_index`` はどのデバイスも 0 で、使えない）。プロセス p が読み込むのは、p のデバイスが持つシャードの行の和集合。
隠しの場合: デバイスの並びを入れ替えた 2 次元のメッシュ、6 通りの spec（1 本の軸、2 本の軸、複製、列だけの分割）、
持ち主の決め方（メッシュの順に連続、デバイス番号の剰余、2 本目の軸の位置、デバイスが 3 個以上ならメッシュの順に
1 つおき・最初の 1 個と残り）。1 つおきと最初の 1 個と残りは、デバイスの数が素数でも、1 つのプロセスが飛び飛びの
行や、ほかのプロセスと違う数のデバイスを持つ場合を作る（3 個では、ほかの決め方はどれも 1 個ずつかすべて）。
デバイスが 2 個以下ではプロセスの行がいつも 1 つの連続した範囲なので、「最小から最大までの行」の誤りは
見分けられず、1 個ではプロセスが 1 つで持ち主の誤りも見分けられない。メッシュの片方の軸が 1 のとき（奇数個と 2 個）は
``devices_indices_map`` の順がいつも行の順なので、「シャードを並べたまま昇順にしない」誤りも見分けられない
（どれも正解の 1 行がそう言う）。
"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, LearnerError, call, exercise
from ...recorded import input_devices, is_recording, recorded
from ..specs import norm_spec, show_spec
from .common import as_int, exercise_rng, shuffled_mesh


@recorded
def reference(sharding, global_shape, owner, process):
    rows: set[int] = set()
    for device, index in sharding.devices_indices_map(tuple(global_shape)).items():
        if owner[device.id] == process:
            rows.update(range(*index[0].indices(global_shape[0])[:2]))
    return sorted(rows)


def _divisors(n: int) -> list[int]:
    """プロセスの数の候補: 1（すべてのデバイスが 1 つのプロセス）、1 より大きい最小の約数、n。"""
    ds = [d for d in range(2, n + 1) if n % d == 0]
    return sorted({1, ds[0], ds[-1]}) if ds else [1]


def owners(mesh) -> list[tuple[str, dict[int, int]]]:
    """(説明, {デバイス番号: プロセス番号})。"""
    flat = list(mesh.devices.flat)
    n = len(flat)
    out = []
    for count in _divisors(n):
        per = n // count
        out.append((f"メッシュの順に {per} 個ずつ {count} プロセス", {d.id: i // per for i, d in enumerate(flat)}))
    count = _divisors(n)[min(1, len(_divisors(n)) - 1)]
    out.append((f"デバイス番号を {count} で割った余りで {count} プロセス", {d.id: d.id % count for d in flat}))
    cols = mesh.devices.shape[1]
    out.append((f"2 本目の軸の位置で {cols} プロセス",
                {d.id: j for row in mesh.devices for j, d in enumerate(row)}))
    if n >= 3:
        out.append(("メッシュの順に 1 つおきに 2 プロセス", {d.id: i % 2 for i, d in enumerate(flat)}))
        out.append((f"メッシュの順に最初の 1 個と残り {n - 1} 個で 2 プロセス", {d.id: min(i, 1) for i, d in enumerate(flat)}))
    return out


def cases(rng: np.random.Generator):
    """(sharding, global_shape, 持ち主の説明, owner, プロセスの数)。"""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    a, b = [("x", "y"), ("data", "fsdp"), ("hosts", "chips")][int(rng.integers(3))]
    mesh = shuffled_mesh(rng, (a, b), input_devices())
    n = mesh.devices.size
    k = int(rng.integers(2, 4))
    shape = (n * k, n * (k + 1))   # 列の数は行の数と違う（行と列を取り違えると形に出る）
    specs = [P(a), P(b), P((a, b)), P((b, a)), P(), P(None, a)]
    out = []
    for spec in specs:
        for label, owner in owners(mesh):
            out.append((NamedSharding(mesh, spec), shape, label, owner, len(set(owner.values()))))
    return out


def ranges_text(rows) -> str:
    """[0, 1, 2, 5, 6] -> "0:3, 5:7"（行の番号を半開区間の並びで短く）。空なら「なし」。"""
    rows = sorted(rows)
    if not rows:
        return "なし"
    parts, start, prev = [], rows[0], rows[0]
    for r in rows[1:] + [None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        parts.append(f"{start}:{prev + 1}")
        if r is not None:
            start = prev = r
    return ", ".join(parts[:4]) + ("、…" if len(parts) > 4 else "")


def _as_rows(got, where: str) -> list[int]:
    if isinstance(got, (set, frozenset)):
        got = sorted(got)
    if isinstance(got, np.ndarray):
        if got.ndim != 1:
            raise Fail(f"{where}: 戻り値は行の番号を並べた 1 次元の列のはずが、形 {got.shape} の配列でした。")
        got = got.tolist()
    if not isinstance(got, (list, tuple, range)):
        raise Fail(f"{where}: 戻り値は行の番号のリストのはずが、{type(got).__name__} でした。")
    return [as_int(v, f"{where}: 行の番号") for v in got]


def _answers(fn, sharding, shape, owner, n_proc) -> list[list[int] | None]:
    """その場合のすべてのプロセスの答え（誤りの形を見分けるため。例外や読めない値は None）。"""
    out = []
    for q in range(n_proc):
        try:
            out.append(_as_rows(call(fn, sharding, shape, dict(owner), q), ""))
        except (Fail, LearnerError):
            out.append(None)
    return out


def _wrong(fn, where, want, got, wants, sharding, shape, owner, process, n_proc) -> Fail:
    said = f"{where}: 読み込む行は {ranges_text(want)} のはずが、{ranges_text(got)} でした。"
    everything = list(range(shape[0]))
    answers = _answers(fn, sharding, shape, owner, n_proc) if n_proc > 1 else [got]
    if n_proc > 1 and answers == [everything] + [[]] * (n_proc - 1):
        return Fail(said + "このカーネルでは d.process_index がどのデバイスも 0 なので、どのプロセスのデバイスかは owner[d.id] で調べます。")
    hulls = [_hull(rows) for rows in wants]
    if got == hulls[process] and answers == hulls:
        return Fail(said + "最小から最大までの範囲にはほかのプロセスの行も入るので、各シャードの行だけを合わせます。")
    if got == everything:
        return Fail(said + "すべてのデバイスの行ではなく、owner[d.id] == process のデバイスの行だけを集めます。")
    per = shape[0] // n_proc
    if got == list(range(process * per, (process + 1) * per)):
        return Fail(said + "どの行かはシャーディングと、各デバイスがどのプロセスのものかで決まり、プロセスの行が連続するとは限りません。")
    if got in _one_shard(sharding, shape, owner, process):
        return Fail(said + "1 つのデバイスのシャードの行だけなので、そのプロセスのすべてのデバイスのシャードの行を合わせます。")
    return Fail(said + "そのプロセスのデバイスが持つシャードの行（index[0]）を、すべて合わせます。")


def _hull(rows: list[int]) -> list[int]:
    """行の最小から最大までの範囲（空なら空）。"""
    return list(range(rows[0], rows[-1] + 1)) if rows else []


@recorded
def _one_shard(sharding, shape, owner, process) -> list[list[int]]:
    """そのプロセスのデバイスのそれぞれについて、そのデバイス 1 つのシャードの行。"""
    return [list(range(*index[0].indices(shape[0])[:2]))
            for device, index in sharding.devices_indices_map(tuple(shape)).items() if owner[device.id] == process]


@exercise("6.6-4", "rows_to_load")
def check_rows_to_load(fn):
    hidden = cases(exercise_rng(4))
    # 参照の値は学習者を呼ぶ前に（学習者版では、作るときに記録した値を引く）
    expected = [[reference(sharding, shape, owner, q) for q in range(n_proc)] for sharding, shape, _, owner, n_proc in hidden]
    if is_recording():  # 学習者版を作るときだけ: 誤りを見分けるときに使う値も
        for sharding, shape, _, owner, n_proc in hidden:
            for q in range(n_proc):
                _one_shard(sharding, shape, owner, q)
    for (sharding, shape, label, owner, n_proc), wants in zip(hidden, expected):
        for process in range(n_proc):
            where = f"{show_spec(norm_spec(sharding.spec))}、{label}のプロセス {process}"
            try:
                out = call(fn, sharding, shape, dict(owner), process)
            except LearnerError as err:
                exc = err.exc
                if isinstance(exc, TypeError) and "NoneType" in str(exc):
                    raise Fail(f"{where}: 分割しない次元の index は slice(None, None) で、start も stop も None です。"
                               "index[0].indices(行数) で数の範囲にします。") from None
                if isinstance(exc, KeyError) and exc.args and not isinstance(exc.args[0], (int, np.integer)):
                    raise Fail(f"{where}: owner のキーはデバイスの番号（d.id）ですが、{type(exc.args[0]).__name__} で"
                               "引いています。owner[d.id] と書きます。") from None
                raise
            got = _as_rows(out, where)
            want = wants[process]
            if got == want:
                continue
            if sorted(set(got)) == want:
                if len(set(got)) < len(got):
                    raise Fail(f"{where}: 同じ行が 2 度以上入っています。複製された行は、そのプロセスが 1 度読めば足ります。")
                raise Fail(f"{where}: 行はそろっていますが、昇順ではありません。sorted(...) で並べます。")
            raise _wrong(fn, where, want, got, wants, sharding, shape, owner, process, n_proc)
    n_spec, n_owner = len({s.spec for s, *_ in hidden}), len({label for _, _, label, _, _ in hidden})
    n, flat = hidden[0][0].mesh.devices.size, min(hidden[0][0].mesh.devices.shape) == 1
    note = ("（デバイスが 1 個なので、1 つのプロセスがすべての行を読み込む場合しか作れず、デバイスのプロセスを取り違える誤りと昇順に並べない誤りはこの環境では"
            "確かめられません）" if n == 1 else
            "（デバイスが 2 個なので、プロセスの行はいつも連続して昇順に並び、最小から最大までの行を取る誤りと"
            "昇順に並べない誤りはこの環境では確かめられません）" if n == 2 else
            f"（デバイスが {n} 個ではメッシュの片方の軸が 1 なので、シャードの行はいつもデバイスの順に昇順で並び、"
            "昇順に並べない誤りはこの環境では確かめられません）" if flat else "")
    return f"spec {n_spec} 通りと、各デバイスのプロセスの決め方 {n_owner} 通りで、どのプロセスの行も一致しました{note}。"
