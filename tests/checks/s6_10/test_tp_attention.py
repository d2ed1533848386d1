"""6.10-3 decode_attention_tp: KV キャッシュをヘッドで分割したデコードのアテンション。"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from ch6 import Status
from tests.checkhelp import boom, expect, not_done

EX = "6.10-3"


def make(group="repeat", strict=False, scale=True, reduce="psum", gather=False):
    def decode_attention_tp(q, k_cache, v_cache, pos, wo):
        g = q.shape[1] // k_cache.shape[2]
        if group == "repeat":
            k, v = jnp.repeat(k_cache, g, axis=2), jnp.repeat(v_cache, g, axis=2)
        else:
            k, v = jnp.tile(k_cache, (1, 1, g, 1)), jnp.tile(v_cache, (1, 1, g, 1))
        s = jnp.einsum("bhe,bthe->bht", q, k) / (np.sqrt(q.shape[-1]) if scale else 1.0)
        t = jnp.arange(k.shape[1])[None, :]
        ok = (t < pos[:, None]) if strict else (t <= pos[:, None])
        p = jax.nn.softmax(jnp.where(ok[:, None], s, -jnp.inf), axis=-1)
        y = jnp.einsum("bhe,hed->bd", jnp.einsum("bht,bthe->bhe", p, v), wo)
        if gather:
            lax.all_gather(k_cache, "model")
        if reduce == "psum":
            return lax.psum(y, "model")
        if reduce == "twice":
            return lax.psum(lax.psum(y, "model"), "model") / lax.axis_size("model")
        if reduce == "pvary":
            return y
        return lax.psum(y, reduce)
    return decode_attention_tp


def test_reference_and_grouped_reshape_pass():
    expect(EX, make(), Status.PASS, "psum 1 回")

    def grouped(q, k_cache, v_cache, pos, wo):
        b, h, e = q.shape
        kv = k_cache.shape[2]
        qg = q.reshape(b, kv, h // kv, e)
        s = jnp.einsum("bkge,btke->bkgt", qg, k_cache) / jnp.sqrt(e)
        ok = jnp.arange(k_cache.shape[1])[None, :] <= pos[:, None]
        p = jax.nn.softmax(jnp.where(ok[:, None, None], s, -jnp.inf), axis=-1)
        out = jnp.einsum("bkgt,btke->bkge", p, v_cache).reshape(b, h, e)
        return lax.psum(out.reshape(b, -1) @ wo.reshape(-1, wo.shape[-1]), "model")
    expect(EX, grouped, Status.PASS)


@pytest.mark.parametrize("kw, words", [
    (dict(group="tile"), ("h // G",)),
    (dict(strict=True), ("t <= pos[b]",)),
    (dict(scale=False), ("sqrt",)),
    (dict(reduce="pvary"), ("varying", "lax.psum")),
    (dict(gather=True), ("all_gather",)),
    (dict(reduce="twice"), ("psum が 2 回",)),
    (dict(reduce="data"), ("軸の名前",)),
])
def test_named_mistakes(kw, words):
    if kw.get("group") == "tile" and jax.device_count() == 1:
        pytest.skip("1 デバイスでも KV ヘッドは 1〜2 個: tile と repeat は KV ヘッド 2 個なら違う")
    expect(EX, make(**kw), Status.FAIL, *words)


def test_shape_and_generic_mistakes():
    expect(EX, lambda q, k, v, pos, wo: lax.psum(q, "model").sum(1), Status.FAIL, "d_model")
    expect(EX, lambda q, k, v, pos, wo: lax.psum(make(reduce="pvary")(q, k, v, pos, wo) * 2, "model"),
           Status.FAIL, "最大の差")
    expect(EX, "not a function", Status.FAIL, "関数を渡して")


def test_not_done_and_learner_error():
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR, "ZeroDivisionError")
