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
    ("sys.path_importer_cache", r"\bpath_importer_cache\b"),
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
    """参照と比べた備考: 古い版の演習ノートブック、セルの削除・並べ替え、チェック呼び出しの変更、
    ch6 の差し替え、採点の仕組みへの接触。"""
    cells = [describe_cell(c) for c in nb.cells]
    older = older_version(nb, assignment)
    lacking = [i for i in older if i in lacking_exercises(nb, assignment)]
    notes = [older_version_note(assignment, older, lacking)] if older else []
    if assignment.cells:
        notes += cell_notes(cells, assignment.cells, skip=exercise_cells(assignment, lacking), older=bool(older))
    changed = [i for i in changed_calls(nb, assignment) if i not in older]
    if changed:
        notes.append(f"チェックの呼び出しが書き換えられたか消されています（{', '.join(changed)}）。"
                     "採点は講座のチェックで行いました。")
    return notes + code_notes(learner_code(nb, cells, assignment.cells))


def exercise_blocks(assignment: Assignment) -> dict[str, range]:
    """演習ごとの参照のセルの範囲: 前の演習のチェックのセルの次から、その演習のチェックのセルまで。"""
    blocks, start = {}, 0
    for k, c in enumerate(assignment.cells or []):
        for key in c.keys:
            eid = key.removeprefix("check:")
            if key.startswith("check:") and eid in assignment.ids and eid not in blocks:
                blocks[eid] = range(start, k + 1)
                start = k + 1
    return blocks


def exercise_cells(assignment: Assignment, ids: list[str]) -> set[int]:
    blocks = exercise_blocks(assignment)
    return {k for i in ids for k in blocks.get(i, ())}


def lacking_exercises(nb, assignment: Assignment) -> list[str]:
    """提出物の版にない演習（古い版の演習ノートブックから解いたとき）の番号。

    その演習の関数の定義もチェックの呼び出しもどこにもなく、参照でその演習の説明から解答のセルまで
    （前の演習のチェックのセルより後ろの、続いたセル。マークダウンを 1 つ以上含む）がまとめてないとき。
    解答のセルだけを消した提出物（説明は残っている）は、これに当たりません（削除として備考に書きます）。"""
    if not assignment.cells:
        return []
    sub = [describe_cell(c) for c in nb.cells]
    keys = {k for c in sub for k in c.keys}
    _, missing = match_cells(sub, assignment.cells)
    missing_set, out = set(missing), []
    for eid, block in exercise_blocks(assignment).items():
        if f"check:{eid}" in keys or f"def:{assignment.titles.get(eid)}" in keys:
            continue
        real = [k for k in block if assignment.cells[k].hash]  # 空のセルは突き合わせない
        gone = [k for k in real if k in missing_set]
        if not gone or gone != real[real.index(gone[0]):]:
            continue
        if any(assignment.cells[k].type == "markdown" for k in gone):
            out.append(eid)
    return out


def renamed_exercises(nb, assignment: Assignment) -> dict[str, str]:
    """古い版で関数が違った演習: {番号: 提出物の関数名}。提出物が ``check(番号, 別の関数)`` を呼び、
    その関数を定義していて、今の版の関数はどこにも定義していないとき（古い版では別の問題だった）。"""
    code = [source_of(c) for c in nb.cells if c.get("cell_type") == "code"]
    defined = {k.removeprefix("def:") for c in nb.cells for k in describe_cell(c).keys if k.startswith("def:")}
    out = {}
    for eid, fn, _ in (call for src in code for call in check_calls(src)):
        want = assignment.titles.get(eid)
        if want and fn != want and fn in defined and want not in defined and eid not in out:
            out[eid] = fn
    return out


def older_version(nb, assignment: Assignment) -> dict[str, str]:
    """古い版の演習ノートブックからの提出物なら、今の版と違う演習: {番号: 採点の結果に書く 1 文}。"""
    out = {i: LACKING_MESSAGE for i in lacking_exercises(nb, assignment)}
    for i, fn in renamed_exercises(nb, assignment).items():
        out[i] = (f"提出物の演習ノートブック（古い版）では、この演習の関数が違います"
                  f"（提出物は {fn}、今の版は {assignment.titles[i]}）。")
    return dict(sorted(out.items(), key=lambda kv: assignment.ids.index(kv[0])))


def older_version_note(assignment: Assignment, older: dict[str, str], lacking: list[str]) -> str:
    parts = []
    if lacking:
        parts.append("演習 " + "、".join(f"{i}（{assignment.titles.get(i, '?')}）" for i in lacking) + "がありません")
    changed = [i for i in older if i not in lacking]
    if changed:
        parts.append("演習 " + "、".join(changed) + " は今の版と関数が違います")
    return (f"古い版の演習ノートブックからの提出のようです: {'。'.join(parts)}（⚠️ にしました）。"
            "今の版を配り直すか、その演習を採点から外してください。")


LACKING_MESSAGE = "提出物の演習ノートブック（古い版）には、この演習がありません。"


def match_cells(sub: list[Cell], ref: list[Cell]) -> tuple[list[tuple[int, int]], list[int]]:
    """参照の空でないセル i に提出物のセル j を対応させる: (対応 (i, j) の並び, 見つからない i の並び)。

    中身で先に対応をつけます（id も中身も同じ、次に中身が同じ）。id だけが同じ（中身が違う）セルと、
    関数名・チェック番号が同じセルは、そのあとで残ったセルどうしだけ。学習者が書き換えたセルは id か
    関数名で見つかり、版が変わって id が別の中身へ移っていても（古い版の提出物）中身の同じセルが先に
    対応するので、古い版にないセルが「削除」に見えることはありません。"""
    real = [i for i, rc in enumerate(ref) if rc.hash]  # 空のセルは突き合わせない
    by_id = {c.id: j for j, c in reversed(list(enumerate(sub))) if c.id}
    by_hash: dict[tuple[str, str], list[int]] = {}
    for j, c in enumerate(sub):
        by_hash.setdefault((c.type, c.hash), []).append(j)

    def same_id(rc: Cell, same_content: bool) -> list[int]:
        j = by_id.get(rc.id) if rc.id else None
        if j is None or sub[j].type != rc.type or (same_content and sub[j].hash != rc.hash):
            return []
        return [j]

    rules = (lambda rc: same_id(rc, same_content=True),
             lambda rc: by_hash.get((rc.type, rc.hash), []),
             lambda rc: same_id(rc, same_content=False),
             lambda rc: [j for j, c in enumerate(sub) if set(rc.keys) & set(c.keys)])
    found: dict[int, int] = {}
    for rule in rules:
        for i in real:
            if i not in found:
                used = set(found.values())
                j = next((j for j in rule(ref[i]) if j not in used), None)
                if j is not None:
                    found[i] = j
    return sorted(found.items()), [i for i in real if i not in found]


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


def cell_notes(sub: list[Cell], ref: list[Cell], skip: set[int] = frozenset(), older: bool = False) -> list[str]:
    """skip: 備考に書かない参照のセル（古い版にない演習のセル）。older: 古い版と分かっているとき。"""
    notes = []
    pairs, missing = match_cells(sub, ref)
    missing = [i for i in missing if i not in skip]
    if missing:
        more = f" ほか {len(missing) - 1} 個" if len(missing) > 1 else ""
        why = "古い版にはまだなかったセルかもしれません" if older else "削除?"
        notes.append(f"演習ノートブックのセルが {len(missing)} 個見つかりません（{why}）: "
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
