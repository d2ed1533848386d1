"""6.7-3 fewest_microbatches を、一時領域が k によらないバックエンドで: memory_analysis() を差し替え、TPU v5e のように
一時領域がどの k でも 0（または同じ値）のときに、見分けられる誤りは落ち、見分けられない誤りは ✅ の行が断る
（チップで見つけた）。

完全版だけのテストです。チェックは隠し入力を CPU に置いて測り、学習者版は作るときに CPU で記録した表を引くので、
差し替えた読み方は学習者版のチェックに届きません。そのため tests/tools/test_learner_answers.py が両方の版で動かす
test_microbatch_budget.py には入れず、このファイルに置きます。"""
import types

import jax
import pytest

from ch6.checking import CANNOT_TELL
from tests.checkhelp import expect

from .test_microbatch_budget import (
    make,
    test_correct,
    test_tries_on_every_k_and_carried_temps_and_bare_none_are_named,
    test_wrong_answers_are_named,
)

# test_microbatch_budget.py の 3 つのテストを、下の backend_memory（一時領域がどの k でも 0）でもう 1 度動かす
__all__ = ["test_correct", "test_wrong_answers_are_named", "test_tries_on_every_k_and_carried_temps_and_bare_none_are_named"]


@pytest.fixture
def backend_memory(monkeypatch):
    """TPU v5e のように一時領域がどの k でも 0 のとき（チップで見つけた: そこでは見分けられない誤りがあり、✅ の行が
    それを名指しする）。"""
    real = jax.stages.Compiled.memory_analysis

    def flat(self):
        m = real(self)
        return types.SimpleNamespace(temp_size_in_bytes=0, argument_size_in_bytes=m.argument_size_in_bytes,
                                     output_size_in_bytes=m.output_size_in_bytes)
    monkeypatch.setattr(jax.stages.Compiled, "memory_analysis", flat)
    return "temp0"


@pytest.fixture(params=[0, 4096], ids=["temp0", "temp-flat"])
def chip_memory(request, monkeypatch):
    """TPU のように、memory_analysis() の一時領域が k によらず同じ（v5e で scan の k = 1..6 はどれも 0）。"""
    real = jax.stages.Compiled.memory_analysis

    def flat(self):
        m = real(self)
        return types.SimpleNamespace(temp_size_in_bytes=request.param, argument_size_in_bytes=m.argument_size_in_bytes,
                                     output_size_in_bytes=m.output_size_in_bytes)
    monkeypatch.setattr(jax.stages.Compiled, "memory_analysis", flat)


def test_on_a_chip_whose_temps_do_not_change_with_k(chip_memory):
    # 見分けられる誤りは落ち、見分けられない誤りは ✅ の行が「確かめられません」と断る
    msg = expect("6.7-3", make(), "pass", CANNOT_TELL, "2 のべき乗だけを試す誤り", "k = 1 の一時領域を返す誤り")
    assert "予算ちょうどを収まらないとする誤り" not in msg
    expect("6.7-3", make(none=None), "fail", "2 つ組")
    expect("6.7-3", make(candidates=lambda n: list(range(1, n + 1))), "fail", "約数ではない", "reshape")
    expect("6.7-3", make(strict=True), "fail", "予算ちょうどを収まらないとした", "<=")
    expect("6.7-3", make(candidates=lambda n: [k for k in (1, 2, 4, 8, 16) if n % k == 0]), "pass", CANNOT_TELL)
