"""ch6.serving（6.10 節）: KV キャッシュつきの生成が計算し直しと一致し、式・GQA・量子化・コンパイルの数えが正しいこと。"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ch6 import lm, serving

PREFILL, DECODE, FORWARD = jax.jit(serving.prefill), jax.jit(serving.decode), jax.jit(serving.forward)

CONFIG = dataclasses.replace(lm.Config(), n_layers=1, d_model=12, n_heads=4, d_head=4, d_ff=16, max_len=16, vocab=32)


pytestmark = pytest.mark.slow          # JAX のコンパイルが多い（make quick は飛ばす）


@pytest.fixture(scope="module")
def params():
    """ch6.lm と同じ形の木（値は NumPy の乱数: lm.init_params の葉ごとのコンパイルを省く）。"""
    shapes = jax.eval_shape(lambda: lm.init_params(CONFIG, jax.random.key(0))[0])
    r = np.random.default_rng(0)
    return jax.tree.map(lambda s: jnp.asarray(0.3 * r.normal(size=s.shape), jnp.float32), shapes)


def test_prefill_then_decode_equals_the_full_forward(params):
    tokens = jax.random.randint(jax.random.key(1), (2, 10), 0, CONFIG.vocab)
    full = jax.jit(lm.forward, static_argnums=2)(params, tokens, CONFIG)
    np.testing.assert_allclose(FORWARD(params, tokens), full, rtol=1e-5, atol=1e-5)
    logits, cache = PREFILL(params, tokens[:, :4], serving.init_cache(params, 2, 12))
    np.testing.assert_allclose(logits, full[:, :4], rtol=1e-5, atol=1e-5)
    for t in range(4, 10):
        step, cache = DECODE(params, cache, tokens[:, t], jnp.full(2, t))
        np.testing.assert_allclose(step, full[:, t], rtol=1e-5, atol=1e-5)


def test_rows_may_sit_at_different_positions(params):
    tokens = jax.random.randint(jax.random.key(2), (2, 8), 0, CONFIG.vocab)
    full = jax.jit(lm.forward, static_argnums=2)(params, tokens, CONFIG)
    _, cache = PREFILL(params, tokens[:, :5], serving.init_cache(params, 2, 8))
    pos = np.array([3, 5])                     # 行 0 は位置 3 を上書きして続ける（位置 4 は見ない）
    step, _ = DECODE(params, cache, tokens[jnp.arange(2), pos], jnp.asarray(pos))
    np.testing.assert_allclose(step, full[jnp.arange(2), pos], rtol=1e-5, atol=1e-5)


def test_cache_bytes_formula_and_gqa(params):
    assert serving.kv_cache_bytes(40, 40, 128, 8192, 1, 2) == 40 * 2 * 40 * 128 * 8192 * 2
    cache = serving.init_cache(params, 3, 8, jnp.bfloat16)
    assert serving.tree_bytes(cache) == serving.kv_cache_bytes(1, 4, 4, 8, 3, 2)
    gqa = serving.to_gqa(params, 2)
    assert serving.kv_heads(gqa) == 2 and serving.kv_heads(params) == 4
    wk = params["blocks"]["wk"]
    np.testing.assert_allclose(gqa["blocks"]["wk"][..., 0, :], wk[..., :2, :].mean(-2), rtol=1e-6)
    with pytest.raises(ValueError):
        serving.to_gqa(params, 3)
    tokens = jax.random.randint(jax.random.key(3), (1, 6), 0, CONFIG.vocab)
    logits, cache = PREFILL(gqa, tokens[:, :5], serving.init_cache(gqa, 1, 6))
    step, _ = DECODE(gqa, cache, tokens[:, 5], jnp.array([5]))
    np.testing.assert_allclose(step, FORWARD(gqa, tokens)[:, 5], rtol=1e-5, atol=1e-5)


def test_decode_step_time_has_a_memory_and_a_compute_regime():
    small = serving.decode_step_time(30e9, 819e6, 4, 30e9, 16 * 1.97e14, 16 * 8.1e11)
    assert small == pytest.approx((4 * 819e6 + 30e9) / (16 * 8.1e11))
    big = serving.decode_step_time(30e9, 819e6, 256, 30e9, 16 * 1.97e14, 16 * 8.1e11)
    assert big == pytest.approx(256 * 819e6 / (16 * 8.1e11) + 2 * 256 * 30e9 / (16 * 1.97e14))


def test_int8_quantisation_per_channel():
    w = np.array([[1.0, 0.0, -200.0], [-0.5, 0.0, 100.0]], np.float32)
    q, scale = serving.quantize_int8(w, (0,))
    assert q.dtype == jnp.int8 and scale.shape == (1, 3)
    np.testing.assert_array_equal(np.asarray(q)[:, 0], [127, -64])
    assert float(scale[0, 1]) == 1.0 and (np.asarray(q)[:, 1] == 0).all()
    assert np.abs(np.asarray(serving.dequantize(q, scale)) - w).max() <= float(scale.max()) / 2 + 1e-6


def test_quantised_params_halve_the_matrix_bytes(params):
    qp = serving.quantize_params(params)
    mats = {k: v for k, v in params["blocks"].items() if k in serving.MATRICES}
    bf16 = serving.tree_bytes(jax.tree.map(lambda a: a.astype(jnp.bfloat16), mats))
    int8 = serving.tree_bytes({k: v for k, v in qp["blocks"].items() if k in serving.MATRICES})
    assert 0.5 <= int8 / bf16 < 0.7          # 小さな行列ではスケールの分が目立つ
    back = serving.dequantize_params(qp)
    assert jax.tree.structure(back) == jax.tree.structure(params)


def test_partial_attention_combines_like_the_whole(params):
    r = np.random.default_rng(0)
    q = r.normal(size=(2, 4, 3)).astype(np.float32)
    k, v = r.normal(size=(2, 2, 8, 2, 3)).astype(np.float32)
    valid = np.arange(8)[None] < np.array([[8], [3]])
    whole = serving.attend(q[:, None], k, v, valid[:, None])[:, 0]
    parts = [serving.attend_partial(q, k[:, i:i + 4], v[:, i:i + 4], valid[:, i:i + 4]) for i in (0, 4)]
    m = np.maximum(parts[0][0], parts[1][0])
    r_ = [np.where(np.isfinite(p[0]), np.exp(p[0] - m), 0.0) for p in parts]
    acc = sum(ri[..., None] * np.asarray(p[2]) for ri, p in zip(r_, parts))
    ell = sum(ri * np.asarray(p[1]) for ri, p in zip(r_, parts))
    np.testing.assert_allclose(acc / ell[..., None], whole, rtol=1e-5, atol=1e-6)


def test_compile_counter_counts_backend_compilations():
    f = jax.jit(lambda x: x * 3 + 1)
    five, six = np.ones(5, np.float32), np.ones(6, np.float32)
    with serving.compile_counter() as c:
        f(five)
        f(five)
        f(six)
    assert c.count == 2
    with serving.compile_counter() as again:
        f(five)
    assert again.count == 0
