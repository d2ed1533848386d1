"""6.3a の問題文から書いた、ありそうな誤答（issue 39）。どれも 1・3・8 デバイスで、その誤りの名前で落ちるか、
そのデバイスの数では見分けられないことを正解の 1 行が言う。"""
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from ch6.meshes import mesh_2d_shape
from tests.checkhelp import N, expect

D_, M_ = mesh_2d_shape(N)


def placed(token_spec, mask_spec, own_mesh=False):
    def place_tokens(tokens, mask, mesh):
        m = jax.make_mesh(tuple(mesh.shape.values()), ("data", "model")) if own_mesh else mesh
        return (jax.device_put(tokens, NamedSharding(m, token_spec)), jax.device_put(mask, NamedSharding(m, mask_spec)))
    return place_tokens


def test_axes_swapped_is_a_spec_mistake_not_a_jax_error():
    """B と T を取り違えた spec: どのデバイスの数でも割り切れる形なので、JAX のエラーではなく spec の誤りとして言う。"""
    expect("6.3a-1", placed(P("model", "data", None), P("model", "data")), "fail", "P('model', 'data', None)",
           "0 軸（B）")


def test_features_split_on_model():
    expect("6.3a-1", placed(P("data", None, "model"), P("data", "model")), "fail", "P('data', None, 'model')")


def test_own_mesh():
    slip = placed(P("data", "model", None), P("data", "model"), own_mesh=True)
    if N == 1:
        expect("6.3a-1", slip, "pass", "メッシュを作り直す誤り", "確かめられません")
    else:
        expect("6.3a-1", slip, "fail", "別のメッシュ")


def test_case_e_without_the_gather():
    def predict_collectives():
        return {"A": "all-reduce", "B": "none", "C": "all-gather", "D": "none", "E": "none"}
    expect("6.3a-2", predict_collectives, "fail", "ケース E", "複製")


def test_w_split_on_the_contracted_axis():
    expect("6.3a-3", lambda: (P(), P(None, "data"), P(None, "data")), "fail", "縮約する軸")


def test_output_rows_split():
    expect("6.3a-3", lambda: (P(), P("data", None), P("data", None)), "fail", "集め直し")


def test_resharding_q_and_k():
    def attention_scores(q, k):
        q, k = jax.reshard(q, P("data", None, None)), jax.reshard(k, P("data", None, None))
        return jnp.einsum("bqd,bkd->bqk", q, k)
    if M_ == 1:
        expect("6.3a-4", attention_scores, "pass", "集め直す誤り", "確かめられません")
    else:
        expect("6.3a-4", attention_scores, "fail", "余分な通信", "all-gather")


def test_replicated_scores():
    def attention_scores(q, k):
        return jnp.einsum("bqd,bkd->bqk", q, k, out_sharding=P())
    msg = expect("6.3a-4", attention_scores, "fail", "複製で、バッチが分割されていません）でした")
    assert "） でした" not in msg


def gated(specs):
    def shard_gated_mlp(params, mesh):
        return {k: jax.device_put(v, NamedSharding(mesh, specs[k])) for k, v in params.items()}
    return shard_gated_mlp


GOOD = {"W_gate": P("model", None), "b_gate": P("model"), "W_up": P("model", None), "b_up": P("model"),
        "W_down": P(None, "model"), "b_down": P()}


def test_lesson_specs_copied():
    expect("6.3a-5", gated({**GOOD, "W_gate": P(None, "model"), "W_up": P(None, "model"), "W_down": P("model", None)}),
           "fail", "(入力, 出力) の形")


def test_hidden_biases_replicated():
    expect("6.3a-5", gated({**GOOD, "b_gate": P(), "b_up": P()}), "fail", "b_gate が複製")


def test_output_bias_split():
    expect("6.3a-5", gated({**GOOD, "b_down": P("model")}), "fail", "b_down は複製")
