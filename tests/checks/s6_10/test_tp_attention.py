"""6.10-3 decode_attention_tp: KV キャッシュをヘッドで分割したデコードのアテンション。"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from ch6 import Status, serving
from ch6.checking import CANNOT_TELL
from tests.checkhelp import N, boom, expect, not_done

EX = "6.10-3"


def make(group="repeat", strict=False, scale=True, reduce="psum", gather=False, mask=True):
    def decode_attention_tp(q, k_cache, v_cache, pos, wo):
        g = q.shape[1] // k_cache.shape[2]
        if group == "repeat":
            k, v = jnp.repeat(k_cache, g, axis=2), jnp.repeat(v_cache, g, axis=2)
        else:
            k, v = jnp.tile(k_cache, (1, 1, g, 1)), jnp.tile(v_cache, (1, 1, g, 1))
        s = jnp.einsum("bhe,bthe->bht", q, k) / (np.sqrt(q.shape[-1]) if scale else 1.0)
        t = jnp.arange(k.shape[1])[None, :]
        ok = (t < pos[:, None]) if strict else (t <= pos[:, None])
        ok = ok if mask else jnp.ones_like(ok)
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
        if reduce == "pmean":
            return lax.pmean(y, "model")
        if reduce == "gather_sum":
            return lax.all_gather(y, "model").sum(0)
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
    (dict(mask=False), ("pos[b] より後のキー", "t <= pos[b]")),
    (dict(reduce="gather_sum"), ("部分和（wo を掛けた後）を all_gather で集めてから足して", "lax.psum で 1 回だけ")),
    (dict(reduce="twice"), ("もう一度足して割る",)),
])
def test_named_mistakes(kw, words):
    expect(EX, make(**kw), Status.FAIL, *words)


def test_pmean_is_named_or_the_pass_line_says_one_device_cannot_tell():
    if N == 1:
        expect(EX, make(reduce="pmean"), Status.PASS, CANNOT_TELL)
    else:
        expect(EX, make(reduce="pmean"), Status.FAIL, f"1/{N}", "lax.pmean ではなく lax.psum")


def test_the_pass_line_names_what_one_device_cannot_tell():
    msg = expect(EX, make(), Status.PASS)
    assert (CANNOT_TELL in msg) == (N == 1), msg


def test_calling_the_lessons_library_function_is_named():
    """監査（issue 47）: 本編の serving.attend（本編のデコードのセルと同じ呼び方）か serving.attend_partial に、wo と psum を
    足すだけの答えが通っていた。"""
    def one_line(q, k_cache, v_cache, pos, wo):
        mask = (jnp.arange(k_cache.shape[1])[None, :] <= pos[:, None])[:, None]
        out = serving.attend(q[:, None], k_cache, v_cache, mask)[:, 0]
        return lax.psum(jnp.einsum("bhe,hed->bd", out, wo), "model")

    expect(EX, one_line, Status.FAIL, "serving.attend を呼んでいます", "自分で書いてください")

    def from_partials(q, k_cache, v_cache, pos, wo):  # 本編の系列分割のセルの attend_partial で、1 デバイス分を割る
        _, ell, acc = serving.attend_partial(q, k_cache, v_cache, jnp.arange(k_cache.shape[1])[None] <= pos[:, None])
        return lax.psum(jnp.einsum("bhe,hed->bd", acc / ell[..., None], wo), "model")

    expect(EX, from_partials, Status.FAIL, "serving.attend_partial を呼んでいます")


def test_a_missing_wo_is_named_from_the_shape():
    def no_wo(q, k_cache, v_cache, pos, wo):
        g = q.shape[1] // k_cache.shape[2]
        k, v = jnp.repeat(k_cache, g, axis=2), jnp.repeat(v_cache, g, axis=2)
        s = jnp.einsum("bhe,bthe->bht", q, k) / np.sqrt(q.shape[-1])
        ok = jnp.arange(k.shape[1])[None, :] <= pos[:, None]
        p = jax.nn.softmax(jnp.where(ok[:, None], s, -jnp.inf), axis=-1)
        return lax.psum(jnp.einsum("bht,bthe->bhe", p, v), "model")
    expect(EX, no_wo, Status.FAIL, "wo を掛けていません", "d_model")


def test_shape_and_generic_mistakes():
    expect(EX, lambda q, k, v, pos, wo: lax.psum(q, "model").sum(1), Status.FAIL, "d_model")
    expect(EX, lambda q, k, v, pos, wo: lax.psum(make(reduce="pvary")(q, k, v, pos, wo) * 2, "model"),
           Status.FAIL, "最大の差")
    expect(EX, "not a function", Status.FAIL, "関数を渡して")


def test_not_done_and_learner_error():
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR, "ZeroDivisionError")
