"""6.3a（jit + sharding）のチェックの単体テスト: 正解（と同じ意味の別の書き方）は通り、典型的な誤りは理由つきで落ち、
学習者の値が原因の失敗は「internal」にならない。

conftest が JAX_NUM_CPU_DEVICES を決めてから jax を読み込みます（既定 8、--devices 1〜8 のどれでも動く）。
"""
from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

from ch6 import run_check
from ch6.checks import s6_3a
from ch6.meshes import mesh_2d_shape

ROOT = Path(__file__).resolve().parent.parent
N = jax.device_count()
D, M = mesh_2d_shape(N)
multi = pytest.mark.skipif(N == 1, reason="通信は 2 デバイス以上でしか現れない")
# 2 次元メッシュの model 軸は、奇数個では長さ 1（ch6.meshes.mesh_2d_shape）なので、その軸の通信は現れない
model_axis = pytest.mark.skipif(M == 1, reason="model 軸が 1（奇数個）では通信が現れない")


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


def _solution_source() -> str:
    nb = json.loads((ROOT / "solutions" / "6_3a_sharding.ipynb").read_text(encoding="utf-8"))
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")


def _own_mesh(order=1, axis_types=AxisType.Explicit):
    """渡された mesh ではなく、自分で作ったメッシュ（デバイスの並びや軸の種類を変えられる）。"""
    devs = np.array(jax.devices()[::order]).reshape(mesh_2d_shape())
    return jax.sharding.Mesh(devs, ("data", "model"), axis_types=(axis_types,) * 2)


def test_no_message_uses_the_bare_word_nashi():
    """「集団通信なし」の表記は ch6.show.collectives_line の 1 通りだけ（チェックの中に「なし」の別表記を持たない）。"""
    src = "".join(f.read_text(encoding="utf-8")
                  for f in sorted((ROOT / "ch6" / "checks" / "s6_3a").glob("*.py")))  # パッケージの全モジュール
    assert "def check_predict" in src
    assert 'or "なし"' not in src and "def _comm" not in src


# ---------------------------------------------------------------- 6.3a-1 place_tokens

def tokens_ref(tokens, mask, mesh):
    return (jax.device_put(tokens, NamedSharding(mesh, P("data", "model", None))),
            jax.device_put(mask, NamedSharding(mesh, P("data", "model"))))


def tokens_set_mesh_list(tokens, mask, mesh):
    # set_mesh の中で PartitionSpec だけを渡し、リストで返す（末尾の None も省略）
    with jax.set_mesh(mesh):
        return [jax.device_put(tokens, P("data", "model")), jax.device_put(mask, P("data", "model"))]


def tokens_reshard(tokens, mask, mesh):
    # Explicit のメッシュなら jax.reshard でも置ける
    return (jax.reshard(tokens, NamedSharding(mesh, P("data", "model"))),
            jax.reshard(mask, NamedSharding(mesh, P("data", "model"))))


def test_place_tokens_right_in_every_spelling():
    r = _pass("6.3a-1", tokens_ref)
    assert f"デバイス {N} 個" in r.message
    _pass("6.3a-1", tokens_set_mesh_list)
    _pass("6.3a-1", tokens_reshard)


def test_place_tokens_wrong_axes():
    def batch_only(tokens, mask, mesh):
        return (jax.device_put(tokens, NamedSharding(mesh, P("data"))),
                jax.device_put(mask, NamedSharding(mesh, P("data"))))

    _fail("6.3a-1", batch_only, "tokens の spec が違います", "P('data', None, None)")

    def swapped(tokens, mask, mesh):
        return (jax.device_put(tokens, NamedSharding(mesh, P("model", "data"))),
                jax.device_put(mask, NamedSharding(mesh, P("model", "data"))))

    r = run_check("6.3a-1", swapped)
    assert r.status in ("fail", "error"), r.message  # 割り切れなければエラー、割り切れれば spec の違い

    def mask_replicated(tokens, mask, mesh):
        return tokens_ref(tokens, mask, mesh)[0], jax.device_put(mask, NamedSharding(mesh, P()))

    _fail("6.3a-1", mask_replicated, "mask の spec が違います")


def test_place_tokens_not_placed_swapped_and_errors():
    _fail("6.3a-1", lambda t, m, mesh: (t, m), "JAX 配列ではありません")
    _fail("6.3a-1", lambda t, m, mesh: tokens_ref(t, m, mesh)[::-1], "順番が逆")
    _fail("6.3a-1", lambda t, m, mesh: tokens_ref(t, m, mesh)[:1], "2 つ組")
    _fail("6.3a-1", lambda t, m, mesh: tokens_ref(np.zeros_like(t), m, mesh), "tokens の値が違います")
    _fail("6.3a-1", lambda t, m, mesh: t["bad"], "IndexError", status="error")
    _fail("6.3a-1", _todo, "まだ解答されていません", status="not_done")


