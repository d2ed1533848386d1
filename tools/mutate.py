#!/usr/bin/env python3
"""チェックのミューテーションテスト: 解答例を少しずつ壊した「変異体」を作り、チェックが見抜くかを数える。

solutions/ の各ノートブックのコードセルを 1 つの名前空間で上から実行し（``ch6.check`` は何もしない）、
``### BEGIN SOLUTION`` の入ったセルごとに、解答ブロックの中だけを次の規則で 1 か所ずつ変えます。

- vmap / pmap の ``in_axes`` / ``out_axes`` の入れ替えと書き換え
- 集団演算を別のものに（psum / pmean / pmax / psum_scatter / all_gather）
- 割り算を消す、小さな定数（eps など）の足し算を消す
- ``jax.vmap`` をバッチの Python ループに置き換える
- ppermute の向き（+ と -）を逆にする、1 つ余分にずらす、``axis_index`` を 0 にする、条件（== / !=）を逆にする
- ``P(...)`` の名前を別の位置へ動かす・None にする・``P()``（複製）にする
- ``jax.jit(f)`` を呼ぶたびに作り直す、``@jax.jit`` を外す
- 返すタプルの順番を入れ替える、選択肢の答え（文字列）を別の選択肢に
- 講座で教えることに合わせた規則:
  - ``range(...)`` の端と、整数の添字（``shape[0]`` など）を 1 つずらす（off-by-one）
  - 切り詰めの境目: ``minimum`` と ``maximum`` の入れ替え、定数の境目を外す、``clip`` の上限・下限を外す、
    ``floor`` と ``ceil`` の入れ替え
  - 縮約などの ``axis=``（と ``scatter_dimension=``）を 1 つずらす・外す、軸のタプルから 1 つ落とす、``keepdims`` を外す
  - ``bins=`` / ``length=`` / ``size=`` など大きさの引数を 1 つずらす
  - ``all_gather`` / ``psum_scatter`` の ``tiled=`` を逆にする（書いていなければ ``tiled=True`` を足す）
  - ``ppermute`` の組: 送信元と送信先を入れ替える、組を 1 つ落とす
  - ``in_specs`` / ``out_specs`` の項目: 2 つの項目を入れ替える、``P()`` の項目を分割にする

変異体をセルごと実行して、登録されたチェック（``ch6.run_check``）に渡します。✅ 以外なら「見抜いた」。
見抜けなくても正しい変異体（等価変異体）は ``tools/mutants_equivalent.txt`` に理由つきで書きます。
スコア = 見抜いた数 / (全体 − 等価)。表は演習ごとに「見抜いた数 / 数えた変異体の数」を示します。
変異体が MIN_MUTANTS（5）より少ない演習は、規則を足すか、同じファイルに「演習 | (few mutants) | 理由」と書きます。

    python tools/mutate.py                  # すべての解答ノートブック（表とスコアを表示）
    python tools/mutate.py solutions/6_1_vmap.ipynb --min-score 0.95
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import dataclasses
import io
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT_FILE = ROOT / "tools" / "mutants_equivalent.txt"
COLLECTIVES = ("psum", "pmean", "pmax", "psum_scatter", "all_gather")
SWAP_TO = {"psum": ("pmean", "pmax"), "pmean": ("psum", "pmax"), "pmax": ("psum", "pmean"),
           "psum_scatter": ("psum",), "all_gather": ("psum",), "pmin": ("pmax",)}
PERM_NAMES = {"i", "me", "shift", "k", "src", "dst", "idx"}
# axis= を持つ縮約（と、軸を受け取るそのほかの演算）: 軸を 1 つずらす・外す
AXIS_KWARGS = ("axis", "scatter_dimension", "split_axis", "concat_axis")
REDUCTIONS = {"sum", "mean", "max", "min", "var", "std", "prod", "argmax", "argmin", "logsumexp", "cumsum",
              "all", "any", "median", "softmax", "log_softmax", "norm", "nansum", "nanmean", "average"}
SIZE_KWARGS = ("bins", "length", "size", "num_segments", "minlength", "num")
TILED = ("all_gather", "psum_scatter")
BOUNDS = {"minimum": "maximum", "maximum": "minimum", "floor": "ceil", "ceil": "floor"}
LOCAL_REDUCE = {"sum": "mean", "mean": "sum", "max": "min", "min": "max"}  # jnp の縮約の取り違え
DROPPABLE = ("psum", "pmean", "pmax", "pmin", "all_gather", "psum_scatter", "ppermute")  # 通信を書き忘れる
LR_NAMES = {"lr", "learning_rate", "eta"}
CHECK = re.compile(r"""ch6\.check\(\s*["']([\w.-]+)["']\s*,\s*(\w+)\s*\)""")


# ---------------------------------------------------------------- 変異の規則

@dataclasses.dataclass
class Site:
    """変異を入れる 1 か所。index は ast.walk の順番（コピーした木でも同じ節を指す）。"""

    index: int
    label: str
    apply: object  # (node) -> 置き換え後の節（None なら節をその場で変えた）


def _in_block(node, lines: range) -> bool:
    return getattr(node, "lineno", None) in lines


def _name(func) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _dotted(func) -> str:
    return ast.unparse(func)


def _sites(tree: ast.AST, lines: range) -> list[Site]:
    sites: list[Site] = []
    block = [n for n in ast.walk(tree) if _in_block(n, lines)]
    axis_names = [a.value for n in block if isinstance(n, ast.Call) and _name(n.func) in ("P", "PartitionSpec")
                  for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    has_ppermute = any(isinstance(n, ast.Call) and _name(n.func) == "ppermute" for n in block)
    for index, node in enumerate(ast.walk(tree)):
        if not _in_block(node, lines):
            continue
        if isinstance(node, ast.Call):
            sites += _taught_call_sites(index, node, axis_names[:1])
        if isinstance(node, ast.Subscript):
            sites += _index_sites(index, node)
        if has_ppermute and isinstance(node, ast.ListComp) and _is_pair(node.elt):
            sites.append(Site(index, f"ppermute の組の送信元と送信先を入れ替える（{ast.unparse(node)[:40]}）", _swap_pair))
            sites.append(Site(index, f"ppermute の組を 1 つ落とす（{ast.unparse(node)[:40]}）", _drop_last_pair))
        if isinstance(node, ast.Call):
            name = _name(node.func)
            for kw in node.keywords:
                if kw.arg in ("in_axes", "out_axes"):
                    sites += _axes_sites(index, kw)
            if name in SWAP_TO and _dotted(node.func).startswith(("lax.", "jax.lax.")):
                for other in SWAP_TO[name]:
                    sites.append(Site(index, f"{name} → {other}", _set_attr(other)))
            if _dotted(node.func) == "jax.vmap":
                sites.append(Site(index, "vmap → Python のループ", _replace_func("loop_vmap")))
            if name in ("P", "PartitionSpec") and node.args:
                sites += _spec_sites(index, node)
            if _dotted(node.func) in ("lax.axis_index", "jax.lax.axis_index"):
                sites.append(Site(index, "axis_index を 0 に（全デバイスが 0 番のつもり）", lambda n: ast.Constant(0)))
            if _dotted(node.func) == "jax.jit" and node.args:
                sites.append(Site(index, "jit を呼ぶたびに作り直す", _rejit))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Name):
            sites.append(Site(index, f"符号を外す（{ast.unparse(node)}）", lambda n: n.operand))
        elif isinstance(node, ast.BinOp):
            if (isinstance(node.op, ast.Sub) and isinstance(node.right, ast.BinOp) and isinstance(node.right.op, ast.Mult)
                    and _names(node.right) & LR_NAMES):
                sites.append(Site(index, f"更新の向きを逆にする（{ast.unparse(node)[:40]}）", _flip_sign))
            if isinstance(node.op, ast.Div):
                sites.append(Site(index, f"割り算を消す（{ast.unparse(node)[:40]}）", lambda n: n.left))
            if isinstance(node.op, ast.Add) and _small(node.right):
                sites.append(Site(index, f"小さな項を消す（{ast.unparse(node)[:40]}）", lambda n: n.left))
            if isinstance(node.op, (ast.Add, ast.Sub)) and _names(node) & PERM_NAMES:
                sites.append(Site(index, f"向きを逆にする（{ast.unparse(node)[:40]}）", _flip_sign))
                sites.append(Site(index, f"1 つ余分にずらす（{ast.unparse(node)[:40]}）",
                                  lambda n: ast.BinOp(left=n, op=ast.Add(), right=ast.Constant(1))))
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            sites.append(Site(index, f"条件を逆にする（{ast.unparse(node)[:40]}）", _negate_compare))
        elif isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                if ast.unparse(d) == "jax.jit":
                    sites.append(Site(index, f"@jax.jit を外す（{node.name}）", _drop_jit))
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) and len(node.value.elts) >= 2:
            sites.append(Site(index, "返すタプルの順番を入れ替える", _swap_return))
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for other in "abcd":
                if other != node.value.value:
                    sites.append(Site(index, f"答え {node.value.value!r} → {other!r}", _set_const(other)))
        elif isinstance(node, ast.Dict):
            values = {v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)}
            for k, v in enumerate(node.values):
                if isinstance(v, ast.Constant) and isinstance(v.value, str):
                    for other in sorted(values - {v.value}):
                        sites.append(Site(index, f"{ast.unparse(node.keys[k])}: {v.value!r} → {other!r}",
                                          _set_dict_value(k, other)))
    return sites


