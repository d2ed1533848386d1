"""6.3a-3 no_comm_specs のチェック（ch6/checks/s6_3a/no_comm_specs.py）のテスト。"""
from __future__ import annotations

import pytest
from jax.sharding import PartitionSpec as P

from ch6.checks import s6_3a
from tests.checkhelp import N, multi, not_done
from tests.checks.s6_3a.common import expect_fail, expect_pass

RIGHT = (P(), P("data", None), P(None, "data"))


def test_no_comm_right_in_every_spelling():
    r = expect_pass("6.3a-3", lambda: RIGHT)
    if N > 1:
        assert "集団通信なし" in r.message
    expect_pass("6.3a-3", lambda: ((None, None), ("data",), (None, "data")))   # タプルでもよい
    expect_pass("6.3a-3", lambda: [None, P("data"), [None, "data"]])           # リストでも、None（複製）でもよい
    expect_pass("6.3a-3", lambda: (P(), P(("data",), None), P(None, ("data",))))  # 1 要素のタプルの軸名


def test_no_comm_replicated_weight_is_refused():
    expect_fail("6.3a-3", lambda: (P("data", None), P(), P("data", None)), "複製", "'data' で分割")
    expect_fail("6.3a-3", lambda: (P(), P(), P()), "複製")


@pytest.mark.parametrize("pos", [0, 1, 2])
def test_no_comm_duplicate_axis_is_a_learner_mistake(pos):
    """回帰（issue 13）: 同じメッシュ軸を 2 度使う PartitionSpec は「internal」ではなく不正解。"""
    specs = list(RIGHT)
    specs[pos] = P("data", "data")
    r = expect_fail("6.3a-3", lambda: tuple(specs), "2 度使っています")
    assert ("x_spec", "w_spec", "out_spec")[pos] in r.message


def test_no_comm_other_bad_specs_are_learner_mistakes():
    expect_fail("6.3a-3", lambda: (P("model"), P("data", None), P(None, "data")), "メッシュにない軸")
    expect_fail("6.3a-3", lambda: (P(), P(None, "data", None), P(None, "data")), "3 次元分")
    expect_fail("6.3a-3", lambda: (P(), P("data", None), P(None, "data", unreduced={"data"})), status="error")
    expect_fail("6.3a-3", lambda: (P(), P("data", None), P(None, 3)), "文字列")
    expect_fail("6.3a-3", lambda: ("data", P("data", None), P(None, "data")), "PartitionSpec のはず")
    expect_fail("6.3a-3", lambda: (P(), P("data", None)), "3 つ組")
    expect_fail("6.3a-3", lambda: P.nothing, "AttributeError", status="error")
    expect_fail("6.3a-3", not_done, status="not_done")


def test_no_comm_unreduced_returned_is_explained():
    expect_fail("6.3a-3", lambda: (P(), P("data", None), P(unreduced={"data"})), "unreduced")


@multi
def test_no_comm_detects_each_collective():
    expect_fail("6.3a-3", lambda: (P("data", None), P("data", None), P("data", None)), "通信が入りました", "all-gather")
    expect_fail("6.3a-3", lambda: (P(None, "data"), P(None, "data"), P()), "通信が入りました", "all-reduce")
    # 計算は正しいが、出力を複製にしたので余分な all-gather
    expect_fail("6.3a-3", lambda: (P(), P("data", None), P()), "all-gather")
    # w の縮約軸を分けた（w.T の行）
    expect_fail("6.3a-3", lambda: (P(), P(None, "data"), P(None, "data")), "通信が入りました")


@pytest.mark.skipif(N != 1, reason="1 デバイスのときだけ、通信の代わりに spec の規則で判定する")
def test_no_comm_one_device_uses_the_rule():
    r = expect_fail("6.3a-3", lambda: (P("data", None), P("data", None), P("data", None)), "1 デバイスなので", "all-gather")
    assert "2 個以上" in r.message
    expect_pass("6.3a-3", lambda: RIGHT)


def test_rule_agrees_with_the_compiler_cases():
    rule = s6_3a.needs_comm_by_rule
    assert rule((), ("data",), (None, "data")) == ""
    assert rule(("data",), (), ("data",)) == ""
    assert "all-reduce" in rule((None, "data"), (None, "data"), ())
    assert "all-gather" in rule(("data",), ("data",), ("data",))
    assert "集め直し" in rule((), ("data",), ())
