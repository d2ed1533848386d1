"""講座の用語集（ch6/glossary.toml が正本）と、学習者が読む文字列から使わない言い方を見つける関数。

    python -m ch6.glossary                           # 用語集を Markdown で表示
    python -m ch6.glossary --write GLOSSARY.md       # リポジトリの GLOSSARY.md を作り直す
    python -m ch6.glossary --scan                    # 学習者が読むすべての文字列を調べる
    python -m ch6.glossary --scan notebooks/6_1_vmap.md ch6/checks/s6_1   # ファイル・フォルダを指定して調べる
    python -m ch6.glossary --long                    # 100 文字を超える文の一覧（120 文字を超える文は !! で、終了コード 1）

学習者が読む文字列: マークダウン、コードのコメント、コードの中の文字列リテラル（日本語を含むもの）、保存済みの
テキスト出力、ch6/checks/**・ch6/explain.py などのメッセージ（f 文字列は {式} のままテンプレートとして）、
ch6/draw/** の図のタイトル・ラベル・凡例、README。ノートブックに MyST の双子（X.md、X.outputs.txt）があれば
その行番号で報告します。
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import json
import re
import sys
import tomllib
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_JA = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")


@dataclasses.dataclass(frozen=True)
class Term:
    ja: str
    en: str
    definition: str
    api: str = ""
    gloss: bool = False


@dataclasses.dataclass(frozen=True)
class Rejected:
    pattern: str
    use: str
    allow: str = ""
    shown: str = ""  # GLOSSARY.md に載せる読みやすい形（省くと pattern から作る）
    issue: str = ""  # その規則を決めた issue（"39" の規則の当たりは、担当者が直すまでテストが一部のファイルでだけ許す）

    def matches(self, text: str) -> list[tuple[int, str, str]]:
        """(位置, 引っかかった語, 前後の文) の並び。allow が前後 20 文字に見つかれば除く。"""
        hits = []
        for m in re.finditer(self.pattern, text):
            around = text[max(0, m.start() - 20): m.end() + 20]
            if self.allow and re.search(self.allow, around):
                continue
            hits.append((m.start(), m.group(0), around.replace("\n", " ")))
        return hits

    def find(self, text: str) -> list[str]:
        return [around for _, _, around in self.matches(text)]


@dataclasses.dataclass(frozen=True)
class Hit:
    where: str  # "notebooks/6_1_vmap.md:15" や "セル 3"
    word: str
    around: str
    use: str
    issue: str = ""

    def __str__(self) -> str:
        return f"{self.where}: 「{self.word}」（…{self.around.strip()}…） → {self.use}"


@functools.cache
def _data() -> dict:
    return tomllib.loads(resources.files(__package__).joinpath("glossary.toml").read_text(encoding="utf-8"))


def terms() -> list[Term]:
    return [Term(**t) for t in _data()["term"]]


def rejected() -> list[Rejected]:
    return [Rejected(**r) for r in _data()["rejected"]]


def rules() -> list[dict]:
    """表記の決まり（[[rule]]: title と text）。"""
    return list(_data().get("rule", []))


def markdown() -> str:
    """用語集を Markdown の表にする（GLOSSARY.md の中身）。"""
    lines = [
        "# 用語集 / Glossary",
        "",
        "講座のノートブックはこの用語だけを使います。正本は `ch6/glossary.toml` で、このファイルはそこから",
        "`python -m ch6.glossary --write GLOSSARY.md` で作ります。各ノートブックで初めて使うところでは英語を 1 度添えます。",
        "",
        "| 用語 | English | API | 定義 |",
        "|---|---|---|---|",
    ]
    for t in terms():
        api = f"`{t.api}`" if t.api else ""
        lines.append(f"| {t.ja} | {t.en} | {api} | {t.definition} |")
    if rules():
        lines += ["", "## 表記の決まり / Writing rules", ""]
        for r in rules():
            lines.append(f"- **{r['title']}** {r['text']}")
    lines += ["", "## 使わない言い方 / Rejected variants", "", "| 使わない | 代わりに |", "|---|---|"]
    for r in rejected():
        shown = r.shown or r.pattern.replace("\\\\", "\\").replace("|", " / ").replace("\\d+\\s*", "N ").replace("\\s*", " ")
        lines.append(f"| {shown} | {r.use} |")
    return "\n".join(lines) + "\n"


# ---- 学習者が読む文字列を取り出す。どれも (行番号, 文字列) の並び（行番号は 1 から） ----

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


def _strings(src: str, *, docstrings: bool = False) -> list[tuple[int, str]]:
    """Python のコードの、日本語を含む文字列リテラル（f 文字列はテンプレート）。"""
    try:
        tree = ast.parse("\n".join("" if _MAGIC.match(ln) else ln for ln in src.splitlines()))
    except SyntaxError:
        return [(i, m.group(0)) for i, ln in enumerate(src.splitlines(), 1)
                for m in re.finditer(r"\"[^\"]*\"|'[^']*'", ln) if _JA.search(m.group(0))]
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
        if _JA.search(text):
            out.append((node.lineno, text))
    return sorted(out)


def _comments(src: str) -> list[tuple[int, str]]:
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
    return sorted(_comments(src) + _strings(src, docstrings=True))


def myst_texts(md: str, *, code: bool = True) -> list[tuple[int, str]]:
    """MyST の双子（X.md）から: マークダウンは段落ごと、コードセルはコメントと文字列（code=False なら読まない）。"""
    lines = md.splitlines()
    out, i = [], 0
    if lines and lines[0] == "---":  # jupytext のヘッダ
        i = lines.index("---", 1) + 1
    para, start = [], i + 1
    while i < len(lines):
        line = lines[i]
        if line.startswith("```{code-cell}"):
            if para:
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
                out += [(j + 1 + n - 1, t) for n, t in code_texts("\n".join(lines[j:end]))]
            i, start = end + 1, end + 2
            continue
        if line.startswith("+++") or not line.strip():
            if para:
                out.append((start, "\n".join(para)))
            para, start = [], i + 2
        else:
            para.append(line)
        i += 1
    if para:
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


def _check(texts, where) -> list[Hit]:
    found = []
    for key, text in texts:
        for r in rejected():
            for pos, word, around in r.matches(text):
                found.append(Hit(where(key, text[:pos].count("\n")), word, around, r.use, r.issue))
    return found


def scan(nb: dict) -> list[str]:
    """使わない言い方の一覧（"セル 12: 「語」（…前後…） → 代わりに …"）。"""
    return [str(h) for h in _check(prose(nb), lambda cell, _: f"セル {cell}")]


def scan_text(text: str) -> list[str]:
    """1 つの文（マークダウンとして）を調べる。テスト用。"""
    return [str(h) for h in _check([(1, text)], lambda line, dl: f"{line + dl} 行")]


def _rel(p: Path) -> str:
    try:
        return p.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return p.as_posix()


def _twin(p: Path) -> Path | None:
    md = p.with_suffix(".md")
    return md if p.suffix in (".ipynb", ".md") and md.exists() and p.with_suffix(".ipynb").exists() else None


def _generated_from(p: Path) -> Path | None:
    """exercises/X.ipynb は solutions/X.md（著者が編集するもの）から作られる。その .md（なければ None）。"""
    md = p.parent.parent / "solutions" / f"{p.stem}.md"
    return md if p.parent.name == "exercises" and md.exists() else None


def _in_source(hit: Hit, source: Path) -> Hit:
    """生成されたノートブックの当たりを、同じ語と前後の文がある source の行で示す（見つからなければそのまま）。"""
    text = source.read_text(encoding="utf-8")
    for m in re.finditer(re.escape(hit.word), text):
        around = text[max(0, m.start() - 40): m.end() + 40].replace("\n", " ")
        if hit.around in around:  # ノートブックの前後の文はセルの端で切れるので、.md の前後の文の一部
            line = text[:m.start()].count("\n") + 1
            return dataclasses.replace(hit, where=f"{_rel(source)}:{line}（{hit.where}）")
    return hit


def scan_file(p: Path) -> list[Hit]:
    """1 つのファイルを調べる。ノートブックに双子があれば .md と .outputs.txt の行で報告する。"""
    twin = _twin(p)
    if twin is not None:
        hits = _check(myst_texts(twin.read_text(encoding="utf-8")), lambda n, dl: f"{_rel(twin)}:{n + dl}")
        outs = p.with_suffix(".outputs.txt")
        if outs.exists():
            hits += _check(outputs_texts(outs.read_text(encoding="utf-8")), lambda n, dl: f"{_rel(outs)}:{n + dl}")
        return hits
    if p.suffix == ".ipynb":
        hits = _check(prose(json.loads(p.read_text(encoding="utf-8"))), lambda c, _: f"{_rel(p)} セル {c}")
        source = _generated_from(p)
        return [_in_source(h, source) for h in hits] if source else hits
    text = p.read_text(encoding="utf-8")
    if p.suffix == ".py":
        return _check(_strings(text), lambda n, dl: f"{_rel(p)}:{n + dl}")
    return _check([(1, japanese_part(p, text))], lambda n, dl: f"{_rel(p)}:{n + dl}")


def japanese_part(p: Path, text: str) -> str:
    """README の日本語の部分（「## English」の節より前）。ほかのファイルは全体。用語集の決まりは日本語の文の決まり。"""
    return text.split("\n## English", 1)[0] if p.name == "README.md" else text


