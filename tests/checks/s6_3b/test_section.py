"""ch6/checks/s6_3b の全体にかかわるテスト（複数の演習をまたぐもの）。

6.3b のチェックの単体テスト: 正解を通し、典型的な誤りを言い当てて落とす。

conftest.py がデバイス数を決める（既定 8、--devices 2 なども）。1 台では区別できない誤り
（平均の平均など）は、2 台以上のときだけ確かめる。"""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from tests.checks.s6_3b.common import assert_fail, run, softmax_gather


def softmax_gather_stats(block):
    # 最大値を all_gather してから max（統計量だけだが、問題の指定は pmax）
    m = jnp.max(lax.all_gather(jnp.max(block, axis=1), "x"), axis=0)[:, None]
    e = jnp.exp(block - m)
    return e / lax.psum(jnp.sum(e, axis=1, keepdims=True), "x")


def masked_mean_gather_stats(x, mask):
    both = jnp.concatenate([mask @ x, jnp.sum(mask)[None]])
    tot = jnp.sum(lax.all_gather(both, "x"), axis=0)
    return tot[:-1] / tot[-1]


def test_gathered_statistics_are_told_apart_from_gathered_data():
    msg = run("6.3b-4", softmax_gather_stats).message
    assert "pmax" in msg and "特徴そのもの" not in msg, msg
    assert "特徴そのもの" in run("6.3b-4", softmax_gather).message
    # 6.3b-1 は out_specs=P() なので、all_gather の結果（デバイスごとに違う値の扱い）は check_vma が止める
    assert_fail(run("6.3b-1", masked_mean_gather_stats), "check_vma", "all_gather")


def test_no_dead_helpers_and_one_spelling_of_no_collectives():
    from ch6.checks import s6_3b
    from ch6.show import collectives_line

    assert not hasattr(s6_3b, "_first") and not hasattr(s6_3b, "_fmt_counts")
    users = [getattr(s6_3b, m) for m in s6_3b.__all__ if hasattr(getattr(s6_3b, m), "collectives_line")]
    assert users and all(m.collectives_line is collectives_line for m in users)
