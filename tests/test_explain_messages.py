"""explain の言葉（issue 22 の 4）: 英文の原文は単語の途中で切らない。よくある 3 つのエラーには日本語のヒント。"""
import jax
import jax.numpy as jnp
import optax
import pytest
from jax.sharding import PartitionSpec as P

from ch6 import explain


def _error(fn):
    with pytest.raises(Exception) as info:
        fn()
    return explain.explain(info.value)


def test_cut_never_splits_an_english_word():
    text = "shard_map applied to the function was given an in_specs entry which is too long to be compatible"
    short = explain.cut(text, 60)
    assert short.endswith("…") and len(short) <= 60
    assert text.startswith(short[:-1]) and text[len(short) - 1] == " "


def test_cut_keeps_japanese_and_short_text():
    assert explain.cut("短い文", 10) == "短い文"
    assert explain.cut("あ" * 20, 10) == "あ" * 9 + "…"


def test_in_specs_longer_than_the_argument_names_the_argument():
    mesh = jax.make_mesh((jax.device_count(),), ("data",))

    def run():
        def body(x, eps):
            return x
        jax.shard_map(body, mesh=mesh, in_specs=(P("data"), P("data")), out_specs=P("data"))(
            jnp.ones((jax.device_count(), 3)), 1e-5)

    line = _error(run)
    assert "2 番目の指定" in line and "「eps」" in line and "0 次元" in line and "P()" in line
    assert "原文" not in line


def test_optimizer_update_without_params_says_what_to_pass():
    opt = optax.adamw(1e-2)
    params = {"w": jnp.ones(3)}
    line = _error(lambda: opt.update(params, opt.init(params)))
    assert "optimizer.update(grads, opt_state, params)" in line and "原文" not in line


def test_indivisible_split_names_the_mesh_axis_not_the_device_count():
    line = explain.explain(ValueError("One of device_put args was given the sharding of NamedSharding(...), "
                                      "which implies that the global size of its dimension 0 should be "
                                      "divisible by 4, but it is equal to 6"))
    assert "メッシュの軸の大きさ" in line and "デバイスの数" not in line
