"""先生向けの手引き（docs/workshop.md）が講座と合っていること: 時間の表はノートブックから数えたもの、名前を挙げた演習は
どれも実在し、どの演習にも落とし穴の行があり、どの本編にも計画があり、道筋の必須の演習は計画の表と同じ。"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

import ch6

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "workshop.md"
_ID = re.compile(r"\b6\.(?:1[0-9][abc]?|[1-9][abc]?)-\d+\b")


@pytest.fixture(scope="module")
def times():
    spec = importlib.util.spec_from_file_location("workshop_times", ROOT / "docs" / "workshop_times.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def text() -> str:
    return GUIDE.read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    level = heading.split(" ")[0]
    nxt = re.search(rf"^{level} ", text[start + len(heading):], re.M)
    return text[start: start + len(heading) + (nxt.start() if nxt else len(text))]


def expand(cell: str) -> set[str]:
    """'6.5-1〜6.5-10' のような範囲も 1 つずつに。"""
    ids = set(_ID.findall(cell))
    for a, b in re.findall(rf"({_ID.pattern})\s*〜\s*({_ID.pattern})", cell):
        prefix = a.rsplit("-", 1)[0]
        ids |= {f"{prefix}-{k}" for k in range(int(a.rsplit("-", 1)[1]), int(b.rsplit("-", 1)[1]) + 1)}
    return ids


def test_the_tables_are_what_the_script_counts(times, capsys):
    assert times.main(["--check"]) == 0, capsys.readouterr().out


def test_every_lesson_has_a_plan_and_every_talk_is_described(times, text):
    lessons = {p.stem for p in (ROOT / "notebooks").glob("6_*.ipynb")}
    assert set(times.PLAN) == lessons, sorted(set(times.PLAN) ^ lessons)
    talks = section(text, "## 4.")
    for talk, _ in times.PLAN.values():
        assert talk == "—" or f"**解説 {talk}：" in talks, f"解説 {talk} is not described in section 4"


def test_every_exercise_named_in_the_guide_exists(text):
    named = expand(text)
    unknown = sorted(named - set(ch6.registry()))
    assert not unknown, f"docs/workshop.md names exercises that do not exist: {unknown}"


def test_every_exercise_has_a_pitfall_row(text):
    rows = [ln for ln in section(text, "## 6.").splitlines() if ln.startswith("| 6.")]
    grouped = [ln.split("|")[1].strip() for ln in rows
               if len(expand(ln.split("|")[1])) > 1 and not ln.startswith("| 6.5-")]
    assert not grouped, f"one row per exercise (only 6.5's quiz shares a row): {grouped}"
    covered = set().union(*(expand(ln.split("|")[1]) for ln in rows))
    missing = sorted(set(ch6.registry()) - covered, key=lambda i: (i.split("-")[0], int(i.split("-")[1])))
    assert not missing, f"exercises without a row in section 6 of docs/workshop.md: {missing}"


def test_the_capstone_workshop_uses_the_plans_required_exercises(times, text):
    plan = section(text, "### 3 時間：仕上げの学習（6.9a）と推論（6.10）")
    required = set()
    for m in re.finditer(r"\*\*必須\*\*([^（|]*)", plan):
        required |= expand(m.group(1))
    want = set(times.PLAN["6_9a_train"][1]) | set(times.PLAN["6_10_inference"][1])
    assert required == want, (sorted(required), sorted(want))
    minutes = [int(b) for a, b in re.findall(r"^\| (\d+)–(\d+) 分", plan, re.M)]
    assert minutes and minutes[-1] == 180, minutes


def test_the_recorded_checks_listed_are_the_ones_the_wheel_strips(text):
    """「学習者に配るもの」が挙げる、記録した値と比べる演習は、@recorded の参照を持つチェックと同じ（数も）。"""
    from ch6 import recorded

    m = re.search(r"対象は (\d+) 題で[^\n]*\n\n((?:- [^\n]*\n)+)", text)
    assert m, "手引きに「対象は N 題で…」と、その後の箇条書きがない"
    listed = set(_ID.findall(m.group(2)))
    entries = ch6.registry()  # 先に: チェックのモジュールを読み込むと @recorded が MARKED に名前を入れる
    modules = set(recorded.MARKED.values())
    marked = {eid for eid, entry in entries.items() if entry.fn.__module__ in modules}
    assert listed == marked, f"手引きにだけある: {sorted(listed - marked)}、手引きにない: {sorted(marked - listed)}"
    assert int(m.group(1)) == len(marked)
