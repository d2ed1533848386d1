"""6.5-8 q8、6.5-9 q9、6.5-10 q10 のチェック（ch6/checks/s6_5/compiler_collectives.py）のテスト。"""
from __future__ import annotations

import jax

import ch6
from ch6.checks import s6_5
from tests.checks.s6_5.common import const


def test_measured_answers_match_the_devices():
    n = jax.device_count()
    assert s6_5.q5_truth() == {"b"}
    assert s6_5.q6_truth(n) == ({"a", "b"} if n == 1 else {"b"})
    assert s6_5.q2_truth(n) == ({"b", "c"} if n == 1 else {"b"})
    if n == 1:
        assert s6_5.q8_truth(n) == {"a"} and s6_5.q9_truth(n) == {"a"}
        assert "実測できない" in ch6.run_check("6.5-8", const("b")).message
    else:
        assert s6_5.q8_truth(n) == {"b"}
        assert s6_5.q9_truth(n) == {"c"}
        assert f"デバイス {n} 個でコンパイル" in ch6.run_check("6.5-9", const("c")).message
