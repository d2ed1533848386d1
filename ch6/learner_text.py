"""学習者が読む文字列を取り出す（用語の走査 ch6.glossary と文の長さ ch6.sentences が使う）。

学習者が読む文字列: マークダウン、コードのコメント、コードの中の文字列リテラル（日本語を含むもの）、保存済みの
テキスト出力、ch6/checks/**・ch6/explain.py などのメッセージ（f 文字列は {式} のままテンプレートとして）、
ch6/draw/** の図のタイトル・ラベル・凡例、README。どれも (行番号, 文字列) の並び（行番号は 1 から）。
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JA = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")

_COMMENT = re.compile(r"#(?!\s*(?:noqa|type:))(.*)$")
_MAGIC = re.compile(r"^\s*[%!]")


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                ids.add(id(first.value))
    return ids


def _template(node: ast.JoinedStr) -> str:
    """f 文字列をテンプレートとして: 式の部分は {式} のまま。"""
    out = []
    for v in node.values:
        if isinstance(v, ast.Constant):
            out.append(str(v.value))
        elif isinstance(v, ast.FormattedValue):
            out.append("{" + ast.unparse(v.value) + "}")
    return "".join(out)


def strings(src: str, *, docstrings: bool = False) -> list[tuple[int, str]]:
    """Python のコードの、日本語を含む文字列リテラル（f 文字列はテンプレート）。"""
    try:
        tree = ast.parse("\n".join("" if _MAGIC.match(ln) else ln for ln in src.splitlines()))
    except SyntaxError:
        return [(i, m.group(0)) for i, ln in enumerate(src.splitlines(), 1)
                for m in re.finditer(r"\"[^\"]*\"|'[^']*'", ln) if JA.search(m.group(0))]
    skip = set() if docstrings else _docstrings(tree)
    inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip | inner:
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = _template(node)
        else:
            continue
        if JA.search(text):
            out.append((node.lineno, text))
    return sorted(out)


def comments(src: str) -> list[tuple[int, str]]:
    out = []
    for i, line in enumerate(src.splitlines(), 1):
        quoted = re.sub(r"(\"[^\"]*\"|'[^']*')", "", line)  # 文字列の中の # はコメントではない
        m = _COMMENT.search(quoted)
        if m:
            out.append((i, m.group(1)))
    return out


def code_texts(src: str) -> list[tuple[int, str]]:
    """コードセルのうち学習者が読むもの: コメントと、日本語を含む文字列リテラル（docstring も。ノートブックの関数の
    docstring は学習者がセルの中で読む）。"""
    return sorted(comments(src) + strings(src, docstrings=True))


def myst_texts(md: str, *, code: bool = True, reader=code_texts, paragraphs: bool = True) -> list[tuple[int, str]]:
    """MyST の双子（X.md）から: マークダウンは段落ごと（paragraphs=False なら読まない）、コードセルは reader が
    返すもの（既定はコメントと文字列。code=False なら読まない）。"""
    lines = md.splitlines()
    out, i = [], 0
    if lines and lines[0] == "---":  # jupytext のヘッダ
        i = lines.index("---", 1) + 1
    para, start = [], i + 1
    while i < len(lines):
        line = lines[i]
        if line.startswith("```{code-cell}"):
            if para and paragraphs:
                out.append((start, "\n".join(para)))
                para = []
            j = i + 1
            if j < len(lines) and lines[j] == "---":  # セルのメタデータ
                j = lines.index("---", j + 1) + 1
            while j < len(lines) and lines[j].startswith(":"):
                j += 1
            end = j
            while end < len(lines) and lines[end] != "```":
                end += 1
            if code:
                out += [(j + 1 + n - 1, t) for n, t in reader("\n".join(lines[j:end]))]
            i, start = end + 1, end + 2
            continue
        if line.startswith("+++") or not line.strip():
            if para and paragraphs:
                out.append((start, "\n".join(para)))
            para, start = [], i + 2
        else:
            para.append(line)
        i += 1
    if para and paragraphs:
        out.append((start, "\n".join(para)))
    return out


def outputs_texts(txt: str) -> list[tuple[int, str]]:
    """X.outputs.txt の出力の行（セルの見出しの行は除く: そこにあるのはソースの 1 行目）。"""
    return [(i, ln) for i, ln in enumerate(txt.splitlines(), 1)
            if i > 1 and not ln.startswith("--- コードセル") and ln.strip()]


def _cell_source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _output_text(out: dict) -> str:
    if out.get("output_type") == "stream":
        t = out.get("text", "")
    else:
        t = out.get("data", {}).get("text/plain", "")
    return "".join(t) if isinstance(t, list) else t


def prose(nb: dict) -> list[tuple[int, str]]:
    """ノートブック（JSON の dict）で学習者が読む文字列: マークダウン、コメント、文字列リテラル、保存済みの出力。
    (セル番号, 文字列)。"""
    out = []
    for i, cell in enumerate(nb.get("cells", [])):
        src = _cell_source(cell)
        if cell.get("cell_type") == "markdown":
            out.append((i, src))
        elif cell.get("cell_type") == "code":
            out += [(i, t) for _, t in code_texts(src)]
            out += [(i, _output_text(o)) for o in cell.get("outputs", []) if _output_text(o)]
    return out



def rel(p: Path) -> str:
    """ROOT からの相対パス（ROOT の外ならそのまま）。"""
    try:
        return p.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return p.as_posix()


def twin(p: Path) -> Path | None:
    """ノートブックの MyST の双子 X.md（.ipynb と .md の両方があるときだけ）。"""
    md = p.with_suffix(".md")
    return md if p.suffix in (".ipynb", ".md") and md.exists() and p.with_suffix(".ipynb").exists() else None


def generated_from(p: Path) -> Path | None:
    """exercises/X.ipynb は solutions/X.md（著者が編集するもの）から作られる。その .md（なければ None）。"""
    md = p.parent.parent / "solutions" / f"{p.stem}.md"
    return md if p.parent.name == "exercises" and md.exists() else None



def japanese_part(p: Path, text: str) -> str:
    """README の日本語の部分（「## English」の節より前）。ほかのファイルは全体。用語集の決まりは日本語の文の決まり。"""
    return text.split("\n## English", 1)[0] if p.name == "README.md" else text