def _taught_call_sites(index: int, node: ast.Call, axis_names: list[str]) -> list[Site]:
    """講座で教えること（範囲、切り詰め、軸、大きさ、tiled、spec の項目）の変異。"""
    out = []
    name, text = _name(node.func), ast.unparse(node)[:40]
    if name == "range" and isinstance(node.func, ast.Name):
        which = ["終わり"] if len(node.args) == 1 else ["始まり", "終わり"]
        for i, what in enumerate(which):
            for d in (-1, 1):
                out.append(Site(index, f"range の{what}を {d:+d}（{text}）", _shift_arg(i, d)))
    numpy_call = _dotted(node.func).startswith(("jnp.", "np.", "jax.numpy."))
    if name in LOCAL_REDUCE and numpy_call:
        out.append(Site(index, f"{name} → {LOCAL_REDUCE[name]}（{text}）", _set_attr(LOCAL_REDUCE[name])))
    if name in ("max", "min") and isinstance(node.func, ast.Name) and node.args:
        other = "min" if name == "max" else "max"
        out.append(Site(index, f"組み込みの {name} → {other}（{text}）", _replace_func(other)))
    if name in DROPPABLE and _dotted(node.func).startswith(("lax.", "jax.lax.")) and node.args:
        out.append(Site(index, f"{name} を外す（通信しない）", _keep_arg(0)))
        if len(node.args) > 1 and isinstance(node.args[1], ast.Name):  # 引数で受け取った軸の名前を決め打ちにする
            out.append(Site(index, f"{name}: 軸の名前 {node.args[1].id} を決め打ちの文字列に",
                            _set_arg(1, node.args[1].id)))
    if any(kw.arg == "out_sharding" for kw in node.keywords):
        out.append(Site(index, f"{name}: out_sharding= を外す", _drop_kw("out_sharding")))
    if name in BOUNDS and numpy_call:
        out.append(Site(index, f"{name} → {BOUNDS[name]}（{text}）", _set_attr(BOUNDS[name])))
        if name in ("minimum", "maximum") and len(node.args) == 2:
            for i, a in enumerate(node.args):
                if isinstance(a, ast.Constant):  # 定数の境目を外す: minimum(1.0, r) -> r
                    out.append(Site(index, f"境目 {ast.unparse(a)} を外す（{text}）", _keep_arg(1 - i)))
    if name == "clip":
        for i, what in ((1, "下限"), (2, "上限")):
            if len(node.args) > i and not (isinstance(node.args[i], ast.Constant) and node.args[i].value is None):
                out.append(Site(index, f"clip の{what}を外す（{text}）", _set_arg(i, None)))
        for kw in node.keywords:
            if kw.arg in ("min", "max", "a_min", "a_max"):
                out.append(Site(index, f"clip の {kw.arg}= を外す（{text}）", _drop_kw(kw.arg)))
    for kw in node.keywords:
        if kw.arg in AXIS_KWARGS and (kw.arg != "axis" or name in REDUCTIONS or True):
            out += _axis_kw_sites(index, kw, name)
        if kw.arg == "keepdims" and isinstance(kw.value, ast.Constant) and kw.value.value is True:
            out.append(Site(index, f"{name}: keepdims=True を外す", _drop_kw("keepdims")))
        if kw.arg in SIZE_KWARGS:
            for d in (-1, 1):
                out.append(Site(index, f"{name}: {kw.arg} を {d:+d}", _shift_kw(kw.arg, d)))
    if name in TILED and _dotted(node.func).startswith(("lax.", "jax.lax.")):
        tiled = next((kw for kw in node.keywords if kw.arg == "tiled"), None)
        if tiled is None:
            out.append(Site(index, f"{name}: tiled=True を足す", _add_kw("tiled", True)))
        elif isinstance(tiled.value, ast.Constant) and isinstance(tiled.value.value, bool):
            out.append(Site(index, f"{name}: tiled={tiled.value.value} → {not tiled.value.value}",
                            _set_kw("tiled", not tiled.value.value)))
    for kw in node.keywords:
        if kw.arg in ("in_specs", "out_specs"):
            out += _specs_sites(index, kw, axis_names)
    return out


