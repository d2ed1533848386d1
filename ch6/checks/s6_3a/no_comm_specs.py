"""6.3a-3 no_comm_specs のチェック。"""
from __future__ import annotations

from ...checking import Fail, call, exercise, expect_close, f32, n_devices
from ...show import collectives_line
from .common import as_pair, as_spec, comm_counts, exercise_rng, learner_step, mesh_1d_auto, norm_spec, show_spec


def needs_comm_by_rule(sx: tuple, sw: tuple, so: tuple) -> str:
    """1 次元メッシュ上の y = x @ w.T（x は (B, D)、w は (H, D)）が通信なしで済むかを、spec の規則だけで判定する。

    通信なしで済む条件: 縮約軸（x の 1 軸、w の 1 軸）がどちらも分かれておらず、x の 0 軸と w の 0 軸を
    同じメッシュ軸で分けず、出力の spec が (x の 0 軸の spec, w の 0 軸の spec) に一致すること。
    問題があれば理由の短い文を、なければ空文字を返す。
    """
    x = tuple(sx) + (None,) * (2 - len(sx))
    w = tuple(sw) + (None,) * (2 - len(sw))
    o = tuple(so) + (None,) * (2 - len(so))
    if x[1] is not None or w[1] is not None:
        return "縮約する軸（長さ D）が分割されているので、部分和の all-reduce か集め直しが要ります"
    if x[0] is not None and x[0] == w[0]:
        return "出力の行と列（x と w の 0 軸）を同じメッシュ軸で分割しているので、片方を集め直す all-gather が要ります"
    if o != (x[0], w[0]):
        return f"各デバイスで作る出力は P({x[0]!r}, {w[0]!r}) なので、{show_spec(so, 2)} にするには集め直しが要ります"
    return ""


def wrong_order(sx: tuple, sw: tuple, so: tuple) -> str:
    """返した 3 つの spec のままでは条件を満たさないが、2 つを入れ替えると満たすとき、どの位置に何を置くかの短い文。"""
    import itertools

    names = ("x_spec", "w_spec", "out_spec")
    got = (sx, sw, so)

    def ok(x, w, o):
        return "data" in w and not needs_comm_by_rule(x, w, o)

    if ok(*got):
        return ""
    for i, j in itertools.combinations(range(3), 2):
        order = [0, 1, 2]
        order[i], order[j] = j, i
        cand = tuple(got[i] for i in order)
        if ok(*cand):
            return "、".join(f"{names[i]} を {show_spec(cand[i], 2)}"
                            for i in range(3) if order[i] != i)
    return ""


@exercise("6.3a-3", "no_comm_specs")
def check_no_comm(fn):
    import jax
    from jax.sharding import NamedSharding

    names = ("x_spec", "w_spec", "out_spec")
    got = as_pair(call(fn), names)
    specs = [as_spec(s, what, 2, ("data",)) for s, what in zip(got, names)]
    sx, sw, so = (norm_spec(s) for s in specs)
    swapped = wrong_order(sx, sw, so)
    if swapped:
        raise Fail(f"spec の順番が違い、{swapped} にすると条件を満たします。(x_spec, w_spec, out_spec) の順に返してください。")
    if "data" not in sw:
        raise Fail(f"w_spec = {show_spec(sw, 2)} では大きな w が全デバイスに複製されます。w のどれかの軸を 'data' で分割してください。")
    n = n_devices()
    mesh = mesh_1d_auto()
    rng = exercise_rng(3)
    x = f32(rng.normal(size=(4 * n, 3 * n)))
    w = f32(rng.normal(size=(2 * n, 3 * n)))
    shard = [NamedSharding(mesh, s) for s in specs]

    def place_and_compile():
        xs, ws = jax.device_put(x, shard[0]), jax.device_put(w, shard[1])
        f = jax.jit(lambda a, b: a @ b.T, out_shardings=shard[2])
        return f(xs, ws), comm_counts(f, xs, ws)

    out, counts = learner_step("その spec で x @ w.T をコンパイルしたところ", place_and_compile)
    expect_close(out, x @ w.T, "x @ w.T の結果", rtol=1e-4, atol=1e-4)
    why = needs_comm_by_rule(sx, sw, so)
    if n == 1:
        if why:
            raise Fail(f"1 デバイスなので通信は現れませんが、デバイス 2 個以上では{why}。")
        return "spec の規則では通信なしです（HLO で確かめるにはデバイスが 2 個以上要ります）。"
    if counts:
        raise Fail(f"コンパイル済み HLO に通信が入りました（{collectives_line(counts)}）。"
                   f"{why or '縮約軸と出力の spec を見直してください'}。")
    return f"x {show_spec(sx, 2)}、w {show_spec(sw, 2)}、出力 {show_spec(so, 2)} で、HLO は{collectives_line(counts)}です。"
