"""講座の用語集（ch6/glossary.toml が正本）と、使わない言い方を見つける関数。

    python -m ch6.glossary                      # 用語集を Markdown で表示
    python -m ch6.glossary --write GLOSSARY.md  # リポジトリの GLOSSARY.md を作り直す
    python -m ch6.glossary --scan notebooks     # ノートブックの文章から使わない言い方を探す
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

    def find(self, text: str) -> list[str]:
        hits = []
        for m in re.finditer(self.pattern, text):
            around = text[max(0, m.start() - 20): m.end() + 20]
            if self.allow and re.search(self.allow, around):
                continue
            hits.append(around.replace("\n", " "))
        return hits


@functools.cache
def _data() -> dict:
    return tomllib.loads(resources.files(__package__).joinpath("glossary.toml").read_text(encoding="utf-8"))


def terms() -> list[Term]:
    return [Term(**t) for t in _data()["term"]]


def rejected() -> list[Rejected]:
    return [Rejected(**r) for r in _data()["rejected"]]


def markdown() -> str:
    """用語集を Markdown の表にする（GLOSSARY.md の中身）。"""
    lines = [
        "# 用語集 / Glossary",
        "",
        "講座のノートブックはこの用語だけを使います（正本は `ch6/glossary.toml`、このファイルはそこから作ります:",
        "`python -m ch6.glossary --write GLOSSARY.md`）。各ノートブックで初めて使うところでは英語を 1 度添えます。",
        "",
        "| 用語 | English | API | 定義 |",
        "|---|---|---|---|",
    ]
    for t in terms():
        api = f"`{t.api}`" if t.api else ""
        lines.append(f"| {t.ja} | {t.en} | {api} | {t.definition} |")
    lines += ["", "## 使わない言い方 / Rejected variants", "", "| 使わない | 代わりに |", "|---|---|"]
    for r in rejected():
        shown = r.shown or r.pattern.replace("\\\\", "\\").replace("|", " / ").replace("\\d+\\s*", "N ").replace("\\s*", " ")
        lines.append(f"| {shown} | {r.use} |")
    return "\n".join(lines) + "\n"


_COMMENT = re.compile(r"#(?!\s*(?:noqa|type:))(.*)$")


def prose(nb: dict) -> list[tuple[int, str]]:
    """ノートブック（JSON の dict）の文章: マークダウンのセルと、コードのコメント。(セル番号, 文章)。"""
    out = []
    for i, cell in enumerate(nb.get("cells", [])):
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else src
        if cell.get("cell_type") == "markdown":
            out.append((i, src))
        elif cell.get("cell_type") == "code":
            comments = []
            for line in src.splitlines():
                quoted = re.sub(r"(\"[^\"]*\"|'[^']*')", "", line)  # 文字列の中の # はコメントではない
                m = _COMMENT.search(quoted)
                if m:
                    comments.append(m.group(1))
            if comments:
                out.append((i, "\n".join(comments)))
    return out


def scan(nb: dict) -> list[str]:
    """使わない言い方の一覧（"セル 12: 「…」 → 代わりに …"）。"""
    found = []
    for i, text in prose(nb):
        for r in rejected():
            for around in r.find(text):
                found.append(f"セル {i}: 「{around}」 → {r.use}")
    return found


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--write"] and len(argv) == 2:
        Path(argv[1]).write_text(markdown(), encoding="utf-8")
        return 0
    if argv[:1] == ["--scan"]:
        bad = 0
        for root in argv[1:]:
            paths = sorted(Path(root).glob("*.ipynb")) if Path(root).is_dir() else [Path(root)]
            for p in paths:
                for line in scan(json.loads(p.read_text(encoding="utf-8"))):
                    print(f"{p}: {line}")
                    bad += 1
        return 1 if bad else 0
    print(markdown(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
