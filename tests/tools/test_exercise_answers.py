"""演習ノートブックは答えを見せない: 解答ブロックの中の値（in_axes、spec、返す定数など）は、
問題文に書いていないかぎり、最後のチェックより後ろのセル（まとめ）にも、出力にも現れない（issue 22 の 4）。"""
import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
BLOCK = re.compile(r"### BEGIN SOLUTION\s*\n(.*?)### END SOLUTION", re.S)
CHECK = re.compile(r"^\s*ch6\.check\(", re.M)
TRIVIAL = {"None", "True", "False", "'data'", "'model'", "()", "P()"}


def _cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _src(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _outputs(cell) -> str:
    """コードセルの出力のテキスト（演習ノートブックの出力も答えを見せない）。"""
    text = []
    for out in cell.get("outputs", []):
        for part in (out.get("text", ""), out.get("data", {}).get("text/plain", "")):
            text.append("".join(part) if isinstance(part, list) else part)
    return "".join(text)


def _norm(text: str) -> str:
    """比べやすく: 引用符をそろえ、空白を除く。"""
    return re.sub(r"\s+", "", text.replace('"', "'"))


def _literal(node) -> bool:
    """定数、定数のタプル・リスト、P(...) / PartitionSpec(...) の呼び出しだけでできた式か。"""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_literal(e) for e in node.elts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("P", "PartitionSpec"):
        return all(_literal(a) for a in node.args)
    return False


def answer_values(code: str) -> set[str]:
    """解答ブロックのコードの中の答えらしい値: 関数呼び出しのキーワード引数の値と、return する定数（の要素）。"""
    body = "def _answer():\n" + "\n".join("    " + ln for ln in __import__("textwrap").dedent(code).splitlines())
    try:
        tree = ast.parse(body)
    except SyntaxError:
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg and _literal(node.value):
            found.add(ast.unparse(node.value))
        elif isinstance(node, ast.Return) and node.value is not None:
            parts = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            if isinstance(node.value, ast.Dict):
                parts = node.value.values
            found.update(ast.unparse(p) for p in parts if _literal(p))
    return {v for v in found if v not in TRIVIAL and len(_norm(v)) >= 4}


def leaks(solution: Path, exercise: Path) -> list[str]:
    """解答の値のうち、演習の問題文にはなく、最後のチェックより後ろのセルにだけ現れるもの。"""
    answers = set()
    for cell in _cells(solution):
        if cell["cell_type"] == "code":
            for block in BLOCK.findall(_src(cell)):
                answers |= answer_values(block)
    cells = _cells(exercise)
    last = max((i for i, c in enumerate(cells) if c["cell_type"] == "code" and CHECK.search(_src(c))), default=None)
    if last is None:
        return []
    before = _norm("".join(_src(c) for c in cells[:last + 1]))
    after = _norm("".join(_src(c) for c in cells[last + 1:]) + "".join(_outputs(c) for c in cells))
    return sorted(v for v in answers if _norm(v) in after and _norm(v) not in before)


@pytest.mark.parametrize("solution", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_closing_cells_of_an_exercise_show_no_answer(solution):
    exercise = ROOT / "exercises" / solution.name
    if not exercise.exists():
        pytest.skip("no exercise notebook")
    assert leaks(solution, exercise) == [], f"{exercise.name}: the closing cells show the solution's values"


def test_the_detector_finds_an_in_axes_in_a_closing_note(tmp_path):
    # 検出器そのもの: まとめに解答の in_axes を書くと見つかり、問題文にある値は数えない
    def nb(cells):
        p = tmp_path / f"nb{len(list(tmp_path.iterdir()))}.ipynb"
        p.write_text(json.dumps({"cells": [{"cell_type": t, "source": s} for t, s in cells]}), encoding="utf-8")
        return p

    code = ("def f(xs):\n    ### BEGIN SOLUTION\n    return jax.vmap(g, in_axes=(None, 1, 0))(xs), P(None, 'data')\n"
            "    ### END SOLUTION\n\n\nch6.check('6.9-1', f)\n")
    sol = nb([("markdown", "問題: `P(None, \"data\")` で置きます。"), ("code", code)])
    told = nb([("markdown", "問題: `P(None, \"data\")` で置きます。"), ("code", "ch6.check('6.9-1', f)\n"),
               ("markdown", "まとめ: `in_axes` は（ここでは `(None, 1, 0)`）、`P(None, \"data\")` です。")])
    quiet = nb([("markdown", "問題"), ("code", "ch6.check('6.9-1', f)\n"), ("markdown", "まとめ: `in_axes` で指定します。")])
    assert leaks(sol, told) == ["(None, 1, 0)"]
    assert leaks(sol, quiet) == []