# 学習者が読む文字列のあるファイル（用語集自身・採点の内部・テストは除く）
LEARNER_GLOBS = ("notebooks/*.ipynb", "solutions/*.ipynb", "exercises/*.ipynb", "README.md", "docs/*.md", "site/*.md",
                 "ch6/checks/**/*.py", "ch6/draw/**/*.py", "ch6/multihost/**/*.py", "ch6/grading/*.py", "ch6/*.py")
# docs/accelerator.md は tools/accelerator.py が書く記録（英語、著者向け。日本語は本編の出力の写し）
NOT_LEARNER = {"ch6/glossary.py", "ch6/learner_text.py", "ch6/sentences.py", "ch6/sanitize.py", "ch6/nbrun.py",
               "ch6/grade.py", "docs/accelerator.md"}


def learner_files(root: Path = ROOT) -> list[Path]:
    seen, out = set(), []
    for g in LEARNER_GLOBS:
        for p in sorted(root.glob(g)):
            rel = p.relative_to(root).as_posix()
            if rel not in NOT_LEARNER and rel not in seen:
                seen.add(rel)
                out.append(p)
    return out


def expand(args: list[str]) -> list[Path]:
    """コマンドラインのファイル・フォルダを、調べるファイルの並びにする（ノートブックと双子は 1 つ）。"""
    out, seen = [], set()
    for a in args:
        p = Path(a)
        paths = sorted([*p.rglob("*.ipynb"), *p.rglob("*.py")]) if p.is_dir() else [p]
        for q in paths:
            key = (q.with_suffix("") if twin(q) else q).resolve()
            if key not in seen:
                seen.add(key)
                out.append(q)
    return out



