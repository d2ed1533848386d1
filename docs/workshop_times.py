"""ワークショップの手引き（docs/workshop.md）の「時間の目安」の表を、リポジトリのノートブックから数えて作る。

    .venv/bin/python docs/workshop_times.py          # Markdown の表を表示する（何も実行しない。1 秒ほど）
    .venv/bin/python docs/workshop_times.py --write  # docs/workshop.md の 2 つの表（印の間）を書き直す
    .venv/bin/python docs/workshop_times.py --check  # 手引きの表がノートブックと合っているか（合わなければ終了コード 1）

手引きの表は <!-- workshop_times: NAME --> と <!-- /workshop_times --> の間にあり、手で書き換えません
（tests/test_workshop_guide.py が、表がこのスクリプトの出力と同じことを確かめます）。

数え方（手引きの「時間の測り方」と同じ）:

- 読む時間: notebooks/ の講義のマークダウンのセルの文字数（コードブロック・URL・HTML のタグ・空白を除く）を
  READING_CHARS_PER_MIN 字/分で読むとして、コードセルの数 × CODE_CELL_MIN 分（コードと出力を見る）を足す。
- 演習の時間（見積もり）: solutions/ の解答の行（### BEGIN SOLUTION と ### END SOLUTION の間の、空行と
  コメントを除いた行）から、1 問につき EXERCISE_BASE_MIN 分 + 1 行 EXERCISE_LINE_MIN 分。
- 本編ごとの計画（表 plans）: PLAN の解説（TALK_MIN 分）+ 読む時間 + 必須の演習の見積もり。発展の演習は、
  解答のノートブックの演習のうち必須でないもの（数えて出すので、演習を足すと発展に現れる）。
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READING_CHARS_PER_MIN = 400  # 日本語の技術文を、式やコードと見比べながら読む速さ（字/分）
CODE_CELL_MIN = 0.5          # コードセル 1 つ: 読んで実行し、出力を確かめる（分）
EXERCISE_BASE_MIN = 4        # 演習 1 問: 問題文を読み、チェックを実行して 1 行を読む（分）
EXERCISE_LINE_MIN = 2        # 解答 1 行あたり（分）
TALK_MIN = 10                # 短い解説 1 つ（分、手引きの 4 節）

# 本編ごとの計画: (解説の記号（手引きの 4 節、なければ "—"）, 必須の演習)。発展はそれ以外の演習
PLAN: dict[str, tuple[str, tuple[str, ...]]] = {
    "6_1_vmap": ("A", ("6.1-1", "6.1-2", "6.1-4")),
    "6_2_pmap": ("—", ("6.2-1", "6.2-3")),
    "6_3a_sharding": ("B", ("6.3a-1", "6.3a-3")),
    "6_3b_shard_map": ("C", ("6.3b-1", "6.3b-4")),
    "6_3c_migration": ("—", ("6.3c-1",)),
    "6_4_patterns": ("D", ("6.4-1", "6.4-3")),
    "6_5_summary": ("D", tuple(f"6.5-{k}" for k in range(1, 11))),
    "6_6_multihost": ("E", ("6.6-1", "6.6-3")),
    "6_7_cost_memory": ("F", ("6.7-1", "6.7-3")),
    "6_8a_pipeline": ("G", ("6.8a-2", "6.8a-3")),
    "6_8b_sequence_expert": ("G", ("6.8b-1", "6.8b-3")),
    "6_9a_train": ("H", ("6.9a-1",)),
    "6_9b_checkpoint_resume": ("H", ("6.9b-2",)),
    "6_9c_lost_process": ("H", ()),
    "6_10_inference": ("I", ("6.10-1", "6.10-2", "6.10-3")),
    "6_11a_profile": ("—", ("6.11a-1", "6.11a-3")),
    "6_11b_overlap": ("—", ("6.11b-1", "6.11b-2")),
}


def _natural(name: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def prose_chars(text: str) -> int:
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"https?://\S+|<[^>]+>|!\[[^\]]*\]\([^)]*\)", "", text)
    return len(re.sub(r"\s+", "", text))


def lesson(path: Path) -> dict:
    nb = json.loads(path.read_text(encoding="utf-8"))
    src = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in nb["cells"]]
    chars = sum(prose_chars(s) for c, s in zip(nb["cells"], src) if c["cell_type"] == "markdown")
    code = sum(1 for c in nb["cells"] if c["cell_type"] == "code")
    return {"chars": chars, "code_cells": code,
            "read_min": chars / READING_CHARS_PER_MIN + code * CODE_CELL_MIN}


_CHECK = re.compile(r"""ch6\.check\(\s*["']([^"']+)["']""")


def per_exercise(path: Path) -> list[tuple[str, int]]:
    """解答の各演習の (番号, 解答の行数)。解答のブロックの行は、その後の最初の ch6.check の演習に数える。"""
    nb = json.loads(path.read_text(encoding="utf-8"))
    out, pending, inside = [], 0, False
    for c in nb["cells"]:
        if c["cell_type"] != "code":
            continue
        for ln in ("".join(c["source"]) if isinstance(c["source"], list) else c["source"]).splitlines():
            s = ln.strip()
            if s.startswith("### BEGIN SOLUTION"):
                inside = True
            elif s.startswith("### END SOLUTION"):
                inside = False
            elif inside and s and not s.startswith("#"):
                pending += 1
            for m in _CHECK.finditer(ln):
                out.append((m.group(1), pending))
                pending = 0
    return out


def exercise_min(lines: int) -> int:
    return EXERCISE_BASE_MIN + lines * EXERCISE_LINE_MIN


def exercises(path: Path) -> dict:
    found = per_exercise(path)
    lines = sum(n for _, n in found)
    return {"exercises": len(found), "solution_lines": lines,
            "exercise_min": sum(exercise_min(n) for _, n in found)}


def table() -> list[dict]:
    rows = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb"), key=lambda p: _natural(p.stem)):
        row = {"notebook": path.stem, **lesson(path)}
        sol = ROOT / "solutions" / path.name
        row.update(exercises(sol) if sol.exists() else {"exercises": 0, "solution_lines": 0, "exercise_min": 0})
        rows.append(row)
    return rows


def markdown(rows: list[dict]) -> str:
    out = ["| ノートブック | 文章（字） | コードセル | 読む（分） | 演習（問） | 解答（行） | 演習（分、見積もり） |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['notebook']} | {r['chars']:,} | {r['code_cells']} | {round(r['read_min'])} | "
                   f"{r['exercises']} | {r['solution_lines']} | {r['exercise_min']} |")
    return "\n".join(out)


def exercise_markdown() -> str:
    """演習 1 問ごとの見積もり（分）: 節ごとに 1 行。どれも同じなら「a〜b 各 m」。"""
    out = ["| 節 | 演習（見積もり、分） |", "|---|---|"]
    for path in sorted((ROOT / "solutions").glob("*.ipynb"), key=lambda p: _natural(p.stem)):
        found = [(i, exercise_min(n)) for i, n in per_exercise(path)]
        if not found:
            continue
        section = found[0][0].split("-")[0]
        minutes = {m for _, m in found}
        if len(found) > 2 and len(minutes) == 1:
            cell = f"{found[0][0]}〜{found[-1][0]} 各 {minutes.pop()}"
        else:
            cell = "、".join(f"{i} {m}" for i, m in found)
        out.append(f"| {section} | {cell} |")
    return "\n".join(out)


def plans() -> list[dict]:
    """本編ごとの計画: 解説、読む時間、必須の演習とその見積もり、発展の演習、合計（分）。"""
    rows = []
    for r in table():
        talk, required = PLAN[r["notebook"]]
        sol = ROOT / "solutions" / f"{r['notebook']}.ipynb"
        found = dict(per_exercise(sol)) if sol.exists() else {}
        unknown = [i for i in required if i not in found]
        if unknown:
            raise SystemExit(f"PLAN[{r['notebook']!r}] names exercises the solution does not have: {unknown}")
        req_min = sum(exercise_min(found[i]) for i in required)
        rows.append({"notebook": r["notebook"], "talk": talk, "read_min": round(r["read_min"]),
                     "required": list(required), "required_min": req_min,
                     "optional": [i for i in found if i not in required],
                     "total_min": (TALK_MIN if talk != "—" else 0) + round(r["read_min"]) + req_min})
    return rows


def _ids(ids: list[str]) -> str:
    if len(ids) > 2 and ids == [f"{ids[0].rsplit('-', 1)[0]}-{k}" for k in range(1, len(ids) + 1)]:
        return f"{ids[0]}〜{ids[-1]}"
    return "、".join(ids) or "—"


def plan_markdown() -> str:
    out = ["| 本編 | 解説 | 読む（分） | 必須の演習 | 必須の演習（分） | 発展の演習 | 合計（分） |",
           "|---|:-:|---:|---|---:|---|---:|"]
    for r in plans():
        out.append(f"| {r['notebook']} | {r['talk']} | {r['read_min']} | {_ids(r['required'])} | "
                   f"{r['required_min']} | {_ids(r['optional'])} | {r['total_min']} |")
    return "\n".join(out)


def _short(notebook: str) -> str:
    """"6_10_inference" -> "6.10"。"""
    return notebook.split("_")[0] + "." + notebook.split("_")[1]


def long_lessons_markdown(limit: int = 90) -> str:
    """合計が 1 コマ（limit 分）を超える本編を挙げる文（手引きの 3 節、本編ごとの計画の表の下）。"""
    long = [_short(r["notebook"]) for r in plans() if r["total_min"] > limit]
    return (f"合計が {limit} 分を超える本編（{'、'.join(long)}）は、1 コマに収めるなら発展の演習を宿題にします。\n"
            "読む時間の一部（6.7 の 6〜7 節、6.10 の 7 節のアクセラレータの節など）も、授業の後に回します。")


def capstone_reading_markdown() -> str:
    """6.9a と 6.10 の 3 時間の道筋の下の、読む時間の文（2 節の表の数）。"""
    read = {r["notebook"].split("_")[0] + "." + r["notebook"].split("_")[1]: round(r["read_min"]) for r in table()}
    return (f"- 読む時間は 2 節の表で 6.9a が {read['6.9a']} 分、6.10 が {read['6.10']} 分です。"
            "この道筋では、宿題に回した節の分だけ短くしています。")


TABLES = {"lessons": lambda: markdown(table()), "exercises": exercise_markdown, "plans": plan_markdown,
          "long_lessons": long_lessons_markdown, "capstone_reading": capstone_reading_markdown}
GUIDE = ROOT / "docs" / "workshop.md"
_BLOCK = re.compile(r"(<!-- workshop_times: (\w+) -->\n)(.*?)(\n<!-- /workshop_times -->)", re.S)


def rewrite(text: str) -> str:
    """手引きの本文の、印の間の表を今の表に置き換えたもの。"""
    return _BLOCK.sub(lambda m: m.group(1) + TABLES[m.group(2)]() + m.group(4), text)


def main(argv: list[str]) -> int:
    if "--write" in argv or "--check" in argv:
        text = GUIDE.read_text(encoding="utf-8")
        names = [m.group(2) for m in _BLOCK.finditer(text)]
        if sorted(names) != sorted(TABLES):
            print(f"{GUIDE.name}: expected the tables {sorted(TABLES)} between markers, found {names}")
            return 1
        new = rewrite(text)
        if "--check" in argv:
            if new != text:
                print(f"{GUIDE.name}: the time tables are stale; run: .venv/bin/python docs/workshop_times.py --write")
                return 1
            return 0
        GUIDE.write_text(new, encoding="utf-8")
        return 0
    sys.stdout.write(markdown(table()) + "\n\n" + exercise_markdown() + "\n\n" + plan_markdown() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
