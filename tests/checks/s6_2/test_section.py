"""ch6/checks/s6_2 の全体にかかわるテスト（複数の演習をまたぐもの）。

6.2 のチェック: 参照解と別の正解は通り、典型的な誤りは問題を名指しして落ちる。

デバイス数（--devices）が 1 や 2 だと区別できない誤り（向きが逆の ring shift など）は、
区別できるときだけ「落ちること」を確かめます。issue 13 の回帰（shard_map + psum の 6.2-1、
関数でなく配列を渡した 6.2-2）にはそれぞれのテストがあります。"""
import jax
from jax import lax

from ch6 import run_check
from tests.checks.s6_2.common import sgd_fixed_axis


def test_6_2_unbound_axis_gives_no_shard_map_advice():
    # issue 13: JAX の原文の助言（"please call psum under `jax.shard_map`"）は pmap の演習には誤り。日本語の説明だけを出す
    wrong_name = lambda xs: jax.pmap(lambda x: x / lax.psum(x.sum(), "j"), axis_name="i")(xs)  # noqa: E731
    r = run_check("6.2-1", wrong_name)
    assert r.status == "error" and "軸の名前 j" in r.message, r.message
    assert "shard_map" not in r.message, r.message
    r = run_check("6.2-2", sgd_fixed_axis)
    assert r.status == "fail" and "shard_map" not in r.message, r.message