# ---- つないだ文字列の継ぎ目（issue 46）: "… w と" "KV …" は「w とKV」と表示される

_KANA_KANJI = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
_ASCII = re.compile(r"[A-Za-z0-9`]")  # {式} は値しだいなので見ない


def _pieces(src: str) -> list[tuple[int, int, str]]:
    """文字列リテラルの 1 つ 1 つ（f 文字列も 1 つ）: (行, その前の字句の番号, 引用符の中のソース)。"""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    lines = src.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))
    pos = lambda rc: starts[rc[0] - 1] + rc[1]  # noqa: E731
    out, depth, begin, k = [], 0, None, 0
    fstart = getattr(tokenize, "FSTRING_START", None)
    fend = getattr(tokenize, "FSTRING_END", None)
    for tok in toks:
        if tok.type in (tokenize.NL, tokenize.COMMENT):
            continue
        k += 1
        if fstart is not None and tok.type == fstart:
            depth += 1
            if depth == 1:
                begin = tok
            continue
        if fend is not None and tok.type == fend:
            depth -= 1
            if depth == 0:
                out.append((begin.start[0], k, src[pos(begin.start):pos(tok.end)]))
            continue
        if depth == 0 and tok.type == tokenize.STRING:
            out.append((tok.start[0], k, tok.string))
    return [(line, k, m.group(2)) for line, k, s in out
            for m in [re.match(r"^[rRbBfFuU]*(\"\"\"|\'\'\'|\"|\')(.*)\1$", s, re.S)] if m]


def string_joins(src: str) -> list[tuple[int, str]]:
    """隣り合う文字列リテラル（暗黙の連結）の継ぎ目で、かな・漢字と英数字が空白なしに続くところ。
    (継ぎ目の後ろの行, 継ぎ目の前後 「…w と|KV…」)。"""
    found = []
    pieces = _pieces(src)
    for (_, ka, a), (line, kb, b) in zip(pieces, pieces[1:]):
        if kb != ka + 1 or not a or not b or re.search(r"\\.$", a):
            continue
        if (_KANA_KANJI.match(a[-1]) and _ASCII.match(b[0])) or (_ASCII.match(a[-1]) and _KANA_KANJI.match(b[0])):
            found.append((line, f"{a[-12:]}|{b[:12]}"))
    return found


# ---- f 文字列の {式} の継ぎ目（issue 46、editor2_b K2）: f"{what}は" の what が英字で終われば「accumulated_value_and_gradは」。
# {式} の値はふつう分からないので、英数字で表示されると分かる式だけを見る: 数の書式（{x:g}）・repr（{x!r}）・型の名前
# （{type(x).__name__}）・数を返す関数（len, fmt など）・文字列の定数。名前（{what}）は、同じ関数の中の代入と、同じ
# フォルダのファイルの呼び出しで渡された文字列（"accumulated_value_and_grad"）から値の端を読む。分からない式は見ない
# （{sep(what)} のように空白を足す関数も）。

_ASCII_CALLS = {"len", "int", "float", "round", "repr", "hex", "abs", "sum", "min", "max", "fmt", "id"}
_ASCII_ATTRS = {"__name__", "shape", "dtype", "ndim", "size", "nbytes", "id", "process_index", "spec"}
_EDGE_ASCII = re.compile(r"[A-Za-z0-9_]")
_SEAM_JA = re.compile(r"[\u3040-\u30fa\u30fc-\u30ff\u3400-\u9fff]")  # かな・漢字（中黒 ・ は区切りなので除く）


class _Funcs:
    """フォルダの中の関数の定義（名前 -> 引数の名前の並び）と呼び出し（名前 -> [ast.Call]）。"""

    def __init__(self, trees: list[ast.AST]):
        self.params: dict[str, list[str]] = {}
        self.calls: dict[str, list[ast.Call]] = {}
        for tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.params.setdefault(node.name, [a.arg for a in node.args.posonlyargs + node.args.args]
                                           + [a.arg for a in node.args.kwonlyargs])
                elif isinstance(node, ast.Call):
                    f = node.func
                    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                    if name:
                        self.calls.setdefault(name, []).append(node)

    def arguments(self, func: str, param: str) -> list[ast.AST]:
        names = self.params.get(func)
        if not names or param not in names:
            return []
        i = names.index(param)
        out = []
        for call in self.calls.get(func, []):
            if i < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[:i + 1]):
                out.append(call.args[i])
            out += [k.value for k in call.keywords if k.arg == param]
        return out