def test_place_tokens_on_a_mesh_of_ones_own_is_refused():
    def own(tokens, mask, mesh):
        return tokens_ref(tokens, mask, _own_mesh(order=1))

    if N > 1:
        _fail("6.3a-1", own, "別のメッシュ", "渡された mesh")
    _fail("6.3a-1", lambda t, m, mesh: tokens_ref(t, m, _own_mesh(axis_types=AxisType.Auto)), "別のメッシュ")


# ---------------------------------------------------------------- 6.3a-2 predict_collectives

ANSWER = dict(s6_3a.ANSWER)


def test_predict_right_and_spellings():
    _pass("6.3a-2", lambda: dict(ANSWER))
    # 表記ゆれ（大文字、下線、空白、None、「なし」、小文字のキー）も受け付ける
    loose = {k.lower() if k in "AC" else k: (v.upper().replace("-", "_") if v != "none" else None)
             for k, v in ANSWER.items()}
    loose["D"] = "なし"
    _pass("6.3a-2", lambda: loose)


def test_predict_wrong_case_names_the_case_without_revealing():
    first = sorted(ANSWER)[0]
    other = "none" if ANSWER[first] != "none" else "all-gather"
    r = _fail("6.3a-2", lambda: {**ANSWER, first: other}, "4 つ正解", f"ケース {first}", "ヒント")
    assert ANSWER[first] not in r.message.split("ヒント")[0]


def test_predict_bad_shapes_of_answer():
    _fail("6.3a-2", lambda: {"A": "none"}, "ケース B, C, D, E の予想がありません")
    _fail("6.3a-2", lambda: {**ANSWER, "E": "broadcast"}, "通信の名前ではありません")
    _fail("6.3a-2", lambda: {**ANSWER, "E": 3}, "通信の名前ではありません")
    _fail("6.3a-2", lambda: list(ANSWER.values()), "辞書を返してください")
    _fail("6.3a-2", lambda: 1 / 0, "ZeroDivisionError", status="error")
    _fail("6.3a-2", _todo, status="not_done")


@multi
@pytest.mark.parametrize("case", sorted(s6_3a.PREDICT_CASES))
def test_predict_answer_key_matches_the_compiler(case):
    """答えの表は、このデバイス数で実際にコンパイルした HLO と一致する。"""
    out, counts = s6_3a.compiled_case(case)
    a, b = s6_3a.case_arrays(N)
    np.testing.assert_allclose(np.asarray(out), a.T @ b, rtol=1e-4, atol=1e-4)
    want = ANSWER[case]
    assert set(counts) == (set() if want == "none" else {want}), counts


@multi
def test_predict_judges_by_the_compilation_it_claims(monkeypatch):
    """回帰: 「コンパイルした HLO と一致」と書くなら、チェックは本当にコンパイルした結果で判定する。"""
    calls = []
    real = s6_3a.compiled_answers

    def spy():
        calls.append(1)
        return real()

    monkeypatch.setattr(s6_3a, "compiled_answers", spy)
    r = _pass("6.3a-2", lambda: dict(ANSWER))
    assert calls and "コンパイルした HLO" in r.message
    # コンパイルの結果が違えば、それに従う（表ではなく HLO が正解）
    monkeypatch.setattr(s6_3a, "compiled_answers", lambda: {**ANSWER, "B": "all-to-all"})
    _fail("6.3a-2", lambda: dict(ANSWER), "ケース B")


@pytest.mark.skipif(N != 1, reason="1 デバイスのときだけ")
def test_predict_one_device_does_not_claim_a_compilation():
    r = _pass("6.3a-2", lambda: dict(ANSWER))
    assert "1 デバイスでは通信が現れない" in r.message


# ---------------------------------------------------------------- 6.3a-3 no_comm_specs

RIGHT = (P(), P("data", None), P(None, "data"))


def test_no_comm_right_in_every_spelling():
    r = _pass("6.3a-3", lambda: RIGHT)
    if N > 1:
        assert "集団通信なし" in r.message
    _pass("6.3a-3", lambda: ((None, None), ("data",), (None, "data")))   # タプルでもよい
    _pass("6.3a-3", lambda: [None, P("data"), [None, "data"]])           # リストでも、None（複製）でもよい
    _pass("6.3a-3", lambda: (P(), P(("data",), None), P(None, ("data",))))  # 1 要素のタプルの軸名


