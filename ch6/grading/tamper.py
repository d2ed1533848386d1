"""配った演習ノートブックと提出物の違いを備考にする（採点そのものは変えない）。

- セルの削除と並べ替え（セルの id、中身、関数名とチェック番号で対応をつける）
- チェック呼び出しの書き換え・削除
- ch6 のチェックを置き換えるコード、採点の仕組みに触れるコード（改ざんの手がかり）。
  配ったままのセル（セットアップのセルなど）は見ず、学習者が書いた・変えたセルだけを見る。
"""
from __future__ import annotations

import bisect
import re

from .exercises import Assignment, Cell, check_calls, describe_cell, source_of

# 学習者のコードは採点と同じカーネルで動く: これらに触れるコードは備考に書く（改ざんの証拠として）
TAMPER = [
    ("IPython.display", r"\bIPython\.(core\.)?display\b|\bdisplay_pub\b"),
    ("sys.meta_path", r"\b(meta_path|path_hooks)\b"),
    ("builtins", r"\bbuiltins\b|__builtins__"),
    ("input_transformers", r"\binput_transformers"),
    ("events.register", r"\bevents\.register\b"),
    ("importlib", r"\bimportlib\b"),
    ("__ch6_grader__", r"__ch6_"),
]
REPLACES_CH6 = re.compile(
    r"^\s*(ch6(\.\w+)*\s*=[^=]|(ch6\.)?(check|run_check)\s*=[^=]|def\s+(check|run_check)\b|"
    r"import\s+[\w.]+\s+as\s+ch6\b|setattr\(\s*ch6\b)|sys\.modules\[\s*['\"]ch6", re.M)


def structure_notes(nb, assignment: Assignment) -> list[str]:
    """参照と比べた備考: セルの削除・並べ替え、チェック呼び出しの変更、ch6 の差し替え、採点の仕組みへの接触。"""
    cells = [describe_cell(c) for c in nb.cells]
    notes = cell_notes(cells, assignment.cells) if assignment.cells else []
    changed = changed_calls(nb, assignment)
    if changed:
        notes.append(f"チェックの呼び出しが書き換えられたか消されています（{', '.join(changed)}）。"
                     "採点は講座のチェックで行いました。")
    return notes + code_notes(learner_code(nb, cells, assignment.cells))


def match_cells(sub: list[Cell], ref: list[Cell]) -> tuple[list[tuple[int, int]], list[int]]:
    """参照の空でないセル i に提出物のセル j を対応させる: (対応 (i, j) の並び, 見つからない i の並び)。
    id（種類が同じなら）、次に同じ中身、次に同じ関数名・チェック番号の順に探す。"""
    by_id = {c.id: j for j, c in enumerate(sub) if c.id}
    by_hash: dict[tuple[str, str], list[int]] = {}
    for j, c in enumerate(sub):
        by_hash.setdefault((c.type, c.hash), []).append(j)
    used: set[int] = set()
    pairs, missing = [], []
    for i, rc in enumerate(ref):
        if not rc.hash:
            continue
        j = by_id.get(rc.id) if rc.id else None
        if j is None or j in used or sub[j].type != rc.type:
            j = next((k for k in by_hash.get((rc.type, rc.hash), []) if k not in used), None)
        if j is None and rc.keys:
            j = next((k for k, c in enumerate(sub) if k not in used and set(rc.keys) & set(c.keys)), None)
        if j is None:
            missing.append(i)
        else:
            used.add(j)
            pairs.append((i, j))
    return pairs, missing


def longest_increasing(seq: list[int]) -> set[int]:
    """seq の最長増加部分列に入る位置の集合（並べ替えの検出用）。"""
    tails, tails_idx, prev = [], [], [-1] * len(seq)
    for i, v in enumerate(seq):
        k = bisect.bisect_left(tails, v)
        if k == len(tails):
            tails.append(v)
            tails_idx.append(i)
        else:
            tails[k], tails_idx[k] = v, i
        prev[i] = tails_idx[k - 1] if k else -1
    keep, i = set(), tails_idx[-1] if tails_idx else -1
    while i >= 0:
        keep.add(i)
        i = prev[i]
    return keep


def cell_notes(sub: list[Cell], ref: list[Cell]) -> list[str]:
    notes = []
    pairs, missing = match_cells(sub, ref)
    if missing:
        more = f" ほか {len(missing) - 1} 個" if len(missing) > 1 else ""
        notes.append(f"演習ノートブックのセルが {len(missing)} 個見つかりません（削除?）: "
                     f"{missing[0] + 1} 番目「{ref[missing[0]].snippet}」{more}。")
    keep = longest_increasing([j for _, j in pairs])
    moved = [pairs[k][0] for k in range(len(pairs)) if k not in keep]
    if moved:
        notes.append(f"セルの順番が演習ノートブックと違います（{len(moved)} 個が移動: "
                     f"演習ノートブックの {moved[0] + 1} 番目「{ref[moved[0]].snippet}」など）。")
    return notes


def changed_calls(nb, assignment: Assignment) -> list[str]:
    """配ったときのチェック呼び出しが（空白と引用符の違いを除いて）見当たらない演習の番号。"""
    if not assignment.calls:
        return []
    present = {call for c in nb.cells if c.get("cell_type") == "code" for _, _, call in check_calls(source_of(c))}
    return [i for i in assignment.ids if assignment.calls.get(i) not in present]


def learner_code(nb, cells: list[Cell], ref: list[Cell] | None) -> str:
    """学習者が書いた・変えたコードセル（配ったままのセルは除く。参照がなければすべて）。"""
    given = {c.hash for c in ref or []}
    return "\n".join(source_of(c) for c, d in zip(nb.cells, cells)
                     if d.type == "code" and d.hash not in given)


def code_notes(code: str) -> list[str]:
    notes = []
    if REPLACES_CH6.search(code):
        notes.append("ch6 のチェックを置き換えるコードがあります（採点には影響しません）。")
    touched = [name for name, pattern in TAMPER if re.search(pattern, code, re.M)]
    if touched:
        notes.append(f"採点に使う仕組み（{', '.join(touched)}）に触れるコードがあります。"
                     "採点は改ざんを検出するだけで防げないので、結果とコードを確かめてください。")
    return notes
