"""採点結果を見せる・書き出す: 演習ノートブックごとの表、1 冊の自己チェック、CSV、JSON。"""
from __future__ import annotations

import csv
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

from .._core import Status
from .exercises import Assignment
from .model import Row, one_reason

LEGEND = "✅ 正解  ❌ 不正解・エラー・時間切れ  ⏳ 未解答  ⚠ 採点できない（備考を参照）"


def _console(console=None):
    from rich.console import Console

    if console is not None:
        return console
    # 端末でないとき（ファイルへのリダイレクトなど）は 80 桁に詰めず、広めに書く
    wide = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    return Console(width=160) if wide else Console()


def plain(mark: str) -> str:
    """⚠️ の異体字セレクタ（U+FE0F）は端末によって幅が変わり、列がずれるので表では外す。"""
    return mark.replace("\ufe0f", "")


def _groups(rows: list[Row]) -> dict[str | None, list[Row]]:
    out: dict[str | None, list[Row]] = {}
    for r in rows:
        out.setdefault(r.notebook, []).append(r)
    return out


def render(rows: list[Row], assignments: dict[str, Assignment], console=None, details: bool = False) -> None:
    console = _console(console)
    for name, group in _groups(rows).items():
        if name is None:
            console.print("[bold]採点できなかったファイル / not graded[/bold]")
            for r in group:
                console.print(f"⚠️ {r.file}: {' '.join(r.notes)}", markup=False, highlight=False)
            console.print()
            continue
        _table(console, name, group, assignments[name])
        if details:
            _details(console, group)


def _table(console, name: str, group: list[Row], a: Assignment) -> None:
    from rich.table import Table

    table = Table(title=f"{name}（{len(group)} 件）", title_justify="left")
    table.add_column("学習者 / learner", no_wrap=True)
    for eid in a.ids:
        table.add_column(eid, justify="center", no_wrap=True)
    table.add_column("合計 / total", justify="right", no_wrap=True)
    table.add_column("備考 / notes", overflow="fold", ratio=1)
    for r in group:
        marks = [plain(r.exercises[e].mark) if e in r.exercises else "" for e in a.ids]
        table.add_row(r.learner, *marks, f"{r.score}/{r.max_score}", "\n".join(r.notes))
    console.print(table)
    passed = [sum(e in r.exercises and r.exercises[e].status is Status.PASS for r in group) for e in a.ids]
    console.print("演習 / exercises: " + ", ".join(f"{e} {a.titles.get(e, '?')}（正解 {n}/{len(group)}）"
                                               for e, n in zip(a.ids, passed)), highlight=False)
    console.print(LEGEND + "\n")


def _details(console, group: list[Row]) -> None:
    for r in group:
        bad = [x for x in r.exercises.values() if x.status is not Status.PASS]
        if not bad:
            continue
        console.print(r.learner, style="bold", markup=False, highlight=False)
        lines = [f"{bad[0].status.label} {bad[0].message}"] if one_reason(bad) else [x.line() for x in bad]
        for line in lines:  # 読めないファイル: 理由は 1 つ
            console.print("  " + line, markup=False, highlight=False)
    console.print()


def render_self_check(row: Row, console=None) -> None:
    console = _console(console)
    console.print(f"{row.file}（{row.notebook or '?'}）", markup=False, highlight=False)
    results = list(row.exercises.values())
    for x in [] if one_reason(results) else results:  # 読めないファイル: 理由は備考に 1 回だけ
        console.print(x.line(), markup=False, highlight=False)
    for n in row.notes:
        console.print(f"備考: {n}", markup=False, highlight=False)
    console.print(f"合計 / total: {row.score}/{row.max_score}", highlight=False)


def to_json(rows: list[Row]) -> dict[str, Any]:
    return {"rows": [r.to_dict() for r in rows]}


def write_json(rows: list[Row], path: Path) -> None:
    path.write_text(json.dumps(to_json(rows), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def write_csv(rows: list[Row], path: Path) -> None:
    """表と同じ中身: 演習の列は印と状態（例 "✅ pass"）、見出しは日本語と英語。"""
    ids: list[str] = []
    for r in rows:
        ids += [i for i in r.exercises if i not in ids]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["学習者 / learner", "ファイル / file", "ノートブック / notebook", "得点 / score",
                "満点 / max_score"]
               + [c for i in ids for c in (i, f"{i} メッセージ / message")] + ["備考 / notes"])
    from .gradebook import relative_files  # 先生のマシンのパスを書かない（成績簿と同じ相対パス）

    rel = relative_files(rows)
    for r in rows:
        cells = []
        for i in ids:
            x = r.exercises.get(i)
            cells += [f"{x.mark} {x.status.value}", x.message] if x else ["", ""]
        w.writerow([r.learner, rel.get(r.file, r.file), r.notebook or "", r.score, r.max_score] + cells
                   + [" ".join(r.notes)])
    # Excel でも文字化けしないよう BOM 付き UTF-8
    path.write_text(buf.getvalue(), encoding="utf-8-sig")