def _axis_kw_sites(index: int, kw: ast.keyword, name: str) -> list[Site]:
    out, v = [], kw.value
    if isinstance(v, ast.Constant) and isinstance(v.value, int) and not isinstance(v.value, bool):
        k = v.value
        for new in dict.fromkeys([k + 1, k - 1 if k > 0 else -1]):
            out.append(Site(index, f"{name}: {kw.arg}={k} → {new}", _set_kw(kw.arg, new)))
        if kw.arg == "axis" and name in REDUCTIONS:
            out.append(Site(index, f"{name}: axis={k} を外す（全体で縮約）", _drop_kw("axis")))
    elif isinstance(v, ast.Tuple) and all(isinstance(e, ast.Constant) for e in v.elts) and len(v.elts) >= 2:
        for i, e in enumerate(v.elts):
            out.append(Site(index, f"{name}: {kw.arg}={ast.unparse(v)} から {e.value} を落とす", _drop_kw_elt(kw.arg, i)))
        if name in REDUCTIONS:
            out.append(Site(index, f"{name}: {kw.arg}={ast.unparse(v)} を外す（全体で縮約）", _drop_kw(kw.arg)))
    return out


def _specs_sites(index: int, kw: ast.keyword, axis_names: list[str]) -> list[Site]:
    out, v = [], kw.value
    entries = v.elts if isinstance(v, (ast.Tuple, ast.List)) else None
    if entries:
        for i in range(len(entries)):
            for j in range(i + 1, len(entries)):
                if ast.unparse(entries[i]) != ast.unparse(entries[j]):
                    out.append(Site(index, f"{kw.arg} の {i} 番目と {j} 番目を入れ替える", _swap_kw_elts(kw.arg, i, j)))
        for i, e in enumerate(entries):
            if _is_empty_spec(e) and axis_names:
                out.append(Site(index, f"{kw.arg}[{i}]: P() → P({axis_names[0]!r})",
                                _set_kw_elt_node(kw.arg, i, _spec_call(axis_names[0]))))
    elif _is_empty_spec(v) and axis_names:
        out.append(Site(index, f"{kw.arg}: P() → P({axis_names[0]!r})", _set_kw_node(kw.arg, _spec_call(axis_names[0]))))
    return out


