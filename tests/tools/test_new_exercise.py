"""Inserting an exercise touches only what CONTRIBUTING lists ("A new exercise"), and `make exercise` runs every test
it can break (issue 48):
- no heading numbers a problem, so an exercise inserted mid-section renumbers nothing and changes no other cell's
  grading hash (a cell's hash is of its whole text: ch6/grading/exercises.py);
- every quick test that reads the exercises (solutions/, exercises/, the check registry, the workshop guide's
  pitfall rows) is in the recipe's FAST_TESTS;
- the rule of MEANS_REQUIRED holds for a new exercise without editing that list: the recipe's mutation step fails on
  a surviving mutant that keeps the values and changes the means (tools/mutation/report.py MEANS_OPERATORS)."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import mutate  # noqa: E402
import recipe  # noqa: E402

# a heading that numbers a problem: 「## 問題 3：…」「### 問題 2（チャレンジ）」
NUMBERED = re.compile(r"^#+\s*問題\s*\d+", re.M)
# what marks a test module as reading the exercises
READS_EXERCISES = re.compile(r"""["'/]solutions\b|["'/]exercises\b|registry\(\)|workshop\.md|exercises\.json""")
# modules make quick does not run, with the leg that does
ELSEWHERE = {"tests/site/test_browser_*.py": "make test-site (headless Chromium, CH6_SITE=1)"}


def test_no_heading_numbers_a_problem():
    found = []
    for path in sorted((ROOT / "solutions").glob("*.md")) + sorted((ROOT / "notebooks").glob("*.md")):
        found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in NUMBERED.finditer(path.read_text(encoding="utf-8"))]
    for path in sorted((ROOT / "exercises").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            if cell["cell_type"] == "markdown":
                found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in NUMBERED.finditer(text)]
    assert found == [], "CONTRIBUTING: prose never numbers the problems (the heading says what it asks)"


def _quick_modules() -> list[Path]:
    """The test modules make quick runs that a section's check tests do not cover, slow ones left out."""
    sys.path.insert(0, str(ROOT))
    import conftest

    out = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[:2] == ("tests", "checks") or path.stem in conftest.SLOW_MODULES or any(rel.match(pattern) for pattern in ELSEWHERE):
            continue
        out.append(path)
    return out


def test_make_exercise_runs_every_quick_test_that_reads_the_exercises():
    covered = [ROOT / p for p in recipe.FAST_TESTS]
    missing = [path.relative_to(ROOT).as_posix() for path in _quick_modules()
               if READS_EXERCISES.search(path.read_text(encoding="utf-8"))
               and not any(path == c or c in path.parents for c in covered)]
    assert missing == [], f"add these to FAST_TESTS in tools/recipe.py (make exercise runs them): {missing}"
    assert "tests/test_workshop_guide.py" in recipe.FAST_TESTS  # the guide's pitfall row of each exercise


def test_the_recipe_runs_the_mutants_with_the_means_rule():
    steps = dict(recipe.steps("exercise", "6_3b_shard_map"))
    assert steps["mutation"][1:3] == ["tools/mutate.py", str(ROOT / "solutions" / "6_3b_shard_map.ipynb")]
    from tests.tools.test_mutate import MEANS_REQUIRED

    used = {op for ops in MEANS_REQUIRED.values() for op in ops}
    assert used <= mutate.MEANS_OPERATORS, "MEANS_REQUIRED names an operator the recipe's rule does not know"
    assert mutate.MEANS_OPERATORS <= {op.name for op in mutate.OPERATORS}


def test_a_surviving_means_mutant_fails_the_recipes_mutation_step():
    def outcome(op, status, equivalent=None):
        return mutate.Outcome("6.99-1", f"{op} の変異体", status, "", equivalent=equivalent, operator=op)

    outcomes = [outcome("collective_by_gather", "pass"), outcome("vmap_to_loop", "pass", equivalent="自由"),
                outcome("ppermute_by_gather", "fail"), outcome("range_bounds", "pass")]
    assert [(o.operator, o.label) for o in mutate.means_survivors(outcomes)] == \
        [("collective_by_gather", "collective_by_gather の変異体")]