# ---- 文の長さ: 学習者が読む文を、表示されるとおりの文字数で測る（issue 39: 120 文字を超える文は直す）

LONG, TOO_LONG = 100, 120
_FIELD = "〇〇〇〇"  # f 文字列の {式} は 4 文字と数える（値の長さはチェックを実行するまで分からない）
_WIDE = "\u3000-\u30ff\u3400-\u9fff\uff00-\uffef"
_ITEM = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
_OPEN, _CLOSE = "「『（", "」』）"


@dataclasses.dataclass(frozen=True)
class Sentence:
    where: str  # "notebooks/6_1_vmap.md:15"
    text: str   # 表示される形（リンク先を除き、インラインコードと数式はその文字）

    def __str__(self) -> str:
        return f"{self.where}: {len(self.text)} 字: {self.text}"


def _cells(row: str) -> list[str]:
    r"""表の 1 行をセルに分ける（`…` の中の | と \| では分けない）。"""
    cells, cur, code = [], [], False
    for i, ch in enumerate(row.strip().strip("|")):
        if ch == "`":
            code = not code
        if ch == "|" and not code and (i == 0 or row.strip().strip("|")[i - 1] != "\\"):
            cells.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    return [c.strip() for c in [*cells, "".join(cur)] if c.strip()]


