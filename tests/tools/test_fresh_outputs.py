"""Stored outputs (printed numbers and figures) come from the ch6 code as it is now: every notebook was executed
after the last change to each ch6 file it imports (tools/executed_inputs.json, written by tools/twins.py's execute).
nbval compares printed text only in make test; this catches a stale figure or number in make quick, and names the
command that re-executes what depends on the changed file."""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import recipe  # noqa: E402


def _notebooks():
    return [nb for folder in ("notebooks", "solutions") for nb in sorted((ROOT / folder).glob("*.ipynb"))]


def test_every_notebook_was_executed_after_the_ch6_files_it_imports_last_changed():
    stale = {nb.relative_to(ROOT).as_posix(): recipe.stale_inputs(nb) for nb in _notebooks()}
    stale = {nb: files for nb, files in stale.items() if files}
    changed = sorted({f for files in stale.values() for f, why in files.items() if why != "never"})
    lines = [f"{nb}: " + ", ".join(f"{f} ({why})" for f, why in sorted(files.items())) for nb, files in stale.items()]
    hint = "".join(f"\n  make depends MOD={f} RUN=1" for f in changed) or "\n  make notebook NB=<name>"
    assert not stale, ("outputs older than the ch6 code they come from (re-execute them):\n" + "\n".join(lines)
                       + "\nrun:" + hint)


def test_the_ledger_names_no_notebook_that_is_gone():
    ledger = json.loads(recipe.LEDGER.read_text(encoding="utf-8"))
    assert sorted(ledger) == sorted(nb.relative_to(ROOT).as_posix() for nb in _notebooks())


def test_a_changed_module_makes_its_dependents_stale(tmp_path, monkeypatch):
    """A ledger of the files as they are, but one old hash: the notebooks that import that file (only those) are named."""
    ledger = {nb.relative_to(ROOT).as_posix(): recipe.input_hashes(nb) for nb in _notebooks()}  # all fresh
    key = "notebooks/6_10_inference.ipynb"
    ledger[key] = dict(ledger[key], **{"ch6/lm.py": "0" * 12})
    fake = tmp_path / "executed_inputs.json"
    fake.write_text(json.dumps(ledger), encoding="utf-8")
    monkeypatch.setattr(recipe, "LEDGER", fake)
    assert recipe.stale_inputs(ROOT / key) == {"ch6/lm.py": "changed"}
    assert recipe.stale_inputs(ROOT / "notebooks" / "6_1_vmap.ipynb") == {}
    del ledger[key]
    fake.write_text(json.dumps(ledger), encoding="utf-8")
    assert recipe.stale_inputs(ROOT / key) == {key: "never"}
