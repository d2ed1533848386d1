"""チェックのミューテーションテスト（tools/mutate.py）: 解答例を壊した変異体の 95% 以上をチェックが見抜くこと。
どの演習にも変異体が 5 つ以上あること（少ない演習は tools/mutants_equivalent.txt に理由）。

スコアはテストの最後の要約に表示されます（conftest.py の pytest_terminal_summary）。
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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


def test_operators_make_the_mutants_the_course_teaches():
    """範囲と添字の off-by-one、切り詰めの境目、縮約の軸、大きさの引数、tiled、ppermute の組、in_specs / out_specs。"""
    src = '''def f(x, mesh, max_norm, axis_name):
    ### BEGIN SOLUTION
    n = x.shape[0]
    perm = [(i, (i + 1) % n) for i in range(1, n)]
    y = lax.ppermute(x, "x", perm)
    s = jnp.minimum(1.0, max_norm / jnp.sum(y ** 2, axis=(0, 1)))
    c = jnp.clip(jnp.floor(y), 0, 7)
    h = jnp.bincount(c, length=8)
    m = jnp.max(y, axis=1, keepdims=True)
    g = lax.all_gather(y, "x", tiled=True) + lax.psum_scatter(y, "x", scatter_dimension=1)
    k = max(range(n), key=lambda i: -i)
    z = lax.pmean(x, axis_name)
    step = jax.shard_map(f, mesh=mesh, in_specs=(P(), P("x")), out_specs=P())
    return x - lr * g
    ### END SOLUTION
'''
    labels = [label for label, _ in mutate.mutants(src)]
    for expected in (
            "range の始まりを -1（range(1, n)）", "range の終わりを +1（range(1, n)）", "添字を +1（x.shape[0]）",
            "minimum → maximum（jnp.minimum(1.0, max_norm / jnp.sum(y **）", "境目 1.0 を外す（jnp.minimum(1.0, max_norm / jnp.sum(y **）",
            "clip の上限を外す（jnp.clip(jnp.floor(y), 0, 7)）", "floor → ceil（jnp.floor(y)）",
            "sum: axis=(0, 1) から 0 を落とす", "sum: axis=(0, 1) を外す（全体で縮約）", "max: axis=1 → 2",
            "max: axis=1 → 0", "max: keepdims=True を外す", "sum → mean（jnp.sum(y ** 2, axis=(0, 1))）",
            "bincount: length を +1", "bincount: length を -1",
            "all_gather: tiled=True → False", "psum_scatter: tiled=True を足す", "psum_scatter: scatter_dimension=1 → 2",
            "ppermute の組の送信元と送信先を入れ替える（[(i, (i + 1) % n) for i in range(1, n)]）",
            "ppermute の組を 1 つ落とす（[(i, (i + 1) % n) for i in range(1, n)]）",
            "in_specs の 0 番目と 1 番目を入れ替える", "in_specs[0]: P() → P('x')", "out_specs: P() → P('x')",
            "組み込みの max → min（max(range(n), key=lambda i: -i)）", "符号を外す（-i）",
            "pmean を外す（通信しない）", "pmean: 軸の名前 axis_name を決め打ちの文字列に", "更新の向きを逆にする（x - lr * g）"):
        assert expected in labels, (expected, labels)


def test_few_mutants_need_a_reason(tmp_path):
    table = tmp_path / "eq.txt"
    table.write_text("6.9-1 | (few mutants) | 選択式\n6.9-2 | psum → pmean | 同じ値\n", encoding="utf-8")
    assert mutate.load_few(table) == {"6.9-1": "選択式"}
    assert mutate.load_equivalent(table) == {("6.9-2", "psum → pmean"): "同じ値"}
    outs = [mutate.Outcome(ex, f"m{k}", "fail", "") for ex, n in (("6.9-1", 3), ("6.9-2", 2), ("6.9-3", 5))
            for k in range(n)]
    assert mutate.too_few(outs, mutate.load_few(table)) == {"6.9-2": 2}
    text = mutate.report(outs, mutate.load_few(table))
    assert re.search(r"6\.9-1 +3/3 ", text) and "few mutants: 選択式" in text and "FEW MUTANTS" in text


def test_loop_vmap_matches_vmap_with_a_python_loop():
    import jax
    import jax.numpy as jnp
    import numpy as np

    W = jnp.arange(6.0).reshape(2, 3)
    xs = jnp.arange(12.0).reshape(4, 3)
    f = lambda W, x: W @ x  # noqa: E731
    np.testing.assert_allclose(mutate.loop_vmap(f, in_axes=(None, 0))(W, xs), jax.vmap(f, in_axes=(None, 0))(W, xs))
    np.testing.assert_allclose(mutate.loop_vmap(f, in_axes=(None, 1), out_axes=1)(W, xs.T),
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
    few = mutate.too_few(outcomes)
    assert not few, (f"exercises with fewer than {mutate.MIN_MUTANTS} mutants and no '(few mutants)' reason in "
                     f"tools/mutants_equivalent.txt (add operators to tools/mutate.py or give the reason): {few}\n{text}")
    counts = {ex: sum(o.status != "broken" for o in os_) for ex, os_ in mutate.per_exercise(outcomes).items()}
    stale_few = {ex for ex in mutate.load_few() if counts.get(ex, 0) >= mutate.MIN_MUTANTS}
    assert not stale_few, f"'(few mutants)' is listed for exercises that now have enough mutants: {sorted(stale_few)}"