def markdown_units(text: str, first: int = 1) -> list[tuple[int, str]]:
    """マークダウンを、文がまたがらない単位（段落、箇条書きの 1 項目、見出し、表の 1 セル）に分ける。
    コードブロック、$$…$$ の数式ブロック、HTML のコメントは読まない。(行番号, 単位のソース)。"""
    units: list[tuple[int, str]] = []
    cur: list[str] = []
    start = first
    fence, comment, math = "", False, False

    def flush():
        if cur:
            units.append((start, "\n".join(cur)))
        cur.clear()

    for n, line in enumerate(text.splitlines(), first):
        s = line.strip()
        if fence:
            if s.startswith(fence) and not s.strip(fence[0]):
                fence = ""
            continue
        if comment:
            comment = "-->" not in s
            continue
        if math:
            math = not s.endswith("$$")
            continue
        m = re.match(r"^(`{3,}|~{3,})", s)
        if m:
            flush()
            fence = m.group(1)
            continue
        if s.startswith("<!--"):
            flush()
            comment = "-->" not in s
            continue
        if s.startswith("$$"):
            flush()
            math = not (len(s) > 2 and s.endswith("$$"))
            continue
        s = re.sub(r"^(?:>\s?)+", "", s).strip()  # 引用（> **1 デバイスで実行したとき**：…）
        if not s or s == "+++" or s.startswith(":::") or re.match(r"^:[\w-]+:", s):
            flush()
            continue
        if s.startswith("|"):
            flush()
            if not re.fullmatch(r"[|:\-\s]+", s):
                units += [(n, c) for c in _cells(s)]
            continue
        if s.startswith("#") or _ITEM.match(s) or s.startswith(": "):
            flush()
            start = n
            cur.append(_ITEM.sub("", s).lstrip("#: ").strip())
            if s.startswith("#"):
                flush()
            continue
        if not cur:
            start = n
        cur.append(s)
    flush()
    return units