def _is_empty_spec(node) -> bool:
    return isinstance(node, ast.Call) and _name(node.func) in ("P", "PartitionSpec") and not node.args


def _spec_call(axis: str) -> ast.Call:
    return ast.Call(func=ast.Name("P", ast.Load()), args=[ast.Constant(axis)], keywords=[])


def _index_sites(index: int, node: ast.Subscript) -> list[Site]:
    """整数の添字を 1 つずらす（shape[0] -> shape[1] など）。負の添字と、結果が負になるものは作らない。"""
    s = node.slice
    if isinstance(s, ast.Constant) and isinstance(s.value, int) and not isinstance(s.value, bool) and s.value >= 0:
        text = ast.unparse(node)[:40]
        return [Site(index, f"添字を {d:+d}（{text}）", _shift_index(d)) for d in (-1, 1) if s.value + d >= 0]
    return []


def _is_pair(node) -> bool:
    return isinstance(node, ast.Tuple) and len(node.elts) == 2


def _swap_pair(n):
    n.elt.elts.reverse()


def _drop_last_pair(n):
    return ast.Subscript(value=n, slice=ast.Slice(upper=ast.Constant(-1)), ctx=ast.Load())


def _plus(node, d):
    return ast.BinOp(left=node, op=ast.Add() if d > 0 else ast.Sub(), right=ast.Constant(abs(d)))


