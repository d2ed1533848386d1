"""6.5 の問 8〜10: コンパイラが入れる集団通信、FSDP の勾配の reduce-scatter。"""
from __future__ import annotations

import functools

from ...checking import exercise, fmt, n_devices
from .common import Outcome, auto_mesh, eval_option, grade, jax_namespace, outcome_of, quiz_mesh

# 6.5-8 -------------------------------------------------------------------------------
# どの集団通信になるか（縮約する軸が分割されている）

_COLLECTIVE_CHOICE = {"none": "a", "all-reduce": "b", "all-gather": "c", "all-to-all": "d"}


def collective_choices(counts: dict[str, int]) -> set[str]:
    """count_collectives の結果 -> 当てはまる選択肢の集合。"""
    if not counts:
        return {"a"}
    out = {_COLLECTIVE_CHOICE[k] for k in counts if k in _COLLECTIVE_CHOICE}
    if not out:  # 選択肢にない集団通信（reduce-scatter など）: 問題の前提が崩れている
        raise RuntimeError(f"unexpected collectives {counts}")
    return out


def grade_compiled(fn, truth, rule: str, why: dict[str, str], explain: str):
    """いまのデバイスでコンパイルして確かめた正解（truth(n)）で採点する。デバイス 1 個では通信が起きないので、
    2 個以上での規則 rule で採点する（そう明記する）。"""
    n = n_devices()
    if n == 1:
        correct, note = {rule}, "（デバイスが 1 個では通信が起きず実測できないため、2 個以上での規則で採点しました）"
    else:
        correct, note = set(truth(n)), f"（いまのデバイス {n} 個でコンパイルして確かめました）"
    return grade(fn, correct, why, explain + note + "。")


@functools.cache
def matmul_truth(x_shape: tuple, x_spec: tuple, w_shape: tuple, w_spec: tuple, out_spec: tuple) -> frozenset:
    """x @ w を、x と w をその spec で置き出力を out_spec にしてコンパイルしたときの、当てはまる選択肢。"""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from ...hlo import count_collectives

    mesh = auto_mesh()
    x = jax.device_put(jnp.ones(x_shape), NamedSharding(mesh, P(*x_spec)))
    w = jax.device_put(jnp.ones(w_shape), NamedSharding(mesh, P(*w_spec)))
    f = jax.jit(lambda x, w: x @ w, out_shardings=NamedSharding(mesh, P(*out_spec)))
    return frozenset(collective_choices(count_collectives(f, x, w)))


def q8_truth(n: int) -> frozenset:
    """問 8: 縮約する軸（x の列、w の行）を分割した x8 @ w8、出力は複製。"""
    return matmul_truth((8, 4 * n), (None, "data"), (4 * n, 16), ("data", None), ())


@exercise("6.5-8", "q8")
def check_q8(fn):
    why = {
        "a": "縮約する軸（x8 の列、w8 の行）が分割されているので、各デバイスの積は部分和で、足し合わせる通信が要ります。",
        "b": "縮約する軸がどう分割されているかを見直してください。",
        "c": "各デバイスは既に同じ形 (8, 16) の部分和を持っているので、集める（all-gather）のではなく足し合わせる必要があります。",
        "d": "all-to-all は分割する軸を入れ替える（転置のような）通信で、部分和を足し合わせることはしません。",
    }
    return grade_compiled(fn, q8_truth, "b", why,
                          "縮約する軸が分割されていると各デバイスの積は部分和になり、all-reduce で合計されます")


# 6.5-9 -------------------------------------------------------------------------------
# どの集団通信になるか（w の列が足りない）

def q9_truth(n: int) -> frozenset:
    """問 9: x9 を行で、w9 を列で分割した x9 @ w9、出力は行で分割。"""
    return matmul_truth((8 * n, 16), ("data", None), (16, 4 * n), (None, "data"), ("data", None))


@exercise("6.5-9", "q9")
def check_q9(fn):
    why = {
        "a": "w9 は列で分割されていて各デバイスには一部の列しかないので、P('data', None) の出力を作るには足りない列を集める通信が要ります。",
        "b": "縮約する軸（x9 の列、w9 の行）は分割されていないので、部分和は生じず、all-reduce も要りません。",
        "c": "各デバイスが持っているもの、足りないものを書き出してみてください。",
        "d": "all-to-all は分割する軸を入れ替える通信で、ここで必要なのは足りない w9 の列を全デバイスに配ることです。",
    }
    return grade_compiled(fn, q9_truth, "c", why,
                          "各デバイスは x9 の行のシャードを持ち、列で分割された w9 を all-gather で集めてから掛けます")


# 6.5-10 ------------------------------------------------------------------------------
# FSDP の勾配: 足し合わせながら自分のシャードだけを受け取る（reduce-scatter）

Q10_OPTIONS = {
    "a": 'lax.pmean(g, "data")',
    "b": 'lax.psum_scatter(g, "data", scatter_dimension=0, tiled=True) / n_devices',
    "c": 'lax.all_gather(g, "data", axis=0, tiled=True)',
    "d": 'lax.psum_scatter(g, "data", scatter_dimension=1, tiled=True) / n_devices',
}


@functools.cache
def q10_outcomes(n: int) -> dict[str, Outcome]:
    import jax
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = quiz_mesh()
    rows = 4 * n                                           # W 全体の行数（1 デバイスのシャードは 4 行）
    rng = np.random.default_rng(65_010)
    per_device = rng.normal(size=(n, rows, 3)).astype(np.float32)   # デバイス i が求めた、W 全体の形の勾配
    want = per_device.mean(axis=0)                          # 全デバイスの平均（W 全体の形）
    stacked = jax.device_put(per_device.reshape(n * rows, 3), NamedSharding(mesh, P("data")))
    ns = jax_namespace()

    def build(source):
        body = eval_option("lambda g: " + source, ns)
        return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("data"), out_specs=P("data", None)))

    def judge(out):
        shape = tuple(out.shape)
        if shape != want.shape:
            return Outcome(False, f"全体の形が W の {fmt(want.shape)} ではなく {fmt(shape)} になります")
        if not np.allclose(np.asarray(out), want, rtol=1e-4, atol=1e-5):
            return Outcome(False, "形は W と同じですが、全デバイスの平均になりません")
        return Outcome(True, "各デバイスがそのシャードの平均の勾配を受け取ります")

    return {k: outcome_of(lambda s=s: build(s)(stacked), judge) for k, s in Q10_OPTIONS.items()}


@exercise("6.5-10", "q10")
def check_q10(fn):
    out = q10_outcomes(n_devices())
    why = {
        "b": "どの軸を分割しているか、足し合わせるかどうかを見直してください。",
        "a": "pmean は all-reduce なので、どのデバイスも平均の全体 (4 * n_devices, 3) を受け取り、勾配を分割する意味がなくなります。",
        "c": "all_gather は各デバイスの勾配を並べて集めるだけで足し合わせないので、平均になりません。",
        "d": "scatter_dimension=1 は W の列（長さ 3）で分割するので、行（0 軸目）で分割した W のシャードと合いません。",
    }
    return grade(fn, {k for k, o in out.items() if o.ok}, why,
                  "psum_scatter（reduce-scatter）は、全デバイスの勾配を足しながら各デバイスにそのシャードの分だけを配ります。"
                  "デバイスの数で割れば平均です（6.4 の 5.2 節）。", out)