def rendered(src: str) -> str:
    """マークダウンのソースを、表示される文字にする: リンクはその文字（リンク先を除く）、画像と HTML のタグと
    コメントは除き、インラインコードはその文字、数式はそのソース、強調の印は除く。"""
    keep: list[str] = []

    def stash(text: str) -> str:
        keep.append(text)
        return f"\x00{len(keep) - 1}\x00"

    t = re.sub(r"<!--.*?-->", "", src, flags=re.S)
    t = re.sub(r"\{[\w:-]+\}`([^`]*?)(?:\s*<[^>`]*>)?`", lambda m: stash(m.group(1)), t)  # MyST のロール
    t = re.sub(r"(`+)(.+?)\1", lambda m: stash(m.group(2).strip()), t)
    t = re.sub(r"(?<![\\$])\$(?=\S)([^$\n]+?)(?<=\S)\$", lambda m: stash(m.group(1)), t)
    t = re.sub(r"!\[[^\]]*\]\((?:[^()]|\([^()]*\))*\)", "", t)
    t = re.sub(r"\[([^\]]+)\]\((?:[^()]|\([^()]*\))*\)", r"\1", t)
    t = re.sub(r"\[([^\]]+)\]\[[^\]]*\]", r"\1", t)
    t = re.sub(r"<(https?://[^>\s]+)>", r"\1", t)
    t = re.sub(r"</?[A-Za-z][^>]*>", "", t)
    t = re.sub(r"(\*\*|__)(.+?)\1", r"\2", t)
    t = re.sub(r"(?<![\w*])\*(?=\S)(.+?)(?<=\S)\*(?!\w)", r"\1", t)
    t = re.sub(r"\\([\\`*_{}\[\]()#+\-.!|$])", r"\1", t)
    t = re.sub(f"(?<=[{_WIDE}])\\n(?=[{_WIDE}])", "", t)  # 日本語の行の折り返しは表示では続く
    t = re.sub(r"\s+", " ", t).strip()
    return re.sub(r"\x00(\d+)\x00", lambda m: keep[int(m.group(1))], t)


def split_sentences(src: str) -> list[tuple[int, str]]:
    """「。」「！」「？」で文に分ける（「…」（…）の中、`…` と $…$ の中では分けない）。(ソースでの位置, 文)。"""
    out, begin, depth, code, math = [], 0, 0, False, False
    for i, ch in enumerate(src):
        if ch == "`":
            code = not code
        elif ch == "$" and not code:
            math = not math
        elif code or math:
            continue
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(0, depth - 1)
        elif ch in "。！？" and depth == 0:
            out.append((begin, src[begin:i + 1]))
            begin = i + 1
    if src[begin:].strip():
        out.append((begin, src[begin:]))
    return [(pos + len(s) - len(s.lstrip()), s.strip()) for pos, s in out if s.strip()]


_SOURCE = re.compile(r"https?://|arXiv[:.]?\s*\d{4}\.\d{4,5}|doi:", re.I)


def is_reference(src: str) -> bool:
    """文献の一覧の 1 項目（URL か arXiv の番号を含み、「。」を持たない）。文ではないので測らない。
    本文の中で文献を挙げた文（「…です（著者, "題", URL）。」）は測る。"""
    return bool(_SOURCE.search(src)) and "。" not in src


def _sentences(units, where) -> list[Sentence]:
    found = []
    for line, src in units:
        if is_reference(src):
            continue
        for pos, raw in split_sentences(src):
            text = rendered(raw)
            if _JA.search(text):
                found.append(Sentence(where(line + src[:pos].count("\n")), text))
    return found


