"""チェックのミューテーションテスト（tools/mutate.py）: 解答例を壊した変異体の 95% 以上をチェックが見抜くこと。

スコアはテストの最後の要約に表示されます（conftest.py の pytest_terminal_summary）。
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import mutate  # noqa: E402
import pytest  # noqa: E402

MIN_SCORE = 0.95


def test_operators_make_the_mutants_the_issue_lists():
    src = '''def f(W, xs):
    ### BEGIN SOLUTION
    n = 4
    perm = [(i, (i + 1) % n) for i in range(n)]
    y = jax.vmap(g, in_axes=(None, 0), out_axes=0)(W, xs)
    z = lax.psum(y, "x") / jnp.sqrt(v + eps)
    s = jax.jit(h)(P("data", None))
    return y, z
    ### END SOLUTION
'''
    labels = [label for label, _ in mutate.mutants(src)]
    for expected in ("in_axes の 0 番目と 1 番目を入れ替える", "out_axes: 0 → 1", "psum → pmean", "psum → pmax",
                     "vmap → Python のループ", "jit を呼ぶたびに作り直す", "返すタプルの順番を入れ替える",
                     "P('data', None) → P()（複製）", "P('data', None): 'data' → None"):
        assert expected in labels, (expected, labels)
    assert any(label.startswith("割り算を消す") for label in labels)
    assert any(label.startswith("小さな項を消す") for label in labels)
    assert any(label.startswith("向きを逆にする") for label in labels)
    # 解答ブロックの外は変えない
    outside = "def f():\n    x = 1 / 2\n    ### BEGIN SOLUTION\n    return 0\n    ### END SOLUTION\n"
    assert not [m for m in mutate.mutants(outside) if "割り算" in m[0]]


def test_loop_vmap_matches_vmap_with_a_python_loop():
    import jax
    import jax.numpy as jnp
    import numpy as np

    W = jnp.arange(6.0).reshape(2, 3)
    xs = jnp.arange(12.0).reshape(4, 3)
    f = lambda W, x: W @ x  # noqa: E731
    np.testing.assert_allclose(mutate._loop_vmap(f, in_axes=(None, 0))(W, xs), jax.vmap(f, in_axes=(None, 0))(W, xs))
    np.testing.assert_allclose(mutate._loop_vmap(f, in_axes=(None, 1), out_axes=1)(W, xs.T),
                               jax.vmap(f, in_axes=(None, 1), out_axes=1)(W, xs.T))


def test_equivalent_list_names_real_mutants():
    table = mutate.load_equivalent()
    for (ex, label), reason in table.items():
        assert reason, f"{ex} | {label}: give a reason"


@pytest.mark.skipif(
    __import__("jax").device_count() < 8,
    reason="the score is measured with the default 8 devices: with fewer, collectives and ring directions coincide "
           "(psum = pmean = pmax on one device, +1 = -1 on two), so those mutants are truly equivalent there")
def test_mutation_score(record_property):
    outcomes = []
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        outcomes += mutate.run_notebook(path)
    killed, total, eq, score = mutate.score(outcomes)
    text = mutate.report(outcomes)
    record_property("mutation_report", text)
    assert total > 100, "too few mutants: did the operators stop matching the solutions?"
    stale = set(mutate.load_equivalent()) - {(o.exercise, o.label) for o in outcomes if not o.killed}
    assert not stale, f"tools/mutants_equivalent.txt lists mutants that no longer survive: {sorted(stale)}"
    assert score >= MIN_SCORE, text
