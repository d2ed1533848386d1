"""6.8b-3 dropped_choices: top-2 のルータで、どの選択が容量を超えてドロップされるか。"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest

from ch6 import Status
from tests.checkhelp import boom, expect, not_done

EX = "6.8b-3"


def make(rounding=math.ceil, k_in_cap=True, global_t=False, order="choice", offset=0, invert=False, counts=False,
         reset=True, follow_first=False):
    def dropped_choices(expert_ids, n_experts, capacity_factor):
        ids = np.asarray(expert_ids)
        groups, tokens, k = ids.shape
        cap = rounding(capacity_factor * (k if k_in_cap else 1) * tokens * (groups if global_t else 1) / n_experts)
        out = np.zeros(ids.shape, bool)
        for g in range(groups):
            if order == "choice":
                seq = [(t, c) for c in range(k) for t in range(tokens)]
            elif order == "token":
                seq = [(t, c) for t in range(tokens) for c in range(k)]
            else:
                seq = [(t, c) for c in (1, 0) for t in range(tokens)]
            if reset or g == 0:
                seats = np.zeros(n_experts, int)
            for t, c in seq:
                if follow_first and c == 1 and out[g, t, 0]:
                    out[g, t, c] = True   # 1 番目がドロップされたトークンは、2 番目もドロップ（席を使わない）
                    continue
                out[g, t, c] = seats[ids[g, t, c]] + offset >= cap
                seats[ids[g, t, c]] += 1
        if counts:
            return np.bincount(ids[out], minlength=n_experts)
        return ~out if invert else out
    return dropped_choices


def test_reference_passes():
    expect(EX, make(), Status.PASS, "一致しました")


def test_vectorised_jnp_answer_passes():
    def vectorised(expert_ids, n_experts, capacity_factor):
        ids = jnp.asarray(expert_ids)
        g, t, k = ids.shape
        cap = math.ceil(capacity_factor * k * t / n_experts)
        order = jnp.swapaxes(ids, 1, 2).reshape(g, k * t)
        onehot = order[..., None] == jnp.arange(n_experts)
        seat = jnp.take_along_axis(jnp.cumsum(onehot, axis=1), order[..., None], axis=2)[..., 0] - 1
        return jnp.swapaxes((seat >= cap).reshape(g, k, t), 1, 2)
    expect(EX, vectorised, Status.PASS)


def test_int_mask_is_accepted():
    expect(EX, lambda *a: make()(*a).astype(np.int32), Status.PASS)


@pytest.mark.parametrize("kw, words", [
    (dict(rounding=math.floor), ("切り捨て",)),
    (dict(rounding=round), ("四捨五入",)),
    (dict(rounding=int), ("切り捨て",)),
    (dict(k_in_cap=False), ("k = 2",)),
    (dict(global_t=True), ("全グループ",)),
    (dict(order="token"), ("交互",)),
    (dict(order="reversed"), ("2 番目の選択を先に",)),
    (dict(offset=-1), ("1 つ多く",)),
    (dict(offset=1), ("1 つ少なく",)),
    (dict(invert=True), ("True と False が逆",)),
    (dict(counts=True), ("エキスパートごとの数",)),
])
def test_natural_mistakes_are_named(kw, words):
    expect(EX, make(**kw), Status.FAIL, *words)


def test_fresh_slips_from_the_statement():
    expect(EX, make(reset=False), Status.FAIL, "グループごとに数え直さず")
    expect(EX, make(follow_first=True), Status.FAIL, "2 番目の選択もドロップ", "別々に")


def test_other_wrong_values():
    expect(EX, lambda ids, e, c: np.arange(np.size(ids)).reshape(np.shape(ids)) % 3 == 0, Status.FAIL, "個のはずが")
    expect(EX, lambda ids, e, c: np.zeros(np.shape(ids), np.float32) + 0.5, Status.FAIL, "dtype")
    expect(EX, lambda ids, e, c: np.zeros((2, 2), bool), Status.FAIL, "同じ形", "のはずが")


def test_not_done_and_learner_error():
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR, "ZeroDivisionError")


def test_right_count_wrong_choices_is_said():
    def shifted(expert_ids, n_experts, capacity_factor):     # 数は同じで、ドロップの位置をトークンの軸でずらしたもの
        return np.roll(make()(expert_ids, n_experts, capacity_factor), 1, axis=1)
    expect(EX, shifted, Status.FAIL, "ドロップの数", "合っています", "どの選択か")
