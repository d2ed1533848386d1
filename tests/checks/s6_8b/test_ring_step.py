"""6.8b-1 ring_step: 逆向きのリングの 1 ステップ。参照と別の正しい書き方が通り、よくある誤りがそれぞれの言葉で落ちること。"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from ch6 import Status
from tests.checkhelp import boom, expect, not_done

EX = "6.8b-1"
N = jax.device_count()


def make(*, perm="left", rescale_l=True, rescale_acc=True, old_max=True, scale=True, send=True, normalize=False,
         swap_kv=False, use_matmul=False, separate=False):
    def ring_step(q, k, v, m, ell, acc):
        n = lax.axis_size("seq")
        if use_matmul:
            s = jnp.transpose(q, (1, 0, 2)) @ jnp.transpose(k, (1, 2, 0))
        else:
            s = jnp.einsum("qhd,khd->hqk", q, k)
        if scale:
            s = s / jnp.sqrt(q.shape[-1])
        m_new = jnp.maximum(m, s.max(axis=-1)) if old_max else s.max(axis=-1)
        p = jnp.exp(s - m_new[..., None])
        r = jnp.exp(m - m_new)
        l_new = (r if rescale_l else 1.0) * ell + p.sum(-1)
        acc_new = (r[..., None] if rescale_acc else 1.0) * acc + jnp.einsum("hqk,khd->hqd", p, v)
        if normalize:
            acc_new = acc_new / l_new[..., None]
        pairs = {"left": [(i, (i - 1) % n) for i in range(n)],
                 "right": [(i, (i + 1) % n) for i in range(n)],
                 "nowrap": [(i, i - 1) for i in range(1, n)]}[perm]
        if not send:
            k_next, v_next = k, v
        elif separate:
            k_next, v_next = lax.ppermute(k, "seq", pairs), lax.ppermute(v, "seq", pairs)
        else:
            k_next, v_next = lax.ppermute((k, v), "seq", pairs)
        if swap_kv:
            k_next, v_next = v_next, k_next
        return m_new, l_new, acc_new, k_next, v_next
    return ring_step


def test_reference_passes():
    expect(EX, make(), Status.PASS, "左隣")


@pytest.mark.parametrize("kw", [dict(use_matmul=True), dict(separate=True)], ids=["matmul", "separate-sends"])
def test_other_correct_answers_pass(kw):
    expect(EX, make(**kw), Status.PASS)


@pytest.mark.parametrize("kw, words", [
    (dict(rescale_l=False), ("ell", "測り直していません")),
    (dict(rescale_acc=False), ("acc", "測り直していません")),
    (dict(rescale_l=False, rescale_acc=False), ("ell と acc の両方",)),
    (dict(old_max=False), ("前の最大値",)),
    (dict(scale=False), ("√次元",)),
    (dict(normalize=True), ("正規化",)),
])
def test_state_mistakes_are_named(kw, words):
    expect(EX, make(**kw), Status.FAIL, *words)


def test_m_kept_old_is_named():
    def keep_m(q, k, v, m, ell, acc):
        _, l2, acc2, kn, vn = make()(q, k, v, m, ell, acc)
        return m, l2, acc2, kn, vn
    expect(EX, keep_m, Status.FAIL, "m が前の値のまま")


@pytest.mark.skipif(N < 3, reason="2 デバイス以下では右隣と左隣が同じ")
def test_wrong_direction_is_named():
    expect(EX, make(perm="right"), Status.FAIL, "右隣へ送っています")


@pytest.mark.skipif(N < 2, reason="1 デバイスでは送る先がない")
def test_ring_without_wrap_and_without_send_and_swapped():
    expect(EX, make(perm="nowrap"), Status.FAIL, "戻る組がない")
    expect(EX, make(swap_kv=True), Status.FAIL, "順番")


def test_no_ppermute_is_named():
    expect(EX, make(send=False), Status.FAIL, "ppermute が見つかりません")


def test_wrong_outputs_are_named():
    expect(EX, lambda *a: a[:3], Status.FAIL, "5 つ組")
    expect(EX, lambda q, k, v, m, ell, acc: (m, ell, acc[0], k, v), Status.FAIL, "acc の形")


def test_not_done_and_learner_error():
    expect(EX, not_done, Status.NOT_DONE)
    r_status = Status.ERROR
    expect(EX, boom, r_status, "ZeroDivisionError")
