"""6.3a-5 shard_gated_mlp のチェック（forward の gated_mlp は ch6/models.py にあり、ノートブックもそこから import する）。"""
from __future__ import annotations

import numpy as np

from ... import meshes, models
from ...checking import Fail, call, exercise, expect_close, f32
from ...show import collectives_line
from .common import comm_counts, exercise_rng, learner_step, norm_spec, placed_spec, show_spec

# 定義は答えを含まない ch6/models.py に 1 つだけ（学習者版ではチェックを読み込めないので: ch6/edition.py）。
# この名前は、前の版の演習ノートブックの ``from ch6.checks.s6_3a import gated_mlp`` のために残します（完全版で動きます）
gated_mlp = models.gated_mlp


def _gated_mlp_np(p, x):
    g = x @ p["W_gate"].T + p["b_gate"]
    g = g / (1.0 + np.exp(-g))
    return (g * (x @ p["W_up"].T + p["b_up"])) @ p["W_down"].T + p["b_down"]


# 隠れ層の軸（H）がどこにあるか: その次元を 'model' で分けるのが正解。b_down には H の軸がない（複製）。
# 重みは PyTorch の形 (出力, 入力) なので、本文の (入力, 出力) の形の MLP とは行と列が逆になる
HIDDEN_AXIS = {"W_gate": 0, "b_gate": 0, "W_up": 0, "b_up": 0, "W_down": 1, "b_down": None}


def want_spec(key: str, ndim: int) -> tuple:
    axis = HIDDEN_AXIS[key]
    if axis is None:
        return ()
    return norm_spec(tuple("model" if i == axis else None for i in range(ndim)))


def _transposed(key: str) -> tuple:
    """本文の (入力, 出力) の形なら正しかった spec（行と列を入れ替えた位置の 'model'）。"""
    axis = HIDDEN_AXIS[key]
    return norm_spec(tuple("model" if i == 1 - axis else None for i in range(2)))


@exercise("6.3a-5", "shard_gated_mlp")
def check_shard_gated_mlp(fn):
    import jax
    from jax.sharding import PartitionSpec as P

    d, m = meshes.mesh_2d_shape()
    mesh = meshes.mesh_2d(("data", "model"))
    rng = exercise_rng(5)
    D, H, OUT = 3 * d * m, 4 * m, 2 * m  # OUT は model の長さで割り切れる（b_down を分ける誤りも、エラーでなく見える）
    params = {"W_gate": rng.normal(size=(H, D)) * 0.5, "b_gate": rng.normal(size=(H,)) * 0.3,
              "W_up": rng.normal(size=(H, D)) * 0.5, "b_up": rng.normal(size=(H,)) * 0.3,
              "W_down": rng.normal(size=(OUT, H)) * 0.5, "b_down": rng.normal(size=(OUT,)) * 0.3}
    params = {k: f32(v) for k, v in params.items()}
    x = f32(rng.normal(size=(4 * d, D)))
    got = call(fn, {k: v.copy() for k, v in params.items()}, mesh)
    if not isinstance(got, dict) or set(got) != set(params):
        keys = sorted(map(str, got)) if isinstance(got, dict) else type(got).__name__
        raise Fail(f"戻り値は {sorted(params)} をキーに持つ辞書のはずが、{keys} でした。")
    hint = "jax.device_put(p, NamedSharding(mesh, spec)) で、渡された mesh に配置します。"
    specs = {k: placed_spec(got[k], k, mesh, hint) for k in params}
    for k in params:
        expect_close(got[k], params[k], f"{k} ", hint="device_put は値を変えません。")
    for k, v in specs.items():
        if any("data" in (e if isinstance(e, tuple) else (e,)) for e in v):
            raise Fail(f"{k} が 'data' 軸で分割されています（{show_spec(v, params[k].ndim)}）。パラメータは 'model' 軸だけで分割し、'data' 軸では複製します。")
    for k in params:
        want, nd = want_spec(k, params[k].ndim), params[k].ndim
        if specs[k] == want:
            continue
        if HIDDEN_AXIS[k] is None:
            raise Fail(f"{k} は複製（P()）のはずが、{show_spec(specs[k], nd)} でした。b_down は出力に足すので、出力の特徴の軸は分割しません。")
        if specs[k] == ():
            raise Fail(f"{k} が複製（P()）のままで、メモリが減りません。隠れ層の軸 H を 'model' で分割した {show_spec(want, nd)} にします。")
        if nd == 2 and specs[k] == _transposed(k):
            raise Fail(f"{k} の spec が {show_spec(specs[k], nd)} で、(入力, 出力) の形の重みの分割になっています。"
                       f"この演習の重みは PyTorch の形 (出力, 入力) なので {show_spec(want, nd)} です。")
        raise Fail(f"{k} の spec は {show_spec(want, nd)} のはずが、{show_spec(specs[k], nd)} でした。分割するのは隠れ層の軸 H です。")
    for k in params:  # 性質そのもの: H を持つ葉は、1 デバイスあたり 1/m のメモリ
        if HIDDEN_AXIS[k] is not None:
            per_dev = got[k].addressable_shards[0].data.nbytes
            if per_dev * m != params[k].nbytes:
                raise Fail(f"{k} の 1 デバイスあたりのバイト数が {per_dev} で、全体 {params[k].nbytes} の 1/{m} になっていません。")

    def forward():
        with jax.set_mesh(mesh):
            xs = jax.device_put(x, P("data", None))
            f = jax.jit(gated_mlp)
            out = f(got, xs)
            return out, jax.typeof(out), comm_counts(f, got, xs)

    out, typ, counts = learner_step("そのパラメータで gated_mlp を実行したところ", forward)
    expect_close(out, _gated_mlp_np(params, x), "gated_mlp の結果", rtol=1e-4, atol=1e-4)
    if norm_spec(typ.sharding.spec) != ("data",):
        raise Fail(f"gated_mlp の出力の型が P('data', None) になりません（{typ}）。")
    if m == 1:
        return "隠れ層の軸を 'model' で分割しました（model 軸の大きさが 1 なので、通信もメモリの削減も現れません）。"
    if counts != {"all-reduce": 1}:
        raise Fail(f"gated_mlp の通信は all-reduce ×1 だけのはずが、{collectives_line(counts)} でした。")
    return f"隠れ層の軸を持つパラメータは 1 デバイスあたり 1/{m} のメモリ、順伝播の通信は all-reduce ×1 だけです。"
