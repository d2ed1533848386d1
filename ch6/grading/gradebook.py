"""成績簿に取り込む形の書き出し（``ch6-grade … --gradebook 成績.csv``）: 採点の結果（:class:`Row`）から 3 つの CSV。

- ``成績.csv``           学習者 1 人 1 行: 識別子の列 ``learner``、演習ノートブックごとの点（正解の数。見出しに満点
  ``6_1_vmap (max 6)``。提出のないノートブックは空欄）、``total``（提出した分の和）。
  点の列は数値だけなので、Moodle の「CSV ファイルから評定をインポート」で ``learner`` を学習者の識別子に、
  ノートブックの列をそれぞれの評定項目に対応づけられます（Canvas は自分が書き出した成績簿の列を要るので、そこへ写します）。
- ``成績_messages.csv``  1 行 1 メッセージ: learner, notebook, exercise, status, message, file。
  状態の語（status）の意味は :data:`ch6.grading.model.STATUS_WORDS` に 1 か所でまとめてあります。
  読めないファイルは理由 1 行（exercise は空）、提出のないノートブックは ``not_submitted`` の 1 行、
  備考は ``note`` の行になります。どの学習者も黙って落とされません。
- ``成績_summary.csv``   演習ごとのクラスのまとめ: 提出数、正解数、❌・⏳・⚠️ の数、多かった ❌ のメッセージ 3 つと件数。

文字コードは BOM つき UTF-8 です。Excel はダブルクリックで開くと BOM がない UTF-8 を日本語の環境では
Shift_JIS として読み、学習者名やメッセージが文字化けします。Moodle の CSV の読み込み（csv_import_reader）は BOM を取り除きます。
``=``・``+``・``-``・``@`` で始まる文字列のセルには ``'`` を前に付けます（Excel が式として実行しないように）。
採点そのものはしません: 表示と同じ :class:`Row` を並べ替えるだけです。
"""
from __future__ import annotations

import csv
import dataclasses
import io
from collections import Counter
from pathlib import Path

from .._core import Status
from .exercises import natural_key
from .model import NOT_SUBMITTED, NOTE, Row, one_reason

NOT_SUBMITTED_MESSAGE = "この演習ノートブックの提出がありません。"
TOP = 3  # まとめに書く、多かった ❌ のメッセージの数
WRONG = {s for s in Status if s.mark == "❌"}


def paths(out: Path) -> tuple[Path, Path, Path]:
    """成績簿、メッセージ、まとめのファイル（``成績.csv`` → ``成績_messages.csv``、``成績_summary.csv``）。"""
    out = Path(out)
    return out, out.with_name(f"{out.stem}_messages{out.suffix or '.csv'}"), \
        out.with_name(f"{out.stem}_summary{out.suffix or '.csv'}")


def safe(text: str) -> str:
    """Excel が式として読む文字列（=, +, -, @ で始まる）の前に ' を付ける。"""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _unreadable(r: Row) -> str | None:
    """提出物全体が 1 つの理由で採点できなかった（読めないファイルなど）なら、その理由（表と同じ判断）。"""
    results = list(r.exercises.values())
    return results[0].message if one_reason(results) else None


def notebooks_of(rows: list[Row]) -> list[str]:
    return sorted({r.notebook for r in rows if r.notebook is not None}, key=natural_key)


def learners_of(rows: list[Row]) -> list[str]:
    return sorted({r.learner for r in rows})


def maxima(rows: list[Row]) -> dict[str, int]:
    """ノートブックごとの満点（演習の数）。"""
    out: dict[str, int] = {}
    for r in rows:
        if r.notebook is not None:
            out[r.notebook] = max(out.get(r.notebook, 0), r.max_score)
    return out


def table(rows: list[Row]) -> tuple[list[str], list[list]]:
    """成績簿: 見出し（ノートブックの名前と満点: ``6_1_vmap (max 6)``）と、学習者 1 人 1 行（点は int）。
    提出のないノートブックは空欄（0 点と区別する。Moodle は空欄の評定を取り込まない）。合計は提出した分の和。"""
    books = notebooks_of(rows)
    top = maxima(rows)
    score = {(r.learner, r.notebook): r.score for r in rows if r.notebook is not None}
    body = []
    for learner in learners_of(rows):
        points = [score.get((learner, b), "") for b in books]
        body.append([learner, *points, sum(p for p in points if p != "")])
    head = ["learner", *(f"{b} (max {top[b]})" for b in books), f"total (max {sum(top.values())})"]
    return head, body


