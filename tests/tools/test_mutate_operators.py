"""変異の演算子（tools/mutation/operators.py の OPERATORS。演算子は value_operators.py と means_operators.py）: どの演算子にも 1 行の説明と、変異体を作る例があること。
ここは JAX を読み込まない速いテストです（演算子が作るソースだけを見ます）。値を保つ置き換えの関数が元の演算と
同じ値を返すことと、全変異体のスコアは tests/tools/test_mutate.py（遅いテスト）が確かめます。
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import mutate  # noqa: E402
from mutation.ast_edits import dotted, replace_func, snippet  # noqa: E402


def _cell(body: str, signature: str = "def f(x, mesh, axis_name):") -> str:
    lines = "\n".join("    " + ln for ln in body.strip().splitlines())
    return f"{signature}\n    ### BEGIN SOLUTION\n{lines}\n    ### END SOLUTION\n"


# 演算子ごとに、その演算子が変異体を作る解答の例（演算子を足したら、ここにも 1 行足します）
EXAMPLES = {
    "range_bounds": "return [i for i in range(1, n)]",
    "local_reduce_swap": "return jnp.sum(x)",
    "builtin_min_max": "return max(range(3), key=lambda i: -i)",
    "drop_collective": "return lax.pmean(x, axis_name)",
    "drop_out_sharding": 'return jnp.einsum("ij,jk->ik", x, x, out_sharding=P("x"))',
    "clamp_bounds": "return jnp.minimum(1.0, x)",
    "clip_bounds": "return jnp.clip(x, 0, 7)",
    "axis_kwargs": "return jnp.sum(x, axis=(0, 1))",
    "keepdims": "return jnp.max(x, axis=1, keepdims=True)",
    "size_kwargs": "return jnp.bincount(x, length=8)",
    "tiled_flag": 'return lax.all_gather(x, "x", tiled=True)',
    "spec_entries": 'return jax.shard_map(f, mesh=mesh, in_specs=(P(), P("x")), out_specs=P())',
    "vmap_axes": "return jax.vmap(g, in_axes=(None, 0), out_axes=0)(x, x)",
    "swap_collective": 'return lax.psum(x, "x")',
    "vmap_to_loop": "return jax.vmap(g)(x)",
    "partition_spec": 'return P("data", None)',
    "axis_index_zero": 'return lax.axis_index("x")',
    "jit_per_call": "return jax.jit(g)",
    "index_shift": "return x.shape[0]",
    "ppermute_pairs": 'return lax.ppermute(x, "x", [(i, (i + 1) % n) for i in range(n)])',
    "drop_sign": "return -x",
    "update_direction": "return x - lr * g",
    "drop_division": "return x / 2",
    "drop_small_term": "return x + eps",
    "ring_direction": "return (i + shift) % n",
    "negate_compare": "return x == 0",
    "compare_strictness": "return x < n",
    "drop_jit_decorator": "@jax.jit\ndef run(a):\n    return a\nreturn run",
    "swap_return": "return x, mesh",
    "other_answer": 'return "b"',
    "dict_answers": 'return {"A": "none", "B": "all-gather"}',
    "flip_bool_return": "if abs(x) < 1:\n    return False\nreturn x > 0 and mesh",
    "drop_abs": "return jnp.abs(x) + abs(x)",
    "loop_once": "for k in range(1, n):\n    x = x + k\nwhile x > 0:\n    x = x - 1\nreturn x",
    "range_cap": "for k in range(1, n + 1):\n    x = x + k\nreturn x",
    "collective_by_gather": 'return lax.psum(x, "x")',
    "scatter_by_reduce": 'return lax.psum_scatter(x, "x", scatter_dimension=1, tiled=True)',
    "ppermute_by_gather": 'return lax.ppermute(x, "x", perm=[(0, 1), (1, 0)])',
    "all_to_all_by_gather": 'return lax.all_to_all(x, "x", 0, 1, tiled=True)',
    "gather_by_psum": 'return lax.all_gather(x, "x")',
    "vmap_to_lax_map": "return jax.vmap(g)(x)",
    "scan_to_loop": "return lax.scan(step, x, mesh)",
    "jit_static_arg": "def write(cache, slot):\n    return cache\nreturn jax.jit(write, donate_argnums=0)",
    "jit_decorator_per_call": "@jax.jit\ndef run(a):\n    return a\nreturn run",
    "default_values": "def g(a, eps=1e-5, name='x', k=2, flag=True):\n    return a\nreturn g",
}


def test_every_operator_has_a_one_line_doc_a_unique_name_and_an_example():
    names = [op.name for op in mutate.OPERATORS]
    assert len(names) == len(set(names)), names
    assert set(EXAMPLES) == set(names), (f"operators without an example here: {sorted(set(names) - set(EXAMPLES))}; "
                                         f"examples of no operator: {sorted(set(EXAMPLES) - set(names))}")
    for op in mutate.OPERATORS:
        assert op.doc and "\n" not in op.doc and op.doc.endswith("。"), op
        made = [label for name, label, _ in mutate.mutants_by_operator(_cell(EXAMPLES[op.name])) if name == op.name]
        assert made, f"{op.name}: its example makes no mutant"
    table = mutate.operator_table()
    assert all(op.name in table and op.doc in table for op in mutate.OPERATORS)


def test_an_operator_is_one_decorated_function():
    """演算子は @operator をつけた関数 1 つで足せる（登録の順に当たり、ほかの場所は変えない）。"""
    import ast

    before = list(mutate.OPERATORS)
    try:
        @mutate.operator(ast.Call)
        def swap_sqrt_for_rsqrt(node, ctx):
            """jnp.sqrt を lax.rsqrt にする。"""
            if dotted(node.func) == "jnp.sqrt":
                yield f"sqrt → rsqrt（{snippet(node)}）", replace_func("rsqrt")

        made = mutate.mutants_by_operator(_cell("return jnp.sqrt(x)"))
        assert ("swap_sqrt_for_rsqrt", "sqrt → rsqrt（jnp.sqrt(x)）") in [(op, label) for op, label, _ in made]
        assert "rsqrt(x)" in dict((label, text) for _, label, text in made)["sqrt → rsqrt（jnp.sqrt(x)）"]
    finally:
        mutate.OPERATORS[:] = before


def test_means_operators_keep_the_arguments_and_change_only_the_means():
    """値を保つ演算子は、元の引数のまま置き換えの関数（mutate.RUNTIME）を呼ぶ。"""
    src = _cell('''y = lax.psum_scatter(x @ x, "x", scatter_dimension=1, tiled=True)
z = lax.ppermute(y, "x", perm=[(i, (i + 1) % n) for i in range(n)])
m = lax.pmean(jnp.mean(z), axis_name=("host", "local"))
a = lax.all_to_all(z, "seq", split_axis=0, concat_axis=1, tiled=True)
v = jax.vmap(g, in_axes=(None, 1))(m, a)
(c, _), ys = lax.scan(step, (m, v), a)
return ys''')
    made = {label: text for _, label, text in mutate.mutants_by_operator(src)}
    want = {
        "psum_scatter → psum + 受け持つ部分の切り出し": "psum_scatter_by_psum(x @ x, 'x', scatter_dimension=1, tiled=True)",
        "psum_scatter → all_gather + 和 + 受け持つ部分の切り出し":
            "psum_scatter_by_all_gather(x @ x, 'x', scatter_dimension=1, tiled=True)",
        "ppermute → all_gather + 送信元の添字": "ppermute_by_all_gather(y, 'x', perm=",
        "pmean → all_gather + 各デバイスで平均": "pmean_by_all_gather(jnp.mean(z), axis_name=('host', 'local'))",
        "all_to_all → all_gather + 受け持つ部分の切り出し": "all_to_all_by_all_gather(z, 'seq', split_axis=0",
        "vmap → lax.map": "map_vmap(g, in_axes=(None, 1))(m, a)",
        "vmap → Python のループ": "loop_vmap(g, in_axes=(None, 1))(m, a)",
        "scan → Python のループ": "loop_scan(step, (m, v), a)",
    }
    for prefix, fragment in want.items():
        hits = [text for label, text in made.items() if label.startswith(prefix)]
        assert hits and fragment in hits[0], (prefix, list(made))
    assert set(mutate.RUNTIME) >= {"psum_scatter_by_psum", "psum_scatter_by_all_gather", "ppermute_by_all_gather",
                                   "pmean_by_all_gather", "all_to_all_by_all_gather", "map_vmap", "loop_vmap",
                                   "loop_scan", "rejit_each_call", "psum_by_all_gather", "pmax_by_all_gather",
                                   "all_gather_by_psum"}


def test_a_one_liner_with_a_default_argument_has_enough_mutants():
    """issue 34 の試し: 既定値つきの 1 行の解答でも、手段を変える変異体を含めて MIN_MUTANTS 以上になる。"""
    src = _cell('return lax.psum_scatter(x, axis_name, tiled=True) / lax.axis_size(axis_name)',
                signature='def psum_scatter_mean(x, axis_name="x"):')
    labels = [label for label, _ in mutate.mutants(src)]
    assert len(labels) >= mutate.MIN_MUTANTS, labels
    assert "既定値 axis_name='x' → ''" in labels
    assert any(label.startswith("psum_scatter → psum + 受け持つ部分の切り出し") for label in labels)
    assert any(label.startswith("psum_scatter → all_gather") for label in labels)


def test_jit_operators_retrace_on_every_call_or_make_an_argument_static():
    src = _cell('''def write(cache, kv, slot, length):
    return cache
return jax.jit(write, donate_argnums=0)''', signature="def make_write_slot():")
    made = {label: text for label, text in mutate.mutants(src)}
    assert "rejit_each_call(write, donate_argnums=0)" in made["jit を呼ぶたびに作り直す（jax.jit(write, donate_argnums=0)）"]
    assert "static_argnums=(3,)" in made["jit: 引数 length を静的にする（値ごとにコンパイル）"]
    deco = _cell("@jax.jit\ndef run(a):\n    return a\nreturn run")
    made = {label: text for label, text in mutate.mutants(deco)}
    assert "@rejit_each_call\n" in made["@jax.jit を呼ぶたびに作り直す（run）"]


def test_default_values_of_the_solution_function_are_mutation_sites_but_nothing_else_outside():
    src = _cell("return x / n", signature="def f(x, n=4, form='book', scale=1e-5, strict=True):")
    labels = [label for label, _ in mutate.mutants(src)]
    for expected in ("既定値 n=4 → 5", "既定値 form='book' → ''", "既定値 scale=1e-05 → 0.0", "既定値 strict=True → False"):
        assert expected in labels, labels
    outer = "def outer(a=1):\n    def f(x, b=2):\n        ### BEGIN SOLUTION\n        return x\n        ### END SOLUTION\n"
    assert [label for label, _ in mutate.mutants(outer)] == ["既定値 b=2 → 3"]  # 解答を持つ、いちばん内側の関数だけ


def test_a_mutant_identical_to_the_solution_is_not_made():
    """return None, None の入れ替えのように、解答と同じソースになる変異は数えない。"""
    src = _cell("if x:\n    return None, None\nreturn x, mesh")
    assert [label for label, _ in mutate.mutants(src)].count("返すタプルの順番を入れ替える") == 1


def test_bool_abs_and_loop_operators_make_the_slips_they_name():
    """真偽の取り違え、絶対値の書き忘れ、ループの中の return（1 回で抜ける）、小さな例の大きさで打ち切る探索。"""
    src = _cell('''for k in range(1, n + 1):
    if not jnp.abs(x - k) < abs(k):
        return False
for i in range(n):
    x = x + i
while x > 0:
    x = x - 1
return x > 0 and mesh''', signature="def f(x, n, mesh):")
    made = {label: text for label, text in mutate.mutants(src)}
    assert "return True" in made["return False → return True"]
    assert "return not (x > 0 and mesh)" in made["返す真偽を逆にする（x > 0 and mesh）"]
    assert "if not x - k < abs(k)" in made["絶対値を外す（jnp.abs(x - k)）"]
    assert "if not jnp.abs(x - k) < k" in made["絶対値を外す（abs(k)）"]
    assert "range(1, min(n + 1, 1 + 4))" in made["ループを 4 回で打ち切る（range(1, n + 1)）"]
    assert "range(min(n, 4))" in made["ループを 4 回で打ち切る（range(n)）"]
    once = made["ループを 1 回で抜ける（while x > 0）"]
    assert "x = x - 1\n        break" in once, once
    assert "ループを 1 回で抜ける（for k in range(1, n + 1)）" in made
    # == と != は negate_compare の変異体だけ（同じ変異を 2 度作らない）、定数の上限の range は打ち切らない
    labels = [label for label, _ in mutate.mutants(_cell("for k in range(3):\n    x = x + k\nreturn x == 0"))]
    assert not [lb for lb in labels if lb.startswith(("返す真偽", "ループを 4 回"))], labels