def _shift_arg(i, d):
    def f(n):
        n.args[i] = _plus(n.args[i], d)
    return f


def _keep_arg(i):
    return lambda n: n.args[i]


def _shift_kw(name, d):
    def f(n):
        kw = _kw(n, name)
        kw.value = _plus(kw.value, d)
    return f


def _shift_index(d):
    def f(n):
        n.slice = ast.Constant(n.slice.value + d)
    return f


def _drop_kw(name):
    def f(n):
        n.keywords = [k for k in n.keywords if k.arg != name]
    return f


def _add_kw(name, value):
    def f(n):
        n.keywords.append(ast.keyword(arg=name, value=ast.Constant(value)))
    return f


def _drop_kw_elt(name, i):
    def f(n):
        del _kw(n, name).value.elts[i]
    return f


def _set_kw_elt_node(name, i, node):
    def f(n):
        _kw(n, name).value.elts[i] = node
    return f


def _set_kw_node(name, node):
    def f(n):
        _kw(n, name).value = node
    return f


def _small(node) -> bool:
    if isinstance(node, ast.Name) and node.id in ("eps", "epsilon"):
        return True
    return isinstance(node, ast.Constant) and isinstance(node.value, float) and 0 < abs(node.value) < 1e-2


def _names(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _axes_sites(index: int, kw: ast.keyword) -> list[Site]:
    out = []
    v = kw.value
    if isinstance(v, ast.Tuple):
        elts = v.elts
        for i in range(len(elts)):
            for j in range(i + 1, len(elts)):
                if ast.unparse(elts[i]) != ast.unparse(elts[j]):
                    out.append(Site(index, f"{kw.arg} の {i} 番目と {j} 番目を入れ替える", _swap_kw_elts(kw.arg, i, j)))
        for i, e in enumerate(elts):
            if isinstance(e, ast.Constant) and e.value in (0, 1, None):
                new = {0: None, 1: 0, None: 0}[e.value]
                out.append(Site(index, f"{kw.arg}[{i}]: {e.value} → {new}", _set_kw_elt(kw.arg, i, new)))
    elif isinstance(v, ast.Constant) and v.value in (0, 1, None):
        new = {0: 1, 1: 0, None: 0}[v.value]
        out.append(Site(index, f"{kw.arg}: {v.value} → {new}", _set_kw(kw.arg, new)))
    return out


def _spec_sites(index: int, node: ast.Call) -> list[Site]:
    out = []
    args = node.args
    for i, a in enumerate(args):
        if isinstance(a, ast.Constant) and isinstance(a.value, str):
            out.append(Site(index, f"{ast.unparse(node)}: {a.value!r} → None", _set_arg(i, None)))
            for j in range(len(args)):
                if j != i:
                    out.append(Site(index, f"{ast.unparse(node)}: {a.value!r} を {j} 番目の軸へ", _move_arg(i, j)))
            if len(args) == 1:
                out.append(Site(index, f"{ast.unparse(node)}: {a.value!r} を 1 番目の軸へ", _move_arg(0, 1)))
    if any(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in args):
        out.append(Site(index, f"{ast.unparse(node)} → P()（複製）", _clear_args))
    return out


def _set_attr(new):
    def f(n):
        n.func.attr = new
    return f


def _replace_func(name):
    def f(n):
        n.func = ast.Name(id=name, ctx=ast.Load())
    return f


def _rejit(n):
    inner = n.args[0]
    call = ast.Call(func=inner, args=[ast.Starred(value=ast.Name("a", ast.Load()), ctx=ast.Load())],
                    keywords=[ast.keyword(arg=None, value=ast.Name("k", ast.Load()))])
    lam = ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=ast.arg("a"), kwonlyargs=[], kw_defaults=[],
                                        kwarg=ast.arg("k"), defaults=[]), body=call)
    n.args[0] = lam


