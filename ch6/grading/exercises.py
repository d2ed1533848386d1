"""採点が各演習ノートブックについて知っていること: 演習の番号と関数名（順に）、チェック呼び出し、セルの一覧。

リポジトリがなくても（Colab・Kaggle・wheel）採点できるよう、パッケージに ``exercises.json`` として同梱します。
``exercises/`` を変えたら作り直します（``tests/test_grading_exercises.py`` がずれを見つけます）::

    python -m ch6.grading.exercises            # exercises/ から ch6/grading/exercises.json を書く
    python -m ch6.grading.exercises --check    # 最新でなければ終了コード 1

セルは中身そのものではなく、突き合わせに要るものだけを持ちます: 種類、id、中身のハッシュ、
関数名とチェック番号（中身が変わっても同じセルと分かる手がかり）、備考に書く冒頭の数文字。
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("exercises.json")
CHECKOUT_EXERCISES = Path(__file__).resolve().parents[2] / "exercises"  # リポジトリで作り直すときだけ使う

CHECK_CALL = re.compile(r"""(?:\b[\w.]*\.)?\bcheck\(\s*["']([^"']+)["']\s*,\s*([A-Za-z_]\w*)\s*\)""")
_DEF = re.compile(r"^\s*def\s+([A-Za-z_]\w*)", re.M)


# ------------------------------------------------------------------------------ セル

def natural_key(name: str) -> tuple:
    """演習ノートブック名の並べ方: 数字は数として（6_2_pmap が 6_10_inference より前）。"""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def source_of(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def code_lines(source: str) -> Iterable[str]:
    """空行とコメント行を除いた、前後の空白を取った行。"""
    for line in source.splitlines():
        s = line.strip()
        if s and not s.startswith("#"):
            yield s


def norm_call(text: str) -> str:
    """チェック呼び出しの比較用: 空白と引用符の違いは同じとみなす。"""
    return re.sub(r"\s+", "", text).replace("'", '"')


def check_calls(source: str) -> list[tuple[str, str, str]]:
    """コメント行を除いたコードの ``check("6.N-k", 関数)``: (番号, 関数名, 比較用の呼び出し) の並び。"""
    return [(m.group(1), m.group(2), norm_call(m.group(0)))
            for line in code_lines(source) for m in CHECK_CALL.finditer(line)]


def snippet_of(source: str, limit: int = 24) -> str:
    """備考に書くセルの冒頭（最初の空でない行、先頭の # は除く）。"""
    first = next((ln.strip().lstrip("#").strip() for ln in source.splitlines() if ln.strip()), "")
    return first if len(first) <= limit else first[: limit - 1] + "…"


@dataclasses.dataclass(frozen=True)
class Cell:
    type: str
    id: str
    hash: str                # 前後の空白を除いた中身の SHA-256（先頭 16 桁）。空のセルは ""
    keys: tuple[str, ...]    # "def:関数名"、"check:番号"（コードセルだけ）
    snippet: str

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "id": self.id, "hash": self.hash, "keys": list(self.keys), "snippet": self.snippet}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Cell:
        return cls(d["type"], d["id"], d["hash"], tuple(d["keys"]), d["snippet"])


def describe_cell(cell: dict) -> Cell:
    source = source_of(cell)
    text = source.strip()
    keys: set[str] = set()
    if cell.get("cell_type") == "code":
        keys |= {f"def:{name}" for name in _DEF.findall(source)}
        keys |= {f"check:{m.group(1)}" for m in CHECK_CALL.finditer(source)}
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16] if text else ""
    return Cell(cell.get("cell_type", ""), str(cell.get("id") or ""), digest, tuple(sorted(keys)),
                snippet_of(source))


# ------------------------------------------------------------------------------ 演習ノートブック

@dataclasses.dataclass
class Assignment:
    """1 冊の演習ノートブック: 名前、演習の番号（順に）と関数名、チェック呼び出し、セル（分かれば）。"""
    name: str
    ids: list[str]
    titles: dict[str, str]
    calls: dict[str, str] = dataclasses.field(default_factory=dict)
    cells: list[Cell] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"exercises": [{"id": i, "function": self.titles[i], "call": self.calls.get(i, "")} for i in self.ids],
                "cells": [c.to_json() for c in self.cells or []]}

    @classmethod
    def from_json(cls, name: str, d: dict[str, Any]) -> Assignment:
        ex = d["exercises"]
        return cls(name, [e["id"] for e in ex], {e["id"]: e["function"] for e in ex},
                   {e["id"]: e["call"] for e in ex if e.get("call")},
                   [Cell.from_json(c) for c in d.get("cells", [])] or None)


def from_notebook(name: str, nb: dict) -> Assignment:
    ids: list[str] = []
    titles, calls = {}, {}
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        for eid, fn, call in check_calls(source_of(cell)):
            if eid not in ids:
                ids.append(eid)
                titles[eid], calls[eid] = fn, call
    return Assignment(name, ids, titles, calls, [describe_cell(c) for c in nb.get("cells", [])])


def from_folder(folder: Path) -> dict[str, Assignment]:
    """フォルダの演習ノートブック（チェック呼び出しのあるもの）から。読めないファイルは飛ばす。"""
    out: dict[str, Assignment] = {}
    for path in sorted(Path(folder).glob("*.ipynb")):
        try:
            a = from_notebook(path.stem, json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, AttributeError, TypeError):
            continue
        if a.ids:
            out[a.name] = a
    return out


def from_registry(titles: dict[str, str]) -> dict[str, Assignment]:
    """ノートブックの情報がないとき: 登録済みのチェックを節ごとに（"6.1" なら 6.1- で始まる演習すべて）。"""
    sections: dict[str, list[str]] = {}
    for i in sorted(titles):
        sections.setdefault(i.split("-")[0], []).append(i)
    return {sec: Assignment(sec, ids, {i: titles[i] for i in ids}) for sec, ids in sections.items()}


def packaged(path: Path = DATA) -> dict[str, Assignment]:
    """パッケージに同梱した exercises.json から（なければ空）。"""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {name: Assignment.from_json(name, d) for name, d in data["notebooks"].items()}


# ------------------------------------------------------------------------------ exercises.json を作る

def dumps(assignments: dict[str, Assignment]) -> str:
    """差分が読みやすいよう、演習とセルは 1 つ 1 行で書く。"""
    def one(x):
        return json.dumps(x, ensure_ascii=False)

    parts = ['{\n "about": "python -m ch6.grading.exercises が exercises/ から作ります。手で編集しないでください。",\n'
             ' "notebooks": {']
    for k, (name, a) in enumerate(sorted(assignments.items())):
        d = a.to_json()
        ex = ",\n    ".join(one(e) for e in d["exercises"])
        cells = ",\n    ".join(one(c) for c in d["cells"])
        parts.append(f'{"," if k else ""}\n  {one(name)}: {{\n   "exercises": [\n    {ex}\n   ],\n'
                     f'   "cells": [\n    {cells}\n   ]\n  }}')
    parts.append("\n }\n}\n")
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ch6.grading.exercises", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", nargs="?", type=Path, default=CHECKOUT_EXERCISES, help="演習ノートブックのフォルダ")
    ap.add_argument("--check", action="store_true", help="書かずに、最新かどうかだけ確かめる")
    args = ap.parse_args(argv)
    text = dumps(from_folder(args.folder))
    current = DATA.read_text(encoding="utf-8") if DATA.exists() else ""
    if args.check:
        if text != current:
            print(f"{DATA.name} is out of date: run python -m ch6.grading.exercises", file=sys.stderr)
            return 1
        return 0
    if text != current:
        DATA.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
