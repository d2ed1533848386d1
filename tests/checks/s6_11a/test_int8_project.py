"""6.11a-2 int8_project: スケールを縮約の後に掛ける int8 の射影。"""
from __future__ import annotations

import jax.numpy as jnp

from ch6 import Status, serving
from tests.checkhelp import boom, expect, not_done

EX = "6.11a-2"


def reference(x, q, scale):
    out = jnp.einsum("bsd,fd->bsf", x, q.astype(x.dtype), preferred_element_type=jnp.float32)
    return (out * scale[:, 0]).astype(x.dtype)


def test_reference_and_other_correct_answers_pass():
    expect(EX, reference, Status.PASS, "float32 の重みも")
    expect(EX, lambda x, q, s: ((x @ q.astype(x.dtype).T) * s.T).astype(x.dtype), Status.PASS)
    expect(EX, lambda x, q, s: (jnp.einsum("bsd,fd->bsf", x, q.astype(x.dtype)) * jnp.squeeze(s, 1)
                                .astype(x.dtype)).astype(x.dtype), Status.PASS)


def test_calling_the_lessons_library_function_is_named():
    """監査（issue 47）: 本編の serving.project を呼ぶ 1 行が、重みの大きさの演算を作らないので通っていた。"""
    def one_line(x, q, scale):
        return serving.project("bsd,fd->bsf", x, {"q": q, "scale": scale})

    expect(EX, one_line, Status.FAIL, "serving.project を呼んでいます", "自分で書いてください")


def test_named_mistakes():
    expect(EX, lambda x, q, s: jnp.einsum("bsd,fd->bsf", x, (q.astype(jnp.float32) * s).astype(x.dtype)),
           Status.FAIL, "重みの大きさ", "縮約の後")
    expect(EX, lambda x, q, s: jnp.einsum("bsd,fd->bsf", x, q.astype(x.dtype) * s.astype(x.dtype)),
           Status.FAIL, "重みの大きさ")
    expect(EX, lambda x, q, s: (jnp.einsum("bsd,fd->bsf", x.astype(jnp.float32), q.astype(jnp.float32))
                                * s[:, 0]).astype(x.dtype), Status.FAIL, "float32 の重み")
    expect(EX, lambda x, q, s: (jnp.einsum("bsd,fd->bsf", x, q.astype(x.dtype), preferred_element_type=jnp.float32)
                                * s).astype(x.dtype), Status.FAIL, "長さ 1 の軸")
    expect(EX, lambda x, q, s: jnp.einsum("bsd,fd->bsf", x, q.astype(x.dtype), preferred_element_type=jnp.float32)
           * s[:, 0], Status.FAIL, "dtype", "float32")


def test_wrong_broadcast_when_the_shapes_happen_to_fit_is_named():
    from ch6.checks.s6_11a.int8_project import check_int8_project  # noqa: F401  (登録のため)

    def keeps_axis_only_when_it_fits(x, q, s):
        out = jnp.einsum("bsd,fd->bsf", x, q.astype(x.dtype), preferred_element_type=jnp.float32)
        scale = s if x.shape[1] == q.shape[0] else s[:, 0]      # 形が合う組でだけ長さ 1 の軸を残す
        return (out * scale).astype(x.dtype)
    expect(EX, keeps_axis_only_when_it_fits, Status.FAIL, "ブロードキャスト")


def test_scale_missing_or_divided_x_as_int8_and_numpy_are_named():
    import numpy as np
    expect(EX, lambda x, q, s: jnp.einsum("bsd,fd->bsf", x, q.astype(x.dtype)), Status.FAIL, "scale を掛けていません")
    expect(EX, lambda x, q, s: (jnp.einsum("bsd,fd->bsf", x, q.astype(x.dtype)) / s[:, 0]).astype(x.dtype),
           Status.FAIL, "scale で割っています")
    expect(EX, lambda x, q, s: (jnp.einsum("bsd,fd->bsf", x.astype(jnp.int8), q, preferred_element_type=jnp.int32)
                                * s[:, 0]).astype(x.dtype), Status.FAIL, "x を int8 に変えて")

    def with_numpy(x, q, s):
        y = np.einsum("bsd,fd->bsf", np.asarray(x, np.float32), np.asarray(q, np.float32))
        return (y * np.asarray(s)[:, 0]).astype(x.dtype)
    expect(EX, with_numpy, Status.FAIL, "NumPy", "jit の中で呼ばれるので jnp を使います")


def test_other_wrong_answers():
    expect(EX, lambda x, q, s: reference(x, q, s)[:, :, :2], Status.FAIL, "形")
    expect(EX, lambda x, q, s: (jnp.einsum("bsd,fd->bsf", x, q.astype(x.dtype)) * s[0]).astype(x.dtype),
           Status.FAIL, "値")
    expect(EX, lambda x, q, s: 3, Status.FAIL, "配列")


def test_not_done_and_learner_error():
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR, "ZeroDivisionError")
