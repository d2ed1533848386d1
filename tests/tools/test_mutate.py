"""チェックのミューテーションテスト（tools/mutate.py）: 解答例を壊した変異体の 95% 以上をチェックが見抜くこと。
どの演習にも変異体が 5 つ以上あること（少ない演習は tools/mutants_equivalent.txt に理由）。集団通信や変換を指定する
演習では、値を保って手段だけを変えた変異体も見抜くこと（MEANS_REQUIRED）。値を保つ置き換えの関数が元の演算と同じ値を
返すこともここで確かめます（演算子のソースの形は tests/tools/test_mutate_operators.py）。

スコアはテストの最後の要約に表示されます（conftest.py の pytest_terminal_summary）。
"""
from __future__ import annotations

import re
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import mutate  # noqa: E402
import pytest  # noqa: E402

MIN_SCORE = 0.95
VMAP = {"vmap_to_loop", "vmap_to_lax_map"}
# 問題文が集団通信や変換（vmap・scan・1 度だけの jit）を指定する演習 -> 値を保って手段だけを変える演算子。
# どれも、その演算子の変異体が 1 つ以上作られ、チェックに落とされること（issue 34）。
MEANS_REQUIRED = {
    "6.1-1": VMAP, "6.1-2": VMAP, "6.1-3": VMAP, "6.1-4": VMAP, "6.1-5": VMAP, "6.1-6": {"collective_by_gather"},
    "6.2-1": {"collective_by_gather"}, "6.2-3": {"ppermute_by_gather"},
    "6.3b-1": {"collective_by_gather"}, "6.3b-2": {"ppermute_by_gather"}, "6.3b-3": {"collective_by_gather"},
    "6.3b-4": {"collective_by_gather"}, "6.3b-5": {"scatter_by_reduce"},
    "6.3c-1": {"collective_by_gather", "jit_per_call"}, "6.3c-2": {"collective_by_gather"},
    "6.4-1": VMAP, "6.4-2": VMAP, "6.4-3": {"scan_to_loop", "jit_decorator_per_call"},
    "6.7-2": {"scan_to_loop"}, "6.7-4": {"jit_per_call"},
    "6.8a-1": {"ppermute_by_gather"}, "6.8b-4": {"all_to_all_by_gather"},
    "6.10-3": {"collective_by_gather"}, "6.10-4": {"jit_per_call", "jit_static_arg"},
}


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
                     "vmap → Python のループ", "jit を呼ぶたびに作り直す（jax.jit(h)）", "返すタプルの順番を入れ替える",
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


def test_map_vmap_and_loop_scan_match_vmap_and_scan():
    import jax
    import jax.numpy as jnp
    import numpy as np

    W = jnp.arange(6.0).reshape(2, 3)
    xs = jnp.arange(12.0).reshape(4, 3)
    f = lambda W, x: W @ x  # noqa: E731
    np.testing.assert_allclose(mutate.map_vmap(f, in_axes=(None, 0))(W, xs), jax.vmap(f, in_axes=(None, 0))(W, xs))
    np.testing.assert_allclose(mutate.map_vmap(f, in_axes=(None, 1), out_axes=1)(W, xs.T),
                               jax.vmap(f, in_axes=(None, 1), out_axes=1)(W, xs.T))
    step = lambda c, x: (c + x.sum(), {"twice": c * 2})  # noqa: E731
    for reverse in (False, True):
        want, got = jax.lax.scan(step, 0.0, xs, reverse=reverse), mutate.loop_scan(step, 0.0, xs, reverse=reverse)
        jax.tree.map(np.testing.assert_allclose, got, want)
    assert mutate.loop_scan(lambda c, x: (c + x, None), 0.0, xs)[1] is None