def _flip_sign(n):
    n.op = ast.Sub() if isinstance(n.op, ast.Add) else ast.Add()


def _negate_compare(n):
    n.ops = [ast.NotEq() if isinstance(n.ops[0], ast.Eq) else ast.Eq()]


def _drop_jit(n):
    n.decorator_list = [d for d in n.decorator_list if ast.unparse(d) != "jax.jit"]


def _swap_return(n):
    e = n.value.elts
    e[0], e[1] = e[1], e[0]


def _set_const(value):
    def f(n):
        n.value = ast.Constant(value)
    return f


def _set_dict_value(k, value):
    def f(n):
        n.values[k] = ast.Constant(value)
    return f


def _kw(n, name):
    return next(k for k in n.keywords if k.arg == name)


def _swap_kw_elts(name, i, j):
    def f(n):
        e = _kw(n, name).value.elts
        e[i], e[j] = e[j], e[i]
    return f


def _set_kw_elt(name, i, value):
    def f(n):
        _kw(n, name).value.elts[i] = ast.Constant(value)
    return f


def _set_kw(name, value):
    def f(n):
        _kw(n, name).value = ast.Constant(value)
    return f


def _set_arg(i, value):
    def f(n):
        n.args[i] = ast.Constant(value)
    return f


def _move_arg(i, j):
    def f(n):
        args = list(n.args)
        while len(args) <= j:
            args.append(ast.Constant(None))
        args[i], args[j] = args[j], args[i]
        n.args = args
    return f


def _clear_args(n):
    n.args = []


def mutants(source: str) -> list[tuple[str, str]]:
    """セルのソース -> [(説明, 変異体のソース)]。解答ブロックの行だけを変える。"""
    lines = source.splitlines()
    begin = next(i for i, ln in enumerate(lines, 1) if "### BEGIN SOLUTION" in ln)
    end = next(i for i, ln in enumerate(lines, 1) if "### END SOLUTION" in ln)
    block = range(begin + 1, end)
    tree = ast.parse(source)
    out, seen = [], set()
    for site in _sites(tree, block):
        new = copy.deepcopy(tree)
        node = next(n for k, n in enumerate(ast.walk(new)) if k == site.index)
        replaced = site.apply(node)
        if replaced is not None:
            _replace(new, node, replaced)
        text = ast.unparse(ast.fix_missing_locations(new))
        if text not in seen:
            seen.add(text)
            out.append((site.label, text))
    return out


