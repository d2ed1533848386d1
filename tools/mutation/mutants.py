"""変異体を作る: セルの解答ブロックの節（と、解答を持つ関数の既定値）に演算子を 1 か所ずつ当て、解答と同じものや
前と同じものを除いた変異体のソースを返す。"""
from __future__ import annotations

import ast
import copy
import dataclasses
from collections.abc import Callable, Iterator

from .ast_edits import func_name
from .operators import OPERATORS, Context


@dataclasses.dataclass
class Site:
    """変異を入れる 1 か所。index は ast.walk の順番（コピーした木でも同じ節を指す）。"""

    index: int
    label: str
    apply: Callable  # (node) -> 置き換え後の節（None なら節をその場で変えた）
    operator: str = ""


def _in_block(node, lines: range) -> bool:
    return getattr(node, "lineno", None) in lines


def _context(tree: ast.AST, lines: range) -> tuple[Context, ast.AST | None]:
    block = [n for n in ast.walk(tree) if _in_block(n, lines)]
    axis_names = [a.value for n in block if isinstance(n, ast.Call) and func_name(n.func) in ("P", "PartitionSpec")
                  for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    has_ppermute = any(isinstance(n, ast.Call) and func_name(n.func) == "ppermute" for n in block)
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    holder = None  # 解答ブロックを持つ、いちばん内側の関数（その def の既定値も変異の対象）
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef) and n.lineno < lines.start and (n.end_lineno or 0) >= lines.stop - 1:
            if holder is None or n.lineno > holder.lineno:
                holder = n
    lowered = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in ("lower", "trace")}
    return Context(tree, lines, axis_names, has_ppermute, functions, lowered), holder


def _sites(tree: ast.AST, lines: range) -> list[Site]:
    ctx, holder = _context(tree, lines)
    sites: list[Site] = []
    for index, node in enumerate(ast.walk(tree)):
        inside = _in_block(node, lines)
        if not inside and node is not holder:
            continue
        for op in OPERATORS:
            if isinstance(node, op.nodes) and (inside or op.signature):
                sites += [Site(index, label, apply, op.name) for label, apply in op.make(node, ctx)]
    return sites


def mutants_with_lines(source: str) -> Iterator[tuple[str, str, str, int]]:
    """セルのソース -> (演算子, 説明, 変異体のソース, 変えた行のセルの中の番号)。解答と同じソースや、前と同じ変異体は作らない。"""
    lines = source.splitlines()
    begin = next(i for i, ln in enumerate(lines, 1) if "### BEGIN SOLUTION" in ln)
    end = next(i for i, ln in enumerate(lines, 1) if "### END SOLUTION" in ln)
    tree = ast.parse(source)
    seen, made = {ast.unparse(tree)}, []
    for site in _sites(tree, range(begin + 1, end)):
        new = copy.deepcopy(tree)
        node = next(n for k, n in enumerate(ast.walk(new)) if k == site.index)
        replaced = site.apply(node)
        if replaced is not None:
            _replace(new, node, replaced)
        text = ast.unparse(ast.fix_missing_locations(new))
        if text not in seen:
            seen.add(text)
            made.append((site, text))
    # 同じ説明の変異体が 2 つ以上あれば、ソースの順に 2 番目から「（k 番目）」をつける（等価変異体の表で区別できるように）
    nodes = list(ast.walk(tree))
    position = {site.index: (getattr(nodes[site.index], "lineno", 0), getattr(nodes[site.index], "col_offset", 0))
                for site, _ in made}
    number: dict[int, str] = {}
    for label in {site.label for site, _ in made}:
        same = sorted((position[site.index], k) for k, (site, _) in enumerate(made) if site.label == label)
        number.update({k: f"（{i} 番目）" for i, (_, k) in enumerate(same[1:], start=2)})
    for k, (site, text) in enumerate(made):
        yield site.operator, site.label + number.get(k, ""), text, position[site.index][0]


def mutants(source: str) -> list[tuple[str, str]]:
    """セルのソース -> [(説明, 変異体のソース)]。解答ブロックの行（と、解答を持つ関数の既定値）だけを変える。"""
    return [(label, text) for _, label, text, _ in mutants_with_lines(source)]


def mutants_by_operator(source: str) -> list[tuple[str, str, str]]:
    """セルのソース -> [(演算子の名前, 説明, 変異体のソース)]。"""
    return [(op, label, text) for op, label, text, _ in mutants_with_lines(source)]


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