def _blank_code_cells(md: str) -> str:
    """MyST の双子のマークダウンだけを残す（jupytext のヘッダとコードセルは空行に。行番号は変えない）。"""
    lines = md.splitlines()
    i = lines.index("---", 1) + 1 if lines and lines[0] == "---" else 0
    out = [""] * i
    while i < len(lines):
        if lines[i].startswith("```{code-cell}"):
            end = i + 1
            while end < len(lines) and lines[end] != "```":
                end += 1
            out += [""] * (end + 1 - i)
            i = end + 1
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def sentences_in(p: Path) -> list[Sentence]:
    """1 つのファイルの、学習者が読む文: ノートブックはその .md の双子のマークダウン、.py は日本語の文字列
    （f 文字列の {式} は 4 文字）の各行、README は日本語の部分（## English の前）、ほかのマークダウンは全体。"""
    name = _rel(p)
    if p.suffix in (".ipynb", ".md") and _twin(p) is not None:
        twin = _twin(p)
        units = markdown_units(_blank_code_cells(twin.read_text(encoding="utf-8")))
        return _sentences(units, lambda n: f"{_rel(twin)}:{n}")
    text = p.read_text(encoding="utf-8")
    if p.suffix == ".py":
        units = [(n + k, re.sub(r"\{[^{}\n]*\}", _FIELD, ln)) for n, s in _strings(text)
                 for k, ln in enumerate(s.split("\n"))]
        return _sentences(units, lambda n: f"{name}:{n}")
    return _sentences(markdown_units(japanese_part(p, text)), lambda n: f"{name}:{n}")


def length_files(root: Path = ROOT) -> list[Path]:
    """文の長さを測るファイル: 学習者が読むファイル（exercises/ は solutions/ から作るので除く）と用語集。"""
    return [p for p in learner_files(root) if p.parent.name != "exercises"] + [root / "GLOSSARY.md"]


def long_sentences(paths=None, limit: int = LONG) -> list[Sentence]:
    """limit 文字を超える文（既定は 100 文字。120 文字を超える文は直す）。"""
    return [s for p in (length_files() if paths is None else paths) for s in sentences_in(p) if len(s.text) > limit]


# 学習者が読む文字列のあるファイル（用語集自身・採点の内部・テストは除く）
LEARNER_GLOBS = ("notebooks/*.ipynb", "solutions/*.ipynb", "exercises/*.ipynb", "README.md", "docs/*.md", "site/*.md",
                 "ch6/checks/**/*.py", "ch6/draw/**/*.py", "ch6/multihost/**/*.py", "ch6/*.py")
# docs/accelerator.md は tools/accelerator.py が書く記録（英語、著者向け。日本語は本編の出力の写し）
NOT_LEARNER = {"ch6/glossary.py", "ch6/sanitize.py", "ch6/nbrun.py", "ch6/grade.py", "docs/accelerator.md"}


def learner_files(root: Path = ROOT) -> list[Path]:
    seen, out = set(), []
    for g in LEARNER_GLOBS:
        for p in sorted(root.glob(g)):
            rel = p.relative_to(root).as_posix()
            if rel not in NOT_LEARNER and rel not in seen:
                seen.add(rel)
                out.append(p)
    return out


def _expand(args: list[str]) -> list[Path]:
    out, seen = [], set()
    for a in args:
        p = Path(a)
        paths = sorted([*p.rglob("*.ipynb"), *p.rglob("*.py")]) if p.is_dir() else [p]
        for q in paths:
            key = (q.with_suffix("") if _twin(q) else q).resolve()
            if key not in seen:
                seen.add(key)
                out.append(q)
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--write"] and len(argv) == 2:
        Path(argv[1]).write_text(markdown(), encoding="utf-8")
        return 0
    if argv[:1] == ["--scan"]:
        files = _expand(argv[1:]) if argv[1:] else learner_files()
        per_file = {}
        for p in files:
            for h in scan_file(p):
                print(h)
                per_file[_rel(p)] = per_file.get(_rel(p), 0) + 1
        for name, n in per_file.items():
            print(f"{n:4d}  {name}", file=sys.stderr)
        print(f"{sum(per_file.values())} 件（{len(files)} ファイル）", file=sys.stderr)
        return 1 if per_file else 0
    if argv[:1] == ["--long"]:
        files = _expand(argv[1:]) if argv[1:] else length_files()
        found = long_sentences(files)
        for s in found:
            print(("!! " if len(s.text) > TOO_LONG else "   ") + str(s))
        over = sum(len(s.text) > TOO_LONG for s in found)
        print(f"{LONG} 字を超える文 {len(found)}、うち {TOO_LONG} 字を超える文（!!）{over}（{len(files)} ファイル）",
              file=sys.stderr)
        return 1 if over else 0
    print(markdown(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
