"""講座の用語集（ch6/glossary.toml が正本）と、学習者が読む文字列から使わない言い方を見つける関数。

    python -m ch6.glossary                           # 用語集を Markdown で表示
    python -m ch6.glossary --write GLOSSARY.md       # リポジトリの GLOSSARY.md を作り直す
    python -m ch6.glossary --scan                    # 学習者が読むすべての文字列を調べる
    python -m ch6.glossary --scan notebooks/6_1_vmap.md ch6/checks/s6_1   # ファイル・フォルダを指定して調べる
    python -m ch6.glossary --long                    # 90 文字を超える文の一覧（上限を超える文は !! で、終了コード 1）

学習者が読む文字列: マークダウン、コードのコメント、コードの中の文字列リテラル（日本語を含むもの）、保存済みの
テキスト出力、ch6/checks/**・ch6/explain.py などのメッセージ（f 文字列は {式} のままテンプレートとして）、
ch6/draw/** の図のタイトル・ラベル・凡例、README（取り出すのは ch6.learner_text）。ノートブックに MyST の双子
（X.md、X.outputs.txt）があればその行番号で報告します。文の長さは ch6.sentences が測ります。
"""
from __future__ import annotations

import dataclasses
import functools
import json
import re
import sys
import tomllib
from importlib import resources
from pathlib import Path

from .learner_text import (
    expand,
    fstring_seams,
    generated_from,
    japanese_part,
    learner_files,
    myst_texts,
    outputs_texts,
    prose,
    rel,
    string_joins,
    strings,
    twin,
)
from .sentences import LONG, PROSE_LIMIT, TOO_LONG, length_files, limit_for, long_sentences

__all__ = ["Hit", "Rejected", "Term", "learner_files", "main", "markdown", "rejected", "rules", "scan", "scan_file",
           "scan_text", "terms"]


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
    scope: str = ""  # 規則を当てるファイル（リポジトリからのパスの正規表現）。空ならすべて。ファイルのない文（テスト）にはいつも当てる

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
        "講座のノートブックはこの用語だけを使います。正本は `ch6/glossary.toml` です。このファイルは、そこから",
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


def _check(texts, where, path: str = "") -> list[Hit]:
    found = []
    rules_here = [r for r in rejected() if not (path and r.scope) or re.search(r.scope, path)]
    for key, text in texts:
        for r in rules_here:
            for pos, word, around in r.matches(text):
                found.append(Hit(where(key, text[:pos].count("\n")), word, around, r.use, r.issue))
    return found


def scan(nb: dict) -> list[str]:
    """使わない言い方の一覧（"セル 12: 「語」（…前後…） → 代わりに …"）。"""
    return [str(h) for h in _check(prose(nb), lambda cell, _: f"セル {cell}")]


def scan_text(text: str) -> list[str]:
    """1 つの文（マークダウンとして）を調べる。テスト用。"""
    return [str(h) for h in _check([(1, text)], lambda line, dl: f"{line + dl} 行")]


def _in_source(hit: Hit, source: Path) -> Hit:
    """生成されたノートブックの当たりを、同じ語と前後の文がある source の行で示す（見つからなければそのまま）。"""
    text = source.read_text(encoding="utf-8")
    for m in re.finditer(re.escape(hit.word), text):
        around = text[max(0, m.start() - 40): m.end() + 40].replace("\n", " ")
        if hit.around in around:  # ノートブックの前後の文はセルの端で切れるので、.md の前後の文の一部
            line = text[:m.start()].count("\n") + 1
            return dataclasses.replace(hit, where=f"{rel(source)}:{line}（{hit.where}）")
    return hit


JOIN_USE = ("つないだ文字列や f 文字列の {式} の継ぎ目で、かな・漢字と ASCII の文字の間に空白を入れる"
            "（「w と KV」「組は B」「{what} は」「{got} でした」）")


def _seams(src: str, others: tuple[str, ...] = ()) -> list[tuple[int, str]]:
    """継ぎ目の 2 つの種類: つないだ文字列リテラル（string_joins）と、f 文字列の {式}（fstring_seams）。"""
    return sorted(string_joins(src) + fstring_seams(src, others))


def _joins(found: list[tuple[int, str]], where) -> list[Hit]:
    return [Hit(where(n, 0), seam, seam, JOIN_USE, "46") for n, seam in found]


def scan_file(p: Path) -> list[Hit]:
    """1 つのファイルを調べる。ノートブックに双子があれば .md と .outputs.txt の行で報告する。"""
    md = twin(p)
    if md is not None:
        source = md.read_text(encoding="utf-8")
        hits = _check(myst_texts(source), lambda n, dl: f"{rel(md)}:{n + dl}", rel(md))
        hits += _joins(myst_texts(source, reader=_seams, paragraphs=False), lambda n, dl: f"{rel(md)}:{n}")
        outs = p.with_suffix(".outputs.txt")
        if outs.exists():
            hits += _check(outputs_texts(outs.read_text(encoding="utf-8")), lambda n, dl: f"{rel(outs)}:{n + dl}", rel(outs))
        return hits
    if p.suffix == ".ipynb":
        hits = _check(prose(json.loads(p.read_text(encoding="utf-8"))), lambda c, _: f"{rel(p)} セル {c}", rel(p))
        source = generated_from(p)
        return [_in_source(h, source) for h in hits] if source else hits
    text = p.read_text(encoding="utf-8")
    if p.suffix == ".py":
        others = tuple(q.read_text(encoding="utf-8") for q in sorted(p.parent.glob("*.py")) if q != p)
        return (_check(strings(text), lambda n, dl: f"{rel(p)}:{n + dl}", rel(p))
                + _joins(_seams(text, others), lambda n, dl: f"{rel(p)}:{n}"))
    return _check([(1, japanese_part(p, text))], lambda n, dl: f"{rel(p)}:{n + dl}", rel(p))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--write"] and len(argv) == 2:
        Path(argv[1]).write_text(markdown(), encoding="utf-8")
        return 0
    if argv[:1] == ["--scan"]:
        files = expand(argv[1:]) if argv[1:] else learner_files()
        per_file = {}
        for p in files:
            for h in scan_file(p):
                print(h)
                per_file[rel(p)] = per_file.get(rel(p), 0) + 1
        for name, n in per_file.items():
            print(f"{n:4d}  {name}", file=sys.stderr)
        print(f"{sum(per_file.values())} 件（{len(files)} ファイル）", file=sys.stderr)
        return 1 if per_file else 0
    if argv[:1] == ["--long"]:
        files = expand(argv[1:]) if argv[1:] else length_files()
        found = long_sentences(files)
        for s in found:
            print(("!! " if len(s.text) > limit_for(s.where) else "   ") + str(s))
        over = sum(len(s.text) > limit_for(s.where) for s in found)
        print(f"{LONG} 字を超える文 {len(found)}、うち上限（本編・解答例・メッセージは {PROSE_LIMIT} 字、ほかは "
              f"{TOO_LONG} 字）を"
              f"超える文（!!）{over}（{len(files)} ファイル）",
              file=sys.stderr)
        return 1 if over else 0
    print(markdown(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