def test_no_comm_replicated_weight_is_refused():
    _fail("6.3a-3", lambda: (P("data", None), P(), P("data", None)), "複製", "'data' で分けて")
    _fail("6.3a-3", lambda: (P(), P(), P()), "複製")


@pytest.mark.parametrize("pos", [0, 1, 2])
def test_no_comm_duplicate_axis_is_a_learner_mistake(pos):
    """回帰（issue 13）: 同じメッシュ軸を 2 度使う PartitionSpec は「internal」ではなく不正解。"""
    specs = list(RIGHT)
    specs[pos] = P("data", "data")
    r = _fail("6.3a-3", lambda: tuple(specs), "2 度使っています")
    assert ("x_spec", "w_spec", "out_spec")[pos] in r.message


def test_no_comm_other_bad_specs_are_learner_mistakes():
    _fail("6.3a-3", lambda: (P("model"), P("data", None), P(None, "data")), "メッシュにない軸")
    _fail("6.3a-3", lambda: (P(), P(None, "data", None), P(None, "data")), "3 次元分")
    _fail("6.3a-3", lambda: (P(), P("data", None), P(None, "data", unreduced={"data"})), status="error")
    _fail("6.3a-3", lambda: (P(), P("data", None), P(None, 3)), "文字列")
    _fail("6.3a-3", lambda: ("data", P("data", None), P(None, "data")), "PartitionSpec のはず")
    _fail("6.3a-3", lambda: (P(), P("data", None)), "3 つ組")
    _fail("6.3a-3", lambda: P.nothing, "AttributeError", status="error")
    _fail("6.3a-3", _todo, status="not_done")


def test_no_comm_unreduced_returned_is_explained():
    _fail("6.3a-3", lambda: (P(), P("data", None), P(unreduced={"data"})), "unreduced")


@multi
def test_no_comm_detects_each_collective():
    _fail("6.3a-3", lambda: (P("data", None), P("data", None), P("data", None)), "通信が入りました", "all-gather")
    _fail("6.3a-3", lambda: (P(None, "data"), P(None, "data"), P()), "通信が入りました", "all-reduce")
    # 計算は正しいが、出力を複製にしたので余分な all-gather
    _fail("6.3a-3", lambda: (P(), P("data", None), P()), "all-gather")
    # w の縮約軸を分けた（w.T の行）
    _fail("6.3a-3", lambda: (P(), P(None, "data"), P(None, "data")), "通信が入りました")


@pytest.mark.skipif(N != 1, reason="1 デバイスのときだけ、通信の代わりに spec の規則で判定する")
def test_no_comm_one_device_uses_the_rule():
    r = _fail("6.3a-3", lambda: (P("data", None), P("data", None), P("data", None)), "1 デバイスなので", "all-gather")
    assert "2 個以上" in r.message
    _pass("6.3a-3", lambda: RIGHT)


def test_rule_agrees_with_the_compiler_cases():
    rule = s6_3a.needs_comm_by_rule
    assert rule((), ("data",), (None, "data")) == ""
    assert rule(("data",), (), ("data",)) == ""
    assert "all-reduce" in rule((None, "data"), (None, "data"), ())
    assert "all-gather" in rule(("data",), ("data",), ("data",))
    assert "集め直し" in rule((), ("data",), ())


# ---------------------------------------------------------------- 6.3a-4 attention_scores

def scores_einsum(q, k):
    return jnp.einsum("bqd,bkd->bqk", q, k, out_sharding=P("data", None, None))


def scores_matmul(q, k):
    # matmul / @ と転置でも同じ（einsum でなくてよい）
    return jnp.matmul(q, jnp.swapaxes(k, 1, 2), out_sharding=P("data", None, None))


def scores_matmul_transpose(q, k):
    return jnp.matmul(q, k.transpose(0, 2, 1), out_sharding=P("data"))


def test_attention_scores_right_in_every_spelling():
    r = _pass("6.3a-4", scores_einsum)
    if M > 1:
        assert "all-reduce ×1" in r.message
    _pass("6.3a-4", scores_matmul)
    _pass("6.3a-4", scores_matmul_transpose)


def test_attention_scores_still_ambiguous():
    _fail("6.3a-4", lambda q, k: jnp.einsum("bqd,bkd->bqk", q, k), "ShardingTypeError", "out_sharding")
    _fail("6.3a-4", lambda q, k: q @ jnp.swapaxes(k, 1, 2), "ShardingTypeError")


def test_attention_scores_wrong_spec_and_replicated():
    _fail("6.3a-4", lambda q, k: jnp.einsum("bqd,bkd->bqk", q, k, out_sharding=P()), "複製")
    r = run_check("6.3a-4", lambda q, k: jnp.einsum("bqd,bkd->bqk", q, k, out_sharding=P(None, None, "data")))
    assert r.status in ("fail", "error"), r.message


