"""6.3a（jit + sharding）のチェックの単体テスト: 正解は通り、典型的な誤りは理由つきで落ちる。

conftest が JAX_NUM_CPU_DEVICES を決めてから jax を読み込みます（既定 8、--devices 1〜8 のどれでも動く）。
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from ch6 import run_check
from ch6.meshes import mesh_2d_shape
from ch6.checks import s6_3a

N = jax.device_count()
multi = pytest.mark.skipif(N == 1, reason="通信は 2 デバイス以上でしか現れない")
# 2 次元メッシュの model 軸は、奇数台では長さ 1（ch6.meshes.mesh_2d_shape）なので、その軸の通信は現れない
model_axis = pytest.mark.skipif(mesh_2d_shape(N)[1] == 1, reason="model 軸が 1（奇数台）では通信が現れない")


def _pass(eid, fn):
    r = run_check(eid, fn)
    assert r.status == "pass", r.message
    return r


def _fail(eid, fn, *words, status="fail"):
    r = run_check(eid, fn)
    assert r.status == status, r.message
    for w in words:
        assert w in r.message, r.message
    return r


def _todo(*args):
    raise NotImplementedError


# ---------------------------------------------------------------- 6.3a-1 place_batch

def place_ref(x, W, mesh):
    return (jax.device_put(x, NamedSharding(mesh, P("data", None))),
            jax.device_put(W, NamedSharding(mesh, P())))


def place_other(x, W, mesh):
    # set_mesh の中で PartitionSpec だけを渡す書き方も正解
    with jax.set_mesh(mesh):
        return jax.device_put(x, P("data")), jax.device_put(W, P(None, None))


def test_place_batch_right():
    r = _pass("6.3a-1", place_ref)
    assert f"{N} 台" in r.message
    _pass("6.3a-1", place_other)


def test_place_batch_replicated_where_sharded_was_asked():
    def fn(x, W, mesh):
        return jax.device_put(x, NamedSharding(mesh, P())), jax.device_put(W, NamedSharding(mesh, P()))

    _fail("6.3a-1", fn, "複製", "P('data', None)")


def test_place_batch_wrong_axis():
    def fn(x, W, mesh):
        return jax.device_put(x, NamedSharding(mesh, P(None, "data"))), jax.device_put(W, NamedSharding(mesh, P()))

    _fail("6.3a-1", fn, "spec が違います", "P(None, 'data')")


def test_place_batch_weights_sharded():
    def fn(x, W, mesh):
        return jax.device_put(x, NamedSharding(mesh, P("data"))), jax.device_put(W, NamedSharding(mesh, P("data")))

    _fail("6.3a-1", fn, "W は全デバイスに複製")


def test_place_batch_not_placed_and_swapped_and_errors():
    _fail("6.3a-1", lambda x, W, mesh: (x, W), "デバイス上の配列ではありません")
    _fail("6.3a-1", lambda x, W, mesh: place_ref(x, W, mesh)[::-1], "順番が逆")
    _fail("6.3a-1", lambda x, W, mesh: (np.zeros_like(x), W), "x の値が違います")
    _fail("6.3a-1", lambda x, W, mesh: x["bad"], "IndexError", status="error")
    _fail("6.3a-1", _todo, "まだ解答されていません", status="not_done")


# ---------------------------------------------------------------- 6.3a-2 predict_collectives

ANSWER = {"A": "none", "B": "all-reduce", "C": "all-gather", "D": "all-gather", "E": "none"}


def test_predict_right():
    _pass("6.3a-2", lambda: dict(ANSWER))
    # 表記ゆれ（大文字、下線、None）も受け付ける
    _pass("6.3a-2", lambda: {"A": None, "B": "ALL_REDUCE", "C": "all gather", "D": "allgather", "E": "なし"})


def test_predict_wrong_case_names_the_case_without_revealing():
    r = _fail("6.3a-2", lambda: {**ANSWER, "C": "none"}, "4 つ正解", "ケース C", "ヒント")
    assert "all-gather" not in r.message.split("ヒント")[0]
    _fail("6.3a-2", lambda: {**ANSWER, "B": "all-gather", "D": "all-reduce"}, "3 つ正解", "ケース B")


def test_predict_bad_shapes_of_answer():
    _fail("6.3a-2", lambda: {"A": "none"}, "ケース B, C, D, E の予想がありません")
    _fail("6.3a-2", lambda: {**ANSWER, "E": "broadcast"}, "通信の名前ではありません")
    _fail("6.3a-2", lambda: list(ANSWER.values()), "辞書を返してください")
    _fail("6.3a-2", lambda: 1 / 0, "ZeroDivisionError", status="error")
    _fail("6.3a-2", _todo, status="not_done")


@multi
@pytest.mark.parametrize("case", sorted(s6_3a.PREDICT_CASES))
def test_predict_answer_key_matches_the_compiler(case):
    """答えの表は、このデバイス数で実際にコンパイルした HLO と一致する。"""
    out, counts = s6_3a.compiled_case(case)
    a, b = s6_3a.case_arrays(N)
    np.testing.assert_allclose(np.asarray(out), a @ b, rtol=1e-4, atol=1e-4)
    want = ANSWER[case]
    assert set(counts) == (set() if want == "none" else {want}), counts


# ---------------------------------------------------------------- 6.3a-3 no_comm_specs

def test_no_comm_right():
    _pass("6.3a-3", lambda: (P(), P(None, "data"), P(None, "data")))
    _pass("6.3a-3", lambda: ((None, None), (None, "data"), (None, "data")))  # タプルでもよい


def test_no_comm_replicated_weight_is_refused():
    _fail("6.3a-3", lambda: (P("data", None), P(), P("data", None)), "複製", "'data' で分けて")
    _fail("6.3a-3", lambda: (P(), P(), P()), "複製")


@multi
def test_no_comm_detects_each_collective():
    _fail("6.3a-3", lambda: (P("data", None), P(None, "data"), P("data", None)), "通信が入りました", "all-gather")
    _fail("6.3a-3", lambda: (P(None, "data"), P("data", None), P()), "通信が入りました", "all-reduce")
    # 計算は正しいが、出力を複製にしたので余分な all-gather
    _fail("6.3a-3", lambda: (P(), P(None, "data"), P()), "all-gather")


@pytest.mark.skipif(N != 1, reason="1 デバイスのときだけ、通信の代わりに配置の規則で判定する")
def test_no_comm_one_device_uses_the_rule():
    r = _fail("6.3a-3", lambda: (P("data", None), P(None, "data"), P("data", None)), "1 デバイスなので", "all-gather")
    assert "2 台以上" in r.message
    _pass("6.3a-3", lambda: (P(), P(None, "data"), P(None, "data")))


def test_no_comm_bad_values():
    _fail("6.3a-3", lambda: (P("model"), P(None, "data"), P(None, "data")), "使えません")
    _fail("6.3a-3", lambda: ("data", P(None, "data"), P(None, "data")), "PartitionSpec のはず")
    _fail("6.3a-3", lambda: (P(), P(None, "data")), "3 つ組")
    _fail("6.3a-3", lambda: P.nothing, "AttributeError", status="error")
    _fail("6.3a-3", _todo, status="not_done")


def test_rule_agrees_with_the_lesson():
    rule = s6_3a.needs_comm_by_rule
    assert rule((), (None, "data"), (None, "data")) == ""
    assert rule(("data",), (), ("data",)) == ""
    assert "all-reduce" in rule((None, "data"), ("data",), ())
    assert "all-gather" in rule(("data",), (None, "data"), ("data",))
    assert "並べ替え" in rule((), (None, "data"), ())


# ---------------------------------------------------------------- 6.3a-4 fixed_layer

def fixed_ref(x, w):
    return jnp.matmul(x, w, out_sharding=P("data", None))


def fixed_other(x, w):
    # einsum でも out_sharding を指定できる
    return jnp.einsum("bd,dh->bh", x, w, out_sharding=P("data", None))


def test_fixed_layer_right():
    _pass("6.3a-4", fixed_ref)
    _pass("6.3a-4", fixed_other)


def test_fixed_layer_still_ambiguous():
    _fail("6.3a-4", lambda x, w: x @ w, "ShardingTypeError", "out_sharding")


def test_fixed_layer_wrong_spec_and_replicated():
    _fail("6.3a-4", lambda x, w: jnp.matmul(x, w, out_sharding=P("data", "model")),
          "期待 P('data', None)", "P('data', 'model')")
    _fail("6.3a-4", lambda x, w: jnp.matmul(x, w, out_sharding=P()), "複製")


@model_axis
def test_fixed_layer_extra_all_gather():
    _fail("6.3a-4", lambda x, w: jax.reshard(x, P("data", None)) @ jax.reshard(w, P()),
          "結果は正しい", "all-gather")


def test_fixed_layer_hard_coded_and_errors():
    _fail("6.3a-4", lambda x, w: jnp.matmul(x, w, out_sharding=P("data", None)) * 0 + 1.0, "値が違います")
    _fail("6.3a-4", lambda x, w: x @ w.T, "TypeError", status="error")  # 形が合わない（どの台数でも）
    _fail("6.3a-4", _todo, status="not_done")


# ---------------------------------------------------------------- 6.3a-5 shard_mlp_params

SPECS = {"W1": P(None, "model"), "b1": P("model"), "W2": P("model", None), "b2": P()}


def shard_ref(params, mesh):
    return {k: jax.device_put(v, NamedSharding(mesh, SPECS[k])) for k, v in params.items()}


def shard_other(params, mesh):
    # b1 は小さいので複製しても通信は増えない
    specs = {**SPECS, "b1": P()}
    with jax.set_mesh(mesh):
        return jax.tree.map(lambda v, s: jax.device_put(v, s), params, specs)


def _shard_with(**over):
    specs = {**SPECS, **over}
    return lambda params, mesh: {k: jax.device_put(v, NamedSharding(mesh, specs[k])) for k, v in params.items()}


def test_shard_mlp_right():
    _pass("6.3a-5", shard_ref)
    _pass("6.3a-5", shard_other)


def test_shard_mlp_replicated_weights():
    _fail("6.3a-5", _shard_with(W1=P(), W2=P()), "W1 が複製", "メモリが減りません")


def test_shard_mlp_wrong_axis():
    _fail("6.3a-5", _shard_with(W1=P("model", None), W2=P(None, "model")), "W1 の spec が違います",
          "P(None, 'model')")


def test_shard_mlp_data_axis():
    _fail("6.3a-5", _shard_with(W1=P("data", "model")), "'data' 軸で分かれています")


def test_shard_mlp_not_placed_and_errors():
    _fail("6.3a-5", lambda params, mesh: params, "デバイス上の配列ではありません")
    _fail("6.3a-5", lambda params, mesh: {"W1": params["W1"]}, "辞書を返してください")
    _fail("6.3a-5", lambda params, mesh: params["W3"], "KeyError", status="error")
    _fail("6.3a-5", _todo, status="not_done")