def _replace(tree, old, new):
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list):
                for k, v in enumerate(value):
                    if v is old:
                        value[k] = new
                        return
    raise ValueError("node not found")


# ---------------------------------------------------------------- vmap の代わりの Python ループ

def loop_vmap(fn, in_axes=0, out_axes=0, **_):
    """jax.vmap と同じ結果を、バッチを 1 件ずつ Python で回して作る（チェックが見抜くべき書き方）。"""
    import jax
    import jax.numpy as jnp

    def run(*args):
        axes = in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
        sizes = [jax.tree.leaves(a)[0].shape[ax] for a, ax in zip(args, axes) if ax is not None]
        outs = []
        for b in range(sizes[0]):
            picked = [a if ax is None else jax.tree.map(lambda v, ax=ax: jnp.take(v, b, axis=ax), a)  # noqa: B023  その回のうちに使う
                      for a, ax in zip(args, axes)]
            outs.append(fn(*picked))
        return jax.tree.map(lambda *vs: jnp.stack(vs, axis=out_axes), *outs)

    return run


# ---------------------------------------------------------------- 実行

@dataclasses.dataclass
class Outcome:
    exercise: str
    label: str
    status: str
    message: str
    equivalent: str | None = None

    @property
    def killed(self) -> bool:
        return self.status != "pass"


MIN_MUTANTS = 5  # 演習ごとの最少の変異体の数（これより少ない演習は理由を書く）
FEW = "(few mutants)"  # tools/mutants_equivalent.txt で「変異体が少ない理由」を書く行の印


def _table(path: Path) -> list[tuple[str, str, str]]:
    rows = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            ex, label, reason = (part.strip() for part in line.split("|", 2))
            rows.append((ex, label, reason))
    return rows


def load_equivalent(path: Path = EQUIVALENT_FILE) -> dict[tuple[str, str], str]:
    """「演習 | 変異の説明 | 理由」の行（# から後は注釈）。変異体が少ない理由の行（FEW）は含めない。"""
    return {(ex, label): reason for ex, label, reason in _table(path) if label != FEW}


def load_few(path: Path = EQUIVALENT_FILE) -> dict[str, str]:
    """「演習 | (few mutants) | 理由」の行: 変異体が MIN_MUTANTS より少なくてよい演習と、その理由。"""
    return {ex: reason for ex, label, reason in _table(path) if label == FEW}


def per_exercise(outcomes: list[Outcome]) -> dict[str, list[Outcome]]:
    """演習ごとの結果（演習の番号の順）。"""
    from collections import defaultdict

    per = defaultdict(list)
    for o in outcomes:
        per[o.exercise].append(o)
    return {ex: per[ex] for ex in sorted(per, key=_order)}


def _order(ex: str):
    return [(0, int(x), "") if x.isdigit() else (1, 0, x) for x in re.findall(r"\d+|[a-z]+", ex)]


def too_few(outcomes: list[Outcome], few: dict[str, str] | None = None) -> dict[str, int]:
    """数えた変異体が MIN_MUTANTS より少なく、理由も書いていない演習 -> 変異体の数。"""
    few = load_few() if few is None else few
    counts = {ex: sum(o.status != "broken" for o in os_) for ex, os_ in per_exercise(outcomes).items()}
    return {ex: n for ex, n in counts.items() if n < MIN_MUTANTS and ex not in few}


