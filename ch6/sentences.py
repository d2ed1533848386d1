"""文の長さ: 学習者が読む文を、表示されるとおりの文字数で測る（issue 39: 120 文字を超える文は直す。issue 46:
段落の行はつないで 1 つの文として、チェックのメッセージはつないだ文字列のまま測る。文は 50〜80 文字を目安に）。

    python -m ch6.glossary --long     # 90 文字を超える文の一覧（上限 limit_for を超える文は !! で、終了コード 1）
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from .learner_text import JA, ROOT, japanese_part, learner_files, rel, strings, twin

LONG, TOO_LONG = 90, 120
# 本編・解答例（演習の問題文）・チェックと採点のメッセージの文は 90 文字まで（issue 46: 目安は 50〜80 文字。
# 91〜100 文字の文をすべて分けたので、上限を 100 から下げた。しきい値のすぐ下に文を寄せない）。
# README・docs・site・用語集は、コマンドやパスを含む文があるので 120 文字まで
PROSE_LIMIT = 90
_PROSE = re.compile(r"^(notebooks|solutions|exercises)/|^ch6/")


def limit_for(where: str) -> int:
    """その場所（"notebooks/6_1_vmap.md:15" やファイルのパス）の文の上限の文字数。"""
    return PROSE_LIMIT if _PROSE.search(where) else TOO_LONG
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
    # MyST のロール {role}`文字 <先>` と インラインコード `…` を左から 1 度に読む（コードの中の {V:x}` をロールと読まない）
    t = re.sub(r"(\{[\w:-]+\})?(`+)(.+?)\2",
               lambda m: stash(re.sub(r"\s*<[^>`]*>$", "", m.group(3)) if m.group(1) else m.group(3).strip()), t)
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
            if JA.search(text):
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
    name = rel(p)
    md = twin(p) if p.suffix in (".ipynb", ".md") else None
    if md is not None:
        units = markdown_units(_blank_code_cells(md.read_text(encoding="utf-8")))
        return _sentences(units, lambda n: f"{rel(md)}:{n}")
    text = p.read_text(encoding="utf-8")
    if p.suffix == ".py":
        units = [(n + k, re.sub(r"\{[^{}\n]*\}", _FIELD, ln)) for n, s in strings(text)
                 for k, ln in enumerate(s.split("\n"))]
        return _sentences(units, lambda n: f"{name}:{n}")
    return _sentences(markdown_units(japanese_part(p, text)), lambda n: f"{name}:{n}")


def length_files(root: Path = ROOT) -> list[Path]:
    """文の長さを測るファイル: 学習者が読むファイル（exercises/ は solutions/ から作るので除く）と用語集。"""
    return [p for p in learner_files(root) if p.parent.name != "exercises"] + [root / "GLOSSARY.md"]


def long_sentences(paths=None, limit: int = LONG) -> list[Sentence]:
    """limit 文字を超える文（既定は LONG = 90 文字。上限は limit_for）。"""
    return [s for p in (length_files() if paths is None else paths) for s in sentences_in(p) if len(s.text) > limit]