def test_rejit_each_call_traces_again_on_every_call_where_jit_traces_once():
    import jax
    import jax.numpy as jnp

    traces = []

    def double(v):
        traces.append(1)
        return v * 2

    x = jnp.arange(3.0)
    once = jax.jit(double)
    once(x), once(x)
    assert len(traces) == 1
    again = mutate.rejit_each_call(double)
    again(x), again(x), again.lower(x)
    assert len(traces) == 4

    @mutate.rejit_each_call
    def donate(a, b):
        traces.append(1)
        return a + b

    assert float(donate(x, x)[1]) == 2.0 and len(traces) == 5


def test_runtime_functions_give_the_values_of_the_collectives_they_replace(n_devices):
    """値を保つ演算子の置き換え先は、shard_map・pmap・vmap（axis_name）の中で元の集団通信と同じ値を返す。"""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    n = n_devices
    mesh = jax.make_mesh((n,), ("x",))
    x = (jnp.arange(n * n * 3 * n, dtype=jnp.float32).reshape(n * n, 3 * n) % 7.0) ** 1.3

    def same(real, other, out_specs=P("x")):
        run = lambda body: jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=out_specs))(  # noqa: E731
            jax.device_put(x, NamedSharding(mesh, P("x"))))
        np.testing.assert_allclose(run(other), run(real), rtol=1e-6)

    same(lambda v: lax.psum(v, "x"), lambda v: mutate.psum_by_all_gather(v, "x"), P())
    same(lambda v: lax.pmean(v, "x"), lambda v: mutate.pmean_by_all_gather(v, "x"), P())
    same(lambda v: lax.pmax(v, "x"), lambda v: mutate.pmax_by_all_gather(v, "x"), P())
    for d in (0, 1):
        for by in (mutate.psum_scatter_by_psum, mutate.psum_scatter_by_all_gather):
            same(lambda v: lax.psum_scatter(v, "x", scatter_dimension=d, tiled=True),  # noqa: B023
                 lambda v: by(v, "x", scatter_dimension=d, tiled=True))  # noqa: B023
    perm = [(i, (i + 3) % n) for i in range(n)][: max(1, n - 1)]
    same(lambda v: lax.ppermute(v, "x", perm), lambda v: mutate.ppermute_by_all_gather(v, "x", perm))
    same(lambda v: lax.ppermute(v, "x", perm=perm), lambda v: mutate.ppermute_by_all_gather(v, "x", perm=perm))
    for split, concat in ((1, 0), (0, 1)):
        same(lambda v: lax.all_to_all(v, "x", split, concat, tiled=True),  # noqa: B023
             lambda v: mutate.all_to_all_by_all_gather(v, "x", split, concat, tiled=True))  # noqa: B023
    for axis in (0, 1):
        for tiled in (False, True):
            same(lambda v: lax.all_gather(v, "x", axis=axis, tiled=tiled)[None],  # noqa: B023
                 lambda v: mutate.all_gather_by_psum(v, "x", axis=axis, tiled=tiled)[None])  # noqa: B023
    if n % 2 == 0:  # 2 つの軸をまとめた名前
        mesh2 = jax.make_mesh((2, n // 2), ("h", "l"))
        run2 = lambda body: jax.jit(jax.shard_map(body, mesh=mesh2, in_specs=P(("h", "l")), out_specs=P()))(  # noqa: E731
            jax.device_put(x, NamedSharding(mesh2, P(("h", "l")))))
        np.testing.assert_allclose(run2(lambda v: mutate.pmean_by_all_gather(v, ("h", "l"))),
                                   run2(lambda v: lax.pmean(v, ("h", "l"))), rtol=1e-6)
    rows = jnp.arange(n * 3.0).reshape(n, 3)
    np.testing.assert_allclose(jax.pmap(lambda v: mutate.psum_by_all_gather(v, "i"), axis_name="i")(rows),
                               jax.pmap(lambda v: lax.psum(v, "i"), axis_name="i")(rows))
    np.testing.assert_allclose(jax.pmap(lambda v: mutate.ppermute_by_all_gather(v, "i", perm), axis_name="i")(rows),
                               jax.pmap(lambda v: lax.ppermute(v, "i", perm), axis_name="i")(rows))
    np.testing.assert_allclose(jax.vmap(lambda v: mutate.pmean_by_all_gather(v, "b"), axis_name="b")(rows),
                               jax.vmap(lambda v: lax.pmean(v, "b"), axis_name="b")(rows), rtol=1e-6)


def test_equivalent_list_names_real_mutants():
    table = mutate.load_equivalent()
    for (ex, label), reason in table.items():
        assert reason, f"{ex} | {label}: give a reason"


SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
at_8_devices = pytest.mark.skipif(
    __import__("jax").device_count() < mutate.SCORE_DEVICES,
    reason="the score is measured with the default 8 devices: with fewer, collectives and ring directions coincide "
           "(psum = pmean = pmax on one device, +1 = -1 on two), so those mutants are truly equivalent there")


SECONDS: dict[str, str] = {}  # 段ごとの壁時計と CPU の秒（要約に表示: CI の 2 コアで make test-mutation が何秒増えるか）


def _cpu(who) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.fixture(scope="module")
def outcomes_at_8():
    """全解答の全変異体を 8 デバイスで（このプロセスで 1 度だけ）チェックに通した結果。"""
    wall, cpu = time.perf_counter(), _cpu(resource.RUSAGE_SELF)
    outcomes = []
    for path in SOLUTIONS:
        outcomes += mutate.run_notebook(path)
    SECONDS["8"] = f"{time.perf_counter() - wall:.0f} s wall, {_cpu(resource.RUSAGE_SELF) - cpu:.0f} CPU-s"
    return outcomes


@at_8_devices
def test_mutation_score(outcomes_at_8, record_property):
    outcomes = outcomes_at_8
    killed, total, eq, score = mutate.score(outcomes)
    text = mutate.report(outcomes)
    record_property("mutation_report", text)
    assert total > 100, "too few mutants: did the operators stop matching the solutions?"
    stale = set(mutate.load_equivalent()) - {(o.exercise, o.label) for o in outcomes if not o.killed}
    assert not stale, f"tools/mutants_equivalent.txt lists mutants that no longer survive: {sorted(stale)}"
    assert score >= MIN_SCORE, text
    weak = mutate.weak_exercises(outcomes, MIN_SCORE)
    assert not weak, f"exercises whose own mutants score below {MIN_SCORE:.0%}: {weak}\n{text}"
    few = mutate.too_few(outcomes)
    assert not few, (f"exercises with fewer than {mutate.MIN_MUTANTS} mutants and no '(few mutants)' reason in "
                     f"tools/mutants_equivalent.txt (add operators to tools/mutation/value_operators.py or means_operators.py, or give the reason): {few}\n{text}")
    missing = {(ex, op) for ex, ops in MEANS_REQUIRED.items() for op in ops
               if not any(o.exercise == ex and o.operator == op and o.killed for o in outcomes)}
    assert not missing, (f"exercises whose statement requires a collective or a transform, without a killed mutant "
                         f"that keeps the values and changes the means: {sorted(missing)}\n{text}")
    counts = {ex: sum(o.status != "broken" for o in os_) for ex, os_ in mutate.per_exercise(outcomes).items()}
    stale_few = {ex for ex in mutate.load_few() if counts.get(ex, 0) >= mutate.MIN_MUTANTS}
    assert not stale_few, f"'(few mutants)' is listed for exercises that now have enough mutants: {sorted(stale_few)}"


@at_8_devices
def test_mutants_killed_at_8_devices_are_killed_at_3_and_1(outcomes_at_8, record_property):
    """8 デバイスで見抜いた変異体を、3 と 1 デバイス（1 つの数に 1 プロセス）でもう一度チェックに通す。生き残って
    よいのは、そのときの ✅ の行がその数では確かめられないと断るもの（ch6.checking.cannot_tell の句）か、
    tools/mutants_equivalent.txt に「演習 @数」でその数では等価と理由つきで書いたものだけ。"""
    killed = {(o.exercise, o.label) for o in outcomes_at_8 if o.killed and o.status != "broken"}
    wall, cpu = time.perf_counter(), _cpu(resource.RUSAGE_CHILDREN)
    at = mutate.run_at_counts(mutate.FEWER_DEVICES, SOLUTIONS, killed)
    fewer = (f"{time.perf_counter() - wall:.0f} s wall, {_cpu(resource.RUSAGE_CHILDREN) - cpu:.0f} CPU-s "
             f"(one process per count, two at a time)")
    survivors = mutate.fewer_devices_survivors(at)
    text = (mutate.fewer_devices_report(len(killed), at, survivors)
            + f"\ntime: all mutants at 8 devices {SECONDS.get('8', '?')}; killed ones at "
              f"{' and '.join(map(str, mutate.FEWER_DEVICES))} devices {fewer}")
    record_property("mutation_devices_report", text)
    for n, outcomes in at.items():
        assert {(o.exercise, o.label) for o in outcomes} == killed, f"{n} devices did not try every mutant\n{text}"
    broken = [(n, o.exercise, o.label, o.message[:200]) for n, os_ in at.items() for o in os_
              if o.status in ("internal", "broken")]
    assert not broken, f"the checker itself failed at fewer devices: {broken}\n{text}"
    surviving = {(s.outcome.exercise, s.outcome.label, s.devices) for s in survivors}
    stale = set(mutate.load_equivalent_at_fewer()) - surviving
    assert not stale, f"tools/mutants_equivalent.txt lists '@devices' mutants that are killed there: {sorted(stale)}"
    unexplained = [s for s in survivors if not s.explained]
    assert not unexplained, (
        f"mutants killed at 8 devices survive at fewer, and neither the check's ✅ line says that count cannot "
        f"tell (ch6.checking.cannot_tell) nor tools/mutants_equivalent.txt lists them as '6.N-k @n':\n{text}")


def test_fewer_devices_survivors_are_explained_by_the_pass_line_or_the_table(tmp_path):
    from ch6.checking import CANNOT_TELL

    table = tmp_path / "eq.txt"
    table.write_text("6.9-1 | psum → pmean | 同じ値\n6.9-2 @1,3 | 向きを逆にする（i + 1） | 2 個のリングでは同じ\n",
                     encoding="utf-8")
    assert mutate.load_equivalent(table) == {("6.9-1", "psum → pmean"): "同じ値"}
    assert ("6.9-2", "向きを逆にする（i + 1）") in mutate.load_equivalent(table, devices=3)
    at_fewer = mutate.load_equivalent_at_fewer(table)
    assert set(at_fewer) == {("6.9-2", "向きを逆にする（i + 1）", 1), ("6.9-2", "向きを逆にする（i + 1）", 3)}
    at = {3: [mutate.Outcome("6.9-2", "向きを逆にする（i + 1）", "pass", "正解です。", operator="ring_direction"),
              mutate.Outcome("6.9-3", "psum → pmax", "pass", f"正解です。…（デバイスが 3 個なので、x は{CANNOT_TELL}）"),
              mutate.Outcome("6.9-3", "psum → pmean", "fail", "違います")],
          1: [mutate.Outcome("6.9-4", "pmean を外す（通信しない）", "pass", "正解です。", line=7)]}
    survivors = mutate.fewer_devices_survivors(at, at_fewer)
    assert [(s.devices, s.outcome.exercise, s.why) for s in survivors] == [
        (3, "6.9-2", "equivalent"), (3, "6.9-3", "said"), (1, "6.9-4", "")]
    text = mutate.fewer_devices_report(3, at, survivors)
    assert "UNEXPLAINED  1 dev | 6.9-4 |  | line 7 | pmean を外す（通信しない）" in text, text
    assert re.search(r"6\.9-3 +1 survive at fewer devices, 0 unexplained", text), text
