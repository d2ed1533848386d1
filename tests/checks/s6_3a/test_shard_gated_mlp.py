"""6.3a-5 shard_gated_mlp のチェック（ch6/checks/s6_3a/shard_gated_mlp.py）のテスト。"""
from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from ch6 import models
from ch6.checks import s6_3a
from tests.checkhelp import N, not_done
from tests.checks.s6_3a.common import ROOT, M, expect_fail, expect_pass, own_mesh


def solution_source() -> str:
    nb = json.loads((ROOT / "solutions" / "6_3a_sharding.ipynb").read_text(encoding="utf-8"))
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")


# 重みは PyTorch の形 (出力, 入力): H は W_gate・W_up の行、W_down の列
SPECS = {"W_gate": P("model", None), "b_gate": P("model"), "W_up": P("model", None), "b_up": P("model"),
         "W_down": P(None, "model"), "b_down": P()}


def shard_ref(params, mesh):
    return {k: jax.device_put(v, NamedSharding(mesh, SPECS[k])) for k, v in params.items()}


def shard_tree_map(params, mesh):
    with jax.set_mesh(mesh):
        return jax.tree.map(lambda v, s: jax.device_put(v, s), params, SPECS)


def shard_reshard(params, mesh):
    return {k: jax.reshard(v, NamedSharding(mesh, SPECS[k])) for k, v in params.items()}


def _shard_with(**over):
    specs = {**SPECS, **over}
    return lambda params, mesh: {k: jax.device_put(v, NamedSharding(mesh, specs[k])) for k, v in params.items()}


def test_gated_mlp_right_in_every_spelling():
    r = expect_pass("6.3a-5", shard_ref)
    if M > 1:
        assert "all-reduce ×1" in r.message
    expect_pass("6.3a-5", shard_tree_map)
    expect_pass("6.3a-5", shard_reshard)
    expect_pass("6.3a-5", _shard_with(b_down=P(None)))  # 末尾の None は P() と同じ


@pytest.mark.parametrize("leaf", ["b_gate", "b_up"])
def test_gated_mlp_hidden_bias_left_replicated_is_wrong(leaf):
    """issue 13 の変異体 P('model') → P() / None: 隠れ層の軸を持つバイアスを複製すると、1 デバイスあたりの
    メモリが減らない（演習文の条件）。spec そのもので判定する。"""
    expect_fail("6.3a-5", _shard_with(**{leaf: P()}), f"{leaf} が複製", "メモリ")
    expect_fail("6.3a-5", _shard_with(**{leaf: P(None)}), f"{leaf} が複製")


def test_gated_mlp_replicated_and_wrong_axes():
    expect_fail("6.3a-5", _shard_with(W_gate=P(), W_up=P(), W_down=P()), "W_gate が複製", "メモリ")
    expect_fail("6.3a-5", _shard_with(W_up=P(None, "model")), "W_up の spec", "P('model', None)")
    expect_fail("6.3a-5", _shard_with(W_down=P("model", None)), "W_down の spec")
    expect_fail("6.3a-5", _shard_with(b_down=P("model")), "b_down は複製")
    expect_fail("6.3a-5", _shard_with(W_gate=P("model", "data")), "'data' 軸で分割されています")  # D は data で割り切れる


def test_gated_mlp_on_a_mesh_of_ones_own_is_a_learner_mistake():
    """回帰（issue 13）: 渡されたのとは別のメッシュに置いたパラメータは「internal」ではなく不正解。"""
    def own(params, mesh, **kw):
        other = own_mesh(**kw)
        return {k: jax.device_put(v, NamedSharding(other, SPECS[k])) for k, v in params.items()}

    expect_fail("6.3a-5", lambda p, m: own(p, m, axis_types=AxisType.Auto), "別のメッシュ", "渡された mesh")
    if N > 1:
        expect_fail("6.3a-5", lambda p, m: own(p, m, order=-1), "別のメッシュ")
    expect_pass("6.3a-5", lambda p, m: own(p, m))  # 同じ並び・同じ軸で作り直したメッシュは、渡された mesh と等しい


def test_gated_mlp_not_placed_and_errors():
    expect_fail("6.3a-5", lambda params, mesh: params, "JAX 配列ではありません")
    expect_fail("6.3a-5", lambda params, mesh: {k: jnp.asarray(v) for k, v in params.items()}, "NamedSharding ではありません")
    expect_fail("6.3a-5", lambda params, mesh: {"W_gate": params["W_gate"]}, "辞書のはず")
    expect_fail("6.3a-5", lambda params, mesh: [params], "辞書のはず")
    expect_fail("6.3a-5", lambda params, mesh: params["W3"], "KeyError", status="error")
    expect_fail("6.3a-5", not_done, status="not_done")


def test_gated_mlp_forward_is_one_definition_in_the_package():
    """回帰: チェックはノートブックの定義の私的なコピーを持たない。forward は ch6.models.gated_mlp の 1 つだけで、
    解答ノートブックはそれを import して使う（答えを含む ch6.checks からではなく: 学習者版では読み込めないので）。
    前の版の演習ノートブックの ``from ch6.checks.s6_3a import gated_mlp`` も、同じ関数を受け取る。"""
    assert not hasattr(s6_3a, "mlp_forward")
    assert s6_3a.gated_mlp is models.gated_mlp
    src = solution_source()
    assert "from ch6.models import gated_mlp" in src
    assert "ch6.checks" not in src
    assert "def gated_mlp" not in src


def test_gated_mlp_lesson_specs_in_pytorch_layout_are_named():
    """issue 22 の 4: 重みは PyTorch の形 (出力, 入力)。本文の (入力, 出力) の spec を写した答えは、そう言って落ちる。"""
    lesson = dict(W_gate=P(None, "model"), W_up=P(None, "model"), W_down=P("model", None))
    expect_fail("6.3a-5", _shard_with(**lesson), "W_gate の spec", "(入力, 出力) の形", "PyTorch の形")
    expect_fail("6.3a-5", _shard_with(W_down=P("model", None)), "W_down", "P(None, 'model')")