def relative_files(rows: list[Row]) -> dict[str, str]:
    """ファイルの列に書くパス: 提出物すべてに共通のフォルダからの相対パス（先生のマシンのパスを CSV に残さない）。"""
    files = [r.file for r in rows if r.file]
    if not files:
        return {}
    import os

    root = os.path.commonpath([os.path.dirname(os.path.abspath(f)) for f in files])
    return {f: Path(os.path.relpath(os.path.abspath(f), root)).as_posix() for f in files}


def messages(rows: list[Row]) -> list[list[str]]:
    """learner, notebook, exercise, status, message, file の行（学習者、ノートブック、演習の順）。
    file は提出物に共通のフォルダからの相対パス。"""
    rel = relative_files(rows)
    rows = [dataclasses.replace(r, file=rel.get(r.file, r.file)) for r in rows]
    out = []
    for r in rows:
        reason = _unreadable(r)
        if r.notebook is None:  # どの演習ノートブックか分からない: 理由を 1 行
            out.append([r.learner, "", "", Status.NOT_GRADED.value, " ".join(r.notes), r.file])
            continue
        if reason is not None:  # 読めないファイル: 理由を 1 行（演習ごとに繰り返さない）
            out.append([r.learner, r.notebook, "", Status.NOT_GRADED.value, reason, r.file])
        else:
            out += [[r.learner, r.notebook, x.id, x.status.value, x.message, r.file] for x in r.exercises.values()]
        out += [[r.learner, r.notebook, "", NOTE, n, r.file] for n in r.notes if n != reason]
    have = {(r.learner, r.notebook) for r in rows}
    out += [[learner, b, "", NOT_SUBMITTED, NOT_SUBMITTED_MESSAGE, ""]
            for learner in learners_of(rows) for b in notebooks_of(rows) if (learner, b) not in have]
    return sorted(out, key=lambda m: (m[0], natural_key(m[1])))  # 安定な並べ替え: 1 冊の中は演習の順、備考はその後


def summary(rows: list[Row]) -> tuple[list[str], list[list]]:
    """演習ごと: 提出数、正解・❌・⏳・⚠️ の数、多かった ❌ のメッセージ（同じ文の件数、多い順、同数は文の順）。"""
    head = ["notebook", "exercise", "function", "submissions", "solved", "wrong", "not_done", "not_graded"]
    head += [c for k in range(1, TOP + 1) for c in (f"wrong_message_{k}", f"wrong_count_{k}")]
    body = []
    for b in notebooks_of(rows):
        group = [r for r in rows if r.notebook == b]
        ids = list(dict.fromkeys(i for r in group for i in r.exercises))
        for i in ids:
            got = [r.exercises[i] for r in group if i in r.exercises]
            marks = Counter(x.mark for x in got)
            top = sorted(Counter(x.message for x in got if x.status in WRONG).items(), key=lambda kv: (-kv[1], kv[0]))
            cells = [c for m, n in top[:TOP] for c in (m, n)] + ["", ""] * (TOP - min(TOP, len(top)))
            body.append([b, i, got[0].title, len(group), marks["✅"], marks["❌"], marks["⏳"], marks["⚠️"], *cells])
    return head, body


def _write(path: Path, head: list[str], body: list[list]) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    for line in [head, *body]:
        w.writerow([safe(c) if isinstance(c, str) else c for c in line])
    path.write_text(buf.getvalue(), encoding="utf-8-sig", newline="")


def write(rows: list[Row], out: Path) -> tuple[Path, Path, Path]:
    """3 つの CSV を書き、そのパスを返す。"""
    book, msgs, summ = paths(out)
    _write(book, *table(rows))
    _write(msgs, ["learner", "notebook", "exercise", "status", "message", "file"], messages(rows))
    _write(summ, *summary(rows))
    return book, msgs, summ