@model_axis
def test_attention_scores_extra_all_gather():
    def gathered(q, k):
        return jnp.einsum("bqd,bkd->bqk", jax.reshard(q, P("data", None, None)), jax.reshard(k, P("data", None, None)))

    _fail("6.3a-4", gathered, "結果は正しい", "all-gather")


def test_attention_scores_swapped_hard_coded_and_errors():
    _fail("6.3a-4", lambda q, k: jnp.einsum("bkd,bqd->bqk", q, k, out_sharding=P("data", None, None)), "形が違います")
    _fail("6.3a-4", lambda q, k: scores_einsum(q, k) * 0 + 1.0, "値が違います")
    _fail("6.3a-4", lambda q, k: q @ k, status="error")  # 形が合わない
    _fail("6.3a-4", _todo, status="not_done")


# ---------------------------------------------------------------- 6.3a-5 shard_gated_mlp

SPECS = {"W_gate": P(None, "model"), "b_gate": P("model"), "W_up": P(None, "model"), "b_up": P("model"),
         "W_down": P("model", None), "b_down": P()}


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
    r = _pass("6.3a-5", shard_ref)
    if M > 1:
        assert "all-reduce ×1" in r.message
    _pass("6.3a-5", shard_tree_map)
    _pass("6.3a-5", shard_reshard)
    _pass("6.3a-5", _shard_with(b_down=P(None)))  # 末尾の None は P() と同じ


@pytest.mark.parametrize("leaf", ["b_gate", "b_up"])
def test_gated_mlp_hidden_bias_left_replicated_is_wrong(leaf):
    """issue 13 の変異体 P('model') → P() / None: 隠れ層の軸を持つバイアスを複製すると、1 デバイスあたりの
    メモリが減らない（演習文の条件）。spec そのもので判定する。"""
    _fail("6.3a-5", _shard_with(**{leaf: P()}), f"{leaf} が複製", "メモリ")
    _fail("6.3a-5", _shard_with(**{leaf: P(None)}), f"{leaf} が複製")


def test_gated_mlp_replicated_and_wrong_axes():
    _fail("6.3a-5", _shard_with(W_gate=P(), W_up=P(), W_down=P()), "W_gate が複製", "メモリ")
    _fail("6.3a-5", _shard_with(W_up=P("model", None)), "W_up の spec が違います", "P(None, 'model')")
    _fail("6.3a-5", _shard_with(W_down=P(None, "model")), "W_down の spec が違います")
    _fail("6.3a-5", _shard_with(b_down=P("model")), "b_down は複製")
    _fail("6.3a-5", _shard_with(W_gate=P("data", "model")), "'data' 軸で分かれています")


def test_gated_mlp_on_a_mesh_of_ones_own_is_a_learner_mistake():
    """回帰（issue 13）: 渡されたのとは別のメッシュに置いたパラメータは「internal」ではなく不正解。"""
    def own(params, mesh, **kw):
        other = _own_mesh(**kw)
        return {k: jax.device_put(v, NamedSharding(other, SPECS[k])) for k, v in params.items()}

    _fail("6.3a-5", lambda p, m: own(p, m, axis_types=AxisType.Auto), "別のメッシュ", "渡された mesh")
    if N > 1:
        _fail("6.3a-5", lambda p, m: own(p, m, order=-1), "別のメッシュ")
    _pass("6.3a-5", lambda p, m: own(p, m))  # 同じ並び・同じ軸で作り直したメッシュは、渡された mesh と等しい


def test_gated_mlp_not_placed_and_errors():
    _fail("6.3a-5", lambda params, mesh: params, "JAX 配列ではありません")
    _fail("6.3a-5", lambda params, mesh: {k: jnp.asarray(v) for k, v in params.items()}, "NamedSharding ではありません")
    _fail("6.3a-5", lambda params, mesh: {"W_gate": params["W_gate"]}, "辞書を返してください")
    _fail("6.3a-5", lambda params, mesh: [params], "辞書を返してください")
    _fail("6.3a-5", lambda params, mesh: params["W3"], "KeyError", status="error")
    _fail("6.3a-5", _todo, status="not_done")


def test_gated_mlp_forward_is_one_definition_in_the_package():
    """回帰: チェックはノートブックの定義の私的なコピーを持たない。forward は ch6.checks.s6_3a.gated_mlp の 1 つだけで、
    解答ノートブックはそれを import して使う。"""
    assert not hasattr(s6_3a, "mlp_forward")
    src = _solution_source()
    assert "from ch6.checks.s6_3a import gated_mlp" in src
    assert "def gated_mlp" not in src
