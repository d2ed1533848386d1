"""節を調べる・変える小道具: 演算子（operators.py）が節を読む関数と、変異体を作る変更（節をその場で変えるか、
置き換えの節を返す関数）。"""
from __future__ import annotations

import ast
import copy

LOOP_CAP = 4  # range_cap: 探索を打ち切る回数（手元で試した小さな例の大きさ）
BOOL_CALLS = ("all", "any", "isinstance", "callable", "hasattr", "bool")  # 真偽を返す組み込み


def func_name(func) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def dotted(func) -> str:
    return ast.unparse(func)


def snippet(node) -> str:
    return ast.unparse(node)[:40]


def is_lax(func) -> bool:
    return dotted(func).startswith(("lax.", "jax.lax."))


def is_numpy(func) -> bool:
    return dotted(func).startswith(("jnp.", "np.", "jax.numpy."))


def kw_true(node, name) -> bool:
    return any(kw.arg == name and isinstance(kw.value, ast.Constant) and kw.value.value is True
               for kw in node.keywords)


def pairs(elts):
    for i in range(len(elts)):
        for j in range(i + 1, len(elts)):
            if ast.unparse(elts[i]) != ast.unparse(elts[j]):
                yield i, j


def is_empty_spec(node) -> bool:
    return isinstance(node, ast.Call) and func_name(node.func) in ("P", "PartitionSpec") and not node.args


def spec_call(axis: str) -> ast.Call:
    return ast.Call(func=ast.Name("P", ast.Load()), args=[ast.Constant(axis)], keywords=[])


def is_pair(node) -> bool:
    return isinstance(node, ast.Tuple) and len(node.elts) == 2


def small(node) -> bool:
    if isinstance(node, ast.Name) and node.id in ("eps", "epsilon"):
        return True
    return isinstance(node, ast.Constant) and isinstance(node.value, float) and 0 < abs(node.value) < 1e-2


def names(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def find_kw(n, name):
    return next(k for k in n.keywords if k.arg == name)


def plus(node, d):
    return ast.BinOp(left=node, op=ast.Add() if d > 0 else ast.Sub(), right=ast.Constant(abs(d)))


def swap_pair(n):
    n.elt.elts.reverse()


def drop_last_pair(n):
    return ast.Subscript(value=n, slice=ast.Slice(upper=ast.Constant(-1)), ctx=ast.Load())


def shift_arg(i, d):
    def f(n):
        n.args[i] = plus(n.args[i], d)
    return f


def keep_arg(i):
    return lambda n: n.args[i]


def set_arg(i, value):
    def f(n):
        n.args[i] = ast.Constant(value)
    return f


def move_arg(i, j):
    def f(n):
        args = list(n.args)
        while len(args) <= j:
            args.append(ast.Constant(None))
        args[i], args[j] = args[j], args[i]
        n.args = args
    return f


def clear_args(n):
    n.args = []


def shift_kw(name, d):
    def f(n):
        kw = find_kw(n, name)
        kw.value = plus(kw.value, d)
    return f


def shift_index(d):
    def f(n):
        n.slice = ast.Constant(n.slice.value + d)
    return f


def drop_kw(name):
    def f(n):
        n.keywords = [k for k in n.keywords if k.arg != name]
    return f


def add_kw(name, value):
    return add_kw_node(name, ast.Constant(value))


def add_kw_node(name, node):
    def f(n):
        n.keywords.append(ast.keyword(arg=name, value=node))
    return f


def set_kw(name, value):
    return set_kw_node(name, ast.Constant(value))


def set_kw_node(name, node):
    def f(n):
        find_kw(n, name).value = node
    return f


def drop_kw_elt(name, i):
    def f(n):
        del find_kw(n, name).value.elts[i]
    return f


def set_kw_elt(name, i, value):
    return set_kw_elt_node(name, i, ast.Constant(value))


def set_kw_elt_node(name, i, node):
    def f(n):
        find_kw(n, name).value.elts[i] = node
    return f


def swap_kw_elts(name, i, j):
    def f(n):
        e = find_kw(n, name).value.elts
        e[i], e[j] = e[j], e[i]
    return f


def set_attr(new):
    def f(n):
        n.func.attr = new
    return f


def replace_func(name):
    def f(n):
        n.func = ast.Name(id=name, ctx=ast.Load())
    return f


def flip_sign(n):
    n.op = ast.Sub() if isinstance(n.op, ast.Add) else ast.Add()


def swap_eq(n):
    n.ops = [ast.NotEq() if isinstance(n.ops[0], ast.Eq) else ast.Eq()]


STRICTNESS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}


def flip_strictness(n):
    n.ops = [STRICTNESS[type(n.ops[0])]()]


def is_bool_expr(node) -> bool:
    """Python の真偽を返す式（比較、and / or、not、all / any など）。== と != だけの比較は negate_compare が逆にする。"""
    if isinstance(node, ast.Compare):
        return not (len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)))
    if isinstance(node, ast.BoolOp) or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)):
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BOOL_CALLS


def negate_return(n):
    n.value = ast.UnaryOp(op=ast.Not(), operand=n.value)


def loop_text(node) -> str:
    head = (f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}" if isinstance(node, ast.For)
            else f"while {ast.unparse(node.test)}")
    return head[:40]


def append_break(n):
    n.body.append(ast.Break())


def cap_range(n):
    """range(stop) → range(min(stop, LOOP_CAP))、range(start, stop) → range(start, min(stop, start + LOOP_CAP))。"""
    args = n.iter.args
    cap = (ast.Constant(LOOP_CAP) if len(args) == 1
           else ast.BinOp(left=copy.deepcopy(args[0]), op=ast.Add(), right=ast.Constant(LOOP_CAP)))
    args[-1] = ast.Call(func=ast.Name("min", ast.Load()), args=[args[-1], cap], keywords=[])


def drop_jit(n):
    n.decorator_list = [d for d in n.decorator_list if ast.unparse(d) != "jax.jit"]


def per_call_decorator(n):
    n.decorator_list = [ast.Name("rejit_each_call", ast.Load()) if ast.unparse(d) == "jax.jit" else d
                        for d in n.decorator_list]


def swap_returned(n):
    e = n.value.elts
    e[0], e[1] = e[1], e[0]


def set_const(value):
    def f(n):
        n.value = ast.Constant(value)
    return f


def set_dict_value(k, value):
    def f(n):
        n.values[k] = ast.Constant(value)
    return f


def set_default(field, i, value):
    def f(n):
        getattr(n.args, field)[i] = ast.Constant(value)
    return f