def _edges(node: ast.AST, side: int, scope, funcs: _Funcs, depth: int = 0) -> set[str]:
    """式の値の端（side=-1 は最後、0 は最初）の文字の種類: "ascii"・"other"。分からなければ空。"""
    if depth > 4:
        return set()
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            if not node.value:
                return set()
            return {"ascii" if _EDGE_ASCII.match(node.value[side]) else "other"}
        return {"ascii"} if isinstance(node.value, (int, float)) and not isinstance(node.value, bool) else set()
    if isinstance(node, ast.JoinedStr):
        parts = node.values if side == 0 else node.values[::-1]
        for v in parts:
            if isinstance(v, ast.Constant) and v.value == "":
                continue
            return _edges(v, side, scope, funcs, depth + 1)
        return set()
    if isinstance(node, ast.FormattedValue):
        if node.conversion in (ord("r"), ord("a")) or node.format_spec is not None:
            return {"ascii"}
        return _edges(node.value, side, scope, funcs, depth + 1)
    if isinstance(node, ast.IfExp):
        return _edges(node.body, side, scope, funcs, depth + 1) | _edges(node.orelse, side, scope, funcs, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _edges(node.left if side == 0 else node.right, side, scope, funcs, depth + 1)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _ASCII_CALLS:
        return {"ascii"}
    if isinstance(node, ast.Attribute) and node.attr in _ASCII_ATTRS:
        return {"ascii"}
    if isinstance(node, ast.Name) and scope is not None:
        found = set()
        body = scope.body if isinstance(scope, ast.Module) else ast.walk(scope)  # モジュールでは一番外の代入だけ
        assigned = [n.value for n in body if isinstance(n, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == node.id for t in n.targets)]
        for value in assigned:
            found |= _edges(value, side, scope, funcs, depth + 1)
        if not assigned and isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for arg in funcs.arguments(scope.name, node.id):
                found |= _edges(arg, side, None, funcs, depth + 1)
        return found
    return set()


def fstring_seams(src: str, others: tuple[str, ...] = ()) -> list[tuple[int, str]]:
    """f 文字列の {式} と、かな・漢字が空白なしに続くところ（式の値が英数字で終わる・始まると分かるときだけ）。
    others は同じフォルダのほかのファイルのソース（そこからの呼び出しで渡された文字列も読む）。
    (行, 「{what}|は」の形の継ぎ目)。"""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return []
    trees = [tree]
    for other in others:
        try:
            trees.append(ast.parse(other))
        except SyntaxError:
            pass
    funcs = _Funcs(trees)
    scopes = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(fn):
                scopes[id(n)] = fn  # 入れ子の関数では内側が後から上書きする
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.JoinedStr):
            continue
        vals = node.values
        for a, b in zip(vals, vals[1:]):
            if isinstance(a, ast.FormattedValue) and isinstance(b, ast.Constant) and b.value:
                expr, text, side = a, b.value, -1
                if not _SEAM_JA.match(text[0]):
                    continue
            elif isinstance(a, ast.Constant) and isinstance(b, ast.FormattedValue) and a.value:
                expr, text, side = b, a.value, 0
                if not _SEAM_JA.match(text[-1]):
                    continue
            else:
                continue
            if "ascii" in _edges(expr, side, scopes.get(id(node), tree), funcs):
                shown = "{" + ast.unparse(expr.value) + "}"
                seam = f"{shown}|{text[:6]}" if side == -1 else f"{text[-6:]}|{shown}"
                found.append((node.lineno, seam))
    return sorted(set(found))
