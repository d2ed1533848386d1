"""The accelerator leg's second half: the checks' own tests (tests/checks) on the chip, counted from pytest's JUnit
file, and set apart from the failures the CPU shares at the same commit (``tools/accelerator.py --checks``,
``--checks-only``, ``--baseline``)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_checks_tests(out: Path, tests: str = "tests/checks") -> dict:
    """The checks' own tests in a child process on the accelerator (before this process opens the chip)."""
    xml = out / "checks.xml"
    xml.unlink(missing_ok=True)
    env = dict(os.environ, CH6_TESTS_ON="accelerator", PYTHONHASHSEED="0")
    env.pop("JAX_PLATFORMS", None)
    # -o addopts=: the project's options name nbval's flags, and the chip's Python needs no nbval for these tests
    cmd = [sys.executable, "-m", "pytest", tests, "-q", "-o", "addopts=", "-p", "no:cacheprovider", "-m", "not integration",
           f"--junitxml={xml}", "-o", "junit_family=xunit1"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    result = {"seconds": round(time.perf_counter() - start, 1), "returncode": proc.returncode,
              "passed": 0, "failed": [], "skipped": 0, "skip_reasons": {}}
    if not xml.exists():
        result["failed"].append({"test": "(pytest did not run)", "message": proc.stdout[-600:] + proc.stderr[-600:]})
        return result
    reasons = Counter()
    for name, (status, message) in junit_cases(xml).items():
        if status == "failed":
            result["failed"].append({"test": name, "message": message[:300]})
        elif status == "skipped":
            result["skipped"] += 1
            reasons[message.removeprefix("Skipped: ")[:120]] += 1
        else:
            result["passed"] += 1
    result["skip_reasons"] = dict(reasons.most_common())
    return result


def junit_cases(xml: Path) -> dict[str, tuple[str, str]]:
    """pytest's JUnit file as {test: (passed | failed | skipped, message)}."""
    cases = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"  # classname: in both JUnit families
        bad = case.find("failure")
        bad = bad if bad is not None else case.find("error")
        skip = case.find("skipped")
        status, node = ("failed", bad) if bad is not None else ("skipped", skip) if skip is not None else ("passed", None)
        cases[name] = (status, (node.get("message") or "") if node is not None else "")
    return cases


def against_baseline(checks: dict, xml: Path) -> dict:
    """Marks the chip's failures that fail on the CPU too, in a run of the same tests at the same commit (--baseline):
    those are not the chip's doing, and the page lists them apart."""
    cpu = junit_cases(xml)
    also = [f["test"] for f in checks["failed"] if cpu.get(f["test"], ("",))[0] == "failed"]
    return {**checks, "also_on_cpu": also}


def checks_lines(checks: dict | None) -> list[str]:
    """The page's paragraph on the checks' own tests."""
    if not checks:
        return []
    lines = ["### The checks' own tests on the chip (tests/checks)", "",
             f"{checks['passed']} passed, {len(checks['failed'])} failed, {checks['skipped']} skipped "
             f"in {checks['seconds']} s (every right answer accepted and every wrong one named, at the chip's "
             f"device count)."]
    if checks["skip_reasons"]:
        lines += ["", "Skipped, by reason:"] + [f"- {n} × {why}" for why, n in checks["skip_reasons"].items()]
    also = set(checks.get("also_on_cpu", ()))
    chip = [f for f in checks["failed"] if f["test"] not in also]
    if also:
        lines += ["", f"Of the {len(checks['failed'])} failures, {len(also)} fail on the CPU too in the same tests at "
                  f"the same commit (not the chip's doing; listed last); {len(chip)} fail on the chip only."]
    if chip:
        lines += ["", "Failed on the chip only:" if also else "Failed:"]
        lines += [f"- `{f['test']}`: {f['message']}" for f in chip]
    if also:
        lines += ["", "Failed on the CPU as well:"] + [f"- `{name}`" for name in sorted(also)]
    return lines + [""]
