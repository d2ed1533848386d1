"""Stored outputs (printed numbers and figures) come from the ch6 code as it is now: every notebook was executed
after the last change to each ch6 file it imports (tools/executed_inputs.json, written by tools/twins.py's execute).
nbval compares printed text only in make test; this catches a stale figure or number in make quick, and names the
command that re-executes what depends on the changed file."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import nbinputs  # noqa: E402


def _notebooks():
    return [nb for folder in ("notebooks", "solutions") for nb in sorted((ROOT / folder).glob("*.ipynb"))]


def test_every_notebook_was_executed_after_the_ch6_files_it_imports_last_changed():
    stale = {nb.relative_to(ROOT).as_posix(): nbinputs.stale_inputs(nb) for nb in _notebooks()}
    stale = {nb: files for nb, files in stale.items() if files}
    changed = sorted({f for files in stale.values() for f, why in files.items() if why != "never"})
    lines = [f"{nb}: " + ", ".join(f"{f} ({why})" for f, why in sorted(files.items())) for nb, files in stale.items()]
    hint = "".join(f"\n  make depends MOD={f} RUN=1" for f in changed) or "\n  make notebook NB=<name>"
    assert not stale, ("outputs older than the ch6 code they come from (re-execute them):\n" + "\n".join(lines)
                       + "\nrun:" + hint)


def test_the_ledger_names_no_notebook_that_is_gone():
    ledger = json.loads(nbinputs.LEDGER.read_text(encoding="utf-8"))
    assert sorted(ledger) == sorted(nb.relative_to(ROOT).as_posix() for nb in _notebooks())


def test_a_changed_module_makes_its_dependents_stale(tmp_path, monkeypatch):
    """A ledger of the files as they are, but one old hash: the notebooks that import that file (only those) are named."""
    ledger = {nb.relative_to(ROOT).as_posix(): nbinputs.ledger_entry(nb) for nb in _notebooks()}  # all fresh
    key = "notebooks/6_10_inference.ipynb"
    ledger[key] = dict(ledger[key], **{"ch6/lm.py": "0" * 12})
    fake = tmp_path / "executed_inputs.json"
    fake.write_text(json.dumps(ledger), encoding="utf-8")
    monkeypatch.setattr(nbinputs, "LEDGER", fake)
    assert nbinputs.stale_inputs(ROOT / key) == {"ch6/lm.py": "changed"}
    assert nbinputs.stale_inputs(ROOT / "notebooks" / "6_1_vmap.ipynb") == {}
    del ledger[key]
    fake.write_text(json.dumps(ledger), encoding="utf-8")
    assert nbinputs.stale_inputs(ROOT / key) == {key: "never"}


@pytest.mark.parametrize("changed", ["ch6/sanitize.py", "ch6/nbval_sanitize.cfg", "ch6/explain.py",
                                     "ch6/checks/chips.py", "ch6/data/traces/measurements.json",
                                     "ch6/capstone/corpus.txt"])
def test_a_change_of_every_kind_of_input_makes_its_dependents_stale(tmp_path, monkeypatch, changed):
    """issue 48: a module reached only by relative imports, a check helper two sections share, a data file of any
    suffix read by a module. Every notebook that depends on it (make depends) is named, and only those."""
    sys.path.insert(0, str(ROOT / "tools"))
    import recipe

    ledger = {nb.relative_to(ROOT).as_posix(): nbinputs.ledger_entry(nb) for nb in _notebooks()}
    for entry in ledger.values():
        if changed in entry:
            entry[changed] = "0" * 12
    fake = tmp_path / "executed_inputs.json"
    fake.write_text(json.dumps(ledger), encoding="utf-8")
    monkeypatch.setattr(nbinputs, "LEDGER", fake)
    stale = {nb for nb in _notebooks() if nbinputs.stale_inputs(nb) == {changed: "changed"}}
    assert stale and stale == set(recipe.dependents(changed))