def run_notebook(path: Path, equivalent: dict | None = None) -> list[Outcome]:
    """解答ノートブック 1 冊の全変異体をチェックに通す。"""
    import nbformat

    equivalent = load_equivalent() if equivalent is None else equivalent
    nb = nbformat.read(str(path), as_version=4)
    os.environ["CH6_GRADING"] = "1"  # ノートブックの ch6.check は何もしない
    ns: dict = {"__name__": "__main__"}
    results: list[Outcome] = []
    try:
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink):
            cells = [c.source for c in nb.cells if c.cell_type == "code"]
            for src in cells:
                try:
                    exec(compile(_python(src), f"<{path.name}>", "exec"), ns)
                except Exception:  # わざとエラーを出すセル（古い書き方）: 続ける
                    pass
            for src in cells:
                if "### BEGIN SOLUTION" not in src:
                    continue
                ex_id, fn_name = CHECK.search(src).groups()
                base = _run(ns, src, ex_id, fn_name)
                if base.status != "pass":
                    raise RuntimeError(f"{path.name} {ex_id}: the reference itself does not pass: {base.message}")
                for label, text in mutants(src):
                    out = _run(ns, text, ex_id, fn_name)
                    out.label = label
                    out.equivalent = equivalent.get((ex_id, label))
                    results.append(out)
    finally:
        os.environ.pop("CH6_GRADING", None)
    return results


def _python(src: str) -> str:
    """IPython のマジック（%、!）の行を取り除いた Python。"""
    return "\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!")))


def _run(ns: dict, src: str, ex_id: str, fn_name: str) -> Outcome:
    import ch6

    local = dict(ns)
    local["loop_vmap"] = loop_vmap
    try:
        exec(compile(_python(src), "<mutant>", "exec"), local)
    except Exception as exc:  # 変異体が定義の時点で壊れた（これも見抜いたことにはしない: 数えない）
        return Outcome(ex_id, "", "broken", f"{type(exc).__name__}: {exc}")
    res = ch6.run_check(ex_id, local[fn_name])
    return Outcome(ex_id, "", res.status, res.message)


def score(outcomes: list[Outcome]) -> tuple[int, int, int, float]:
    counted = [o for o in outcomes if o.status != "broken"]
    eq = [o for o in counted if not o.killed and o.equivalent]
    killed = [o for o in counted if o.killed]
    denom = len(counted) - len(eq)
    return len(killed), len(counted), len(eq), (len(killed) / denom if denom else 1.0)


def report(outcomes: list[Outcome], few: dict[str, str] | None = None) -> str:
    """演習ごとの表（見抜いた数 / 数えた変異体の数）、生き残った変異体、全体のスコア。"""
    few = load_few() if few is None else few
    lines = [f"{'exercise':10s} {'killed/total':>12s} {'survived':>8s} {'equiv':>5s} {'broken':>6s}"]
    for ex, os_ in per_exercise(outcomes).items():
        total = sum(o.status != "broken" for o in os_)
        k = sum(o.killed and o.status != "broken" for o in os_)
        e = sum((not o.killed) and bool(o.equivalent) for o in os_)
        s = sum((not o.killed) and not o.equivalent for o in os_)
        b = sum(o.status == "broken" for o in os_)
        note = ""
        if total < MIN_MUTANTS:
            note = f"  few mutants: {few[ex]}" if ex in few else f"  FEW MUTANTS (< {MIN_MUTANTS}, no reason given)"
        lines.append(f"{ex:10s} {f'{k}/{total}':>12s} {s:8d} {e:5d} {b:6d}{note}")
    for o in outcomes:
        if not o.killed and not o.equivalent:
            lines.append(f"  SURVIVED {o.exercise} | {o.label}")
    killed, total, eq, sc = score(outcomes)
    lines.append(f"mutation score: {killed}/{total - eq} = {sc:.1%} (mutants {total}, equivalent {eq})")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--min-score", type=float, default=0.95)
    args = ap.parse_args(argv)
    paths = [Path(p) for p in args.paths] or sorted((ROOT / "solutions").glob("*.ipynb"))
    outcomes = []
    for p in paths:
        outcomes += run_notebook(p)
    print(report(outcomes))
    return 0 if score(outcomes)[3] >= args.min_score and not too_few(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
