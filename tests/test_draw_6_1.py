"""ch6.draw.vmap_axes: vmap のバッチ軸の図は実際の配列の形と in_axes / out_axes から描かれ、小さく決定的であること。"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from ch6 import draw


def predict(W, x):
    return jnp.tanh(W @ x)


def _picture(in_axis, out_axis, n=6):
    W = jnp.ones((3, 4))
    xs = jnp.ones((4, n)) if in_axis == 1 else jnp.ones((n, 4))
    out = jax.vmap(predict, in_axes=(None, in_axis), out_axes=out_axis)(W, xs)
    return draw.vmap_axes([("W", W), ("xs", xs)], (None, in_axis), ("出力", out), out_axes=out_axis)


def test_texts_carry_names_shapes_and_axes():
    d = _picture(1, 1)
    assert "W\n形 (3, 4)\nin_axes=None" in d.texts
    assert "xs\n形 (4, 6)\nin_axes=1" in d.texts
    assert "出力\n形 (3, 6)\nout_axes=1" in d.texts
    assert any("0〜5" in t for t in d.texts) and "vmap" in d.texts


def test_small_deterministic_and_different_axes_give_different_pictures():
    a, b = _picture(1, 1), _picture(1, 1)
    assert a.png == b.png and a.png.startswith(b"\x89PNG") and len(a.png) < 60_000
    assert b"Matplotlib" not in a.png
    assert _picture(1, 0).png != a.png and _picture(0, 0).png != a.png


def test_long_axes_are_cut_and_said_so():
    d = _picture(0, 0, n=20)
    assert any("先頭の 12 個" in t for t in d.texts) and "…" in d.texts
    assert len(d.png) < 60_000


def test_disagreeing_batch_sizes_are_refused():
    with pytest.raises(ValueError, match="disagree"):
        draw.vmap_axes([("a", jnp.ones((3, 2))), ("b", jnp.ones((4, 2)))], 0, ("out", jnp.ones(3)), 0)
    with pytest.raises(ValueError, match="out of range"):
        draw.vmap_axes([("a", jnp.ones(3))], 1, ("out", jnp.ones(3)), 0)
