"""tools/accelerator.py (the accelerator leg) on a small notebook, on the CPU: it reports the cells that raised
without meaning to, with the failing line and the values the cell assigned, and not the deliberate errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]


def test_the_leg_reports_unexpected_errors_with_their_line_and_values(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in (
        "import ch6\nn_devices = ch6.setup()",
        "with ch6.show.expect_error(ZeroDivisionError):\n    1 / 0",  # わざとのエラー: 数えない
        "temp = 0\nratio = 1 / temp",
        "size = 41\nassert size == 42",
        "print('1.5 TFLOP/s を測定')",
    )]
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nb, str(path))
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_NUM_CPU_DEVICES", "CH6_DEVICES")}
    env["JAX_PLATFORMS"] = "cpu"  # the tool unsets it; on this machine JAX finds only the CPU anyway
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "accelerator.py"), "--out", str(tmp_path / "out"),
                          str(path)], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 1, out.stdout + out.stderr
    (rec,) = json.loads((tmp_path / "out" / "records.json").read_text())
    errors = {e["cell"]: e for e in rec["errors"]}
    assert sorted(errors) == [2, 3]
    assert errors[2]["error"].startswith("ZeroDivisionError") and errors[2]["line"] == "ratio = 1 / temp"
    assert errors[3]["line"] == "assert size == 42" and errors[3]["values"] == {"size": "41"}
    assert any("TFLOP/s" in m["line"] for m in rec["measures"])
    assert "unexpected errors 2" in out.stdout and "at: assert size == 42" in out.stdout
    page = (tmp_path / "out" / "accelerator.md").read_text()
    assert "tiny.ipynb" in page


def test_the_checks_own_tests_run_in_a_child_and_are_counted(tmp_path):
    """--checks: the checks' tests in a child process (CH6_TESTS_ON=accelerator keeps conftest from forcing the CPU;
    here JAX finds only the CPU anyway), counted from pytest's JUnit file, failures and skip reasons listed."""
    leg = _load_leg()
    some = ROOT / "tests" / "checks" / "s6_1" / "test_section.py"  # one quick test
    got = leg.run_checks_tests(tmp_path, str(some.relative_to(ROOT)))
    assert got["passed"] + len(got["failed"]) > 0 and got["returncode"] == (1 if got["failed"] else 0), got
    lines = "\n".join(leg.checks_lines(got))
    assert f"{got['passed']} passed, {len(got['failed'])} failed" in lines
    fake = {"seconds": 1.0, "passed": 3, "failed": [{"test": "t.py::x", "message": "AssertionError: 1"}],
            "skipped": 2, "skip_reasons": {"集団通信は 2 デバイス以上でしか現れない": 2}}
    lines = "\n".join(leg.checks_lines(fake))
    assert "3 passed, 1 failed, 2 skipped" in lines and "- 2 × 集団通信" in lines and "`t.py::x`: AssertionError" in lines


def test_a_checks_only_run_combines_with_the_notebooks_of_the_same_version(tmp_path):
    leg = _load_leg()
    env = {"date": "2026-12-06", "jax": "0.12.0.1", "python": "3.12.1", "backend": "tpu", "device_kind": "TPU v5 lite",
           "device_count": 1, "cpu_devices": 8, "mode": "accelerator"}
    a = _run_folder(tmp_path / "a", env, [{"notebook": "notebooks/6_1_vmap.ipynb", "seconds": 1.0, "cells": [0.1],
                                           "errors": [], "checks": [], "measures": []}])
    b = tmp_path / "b"
    b.mkdir()
    (b / "run.json").write_text(json.dumps({"env": env, "skipped": [], "checks": {
        "seconds": 9.0, "passed": 5, "failed": [], "skipped": 1, "skip_reasons": {"needs 2 devices": 1}}}))
    target = tmp_path / "accelerator.md"
    assert leg.main(["--combine", str(a), str(b), "--record", str(target)]) == 0
    text = target.read_text()
    assert "<!-- mode: accelerator-jax0.12.0.1 -->" in text
    assert "notebooks/6_1_vmap.ipynb" in text and "5 passed, 0 failed, 1 skipped" in text


def test_a_checks_only_run_combined_alone_keeps_its_own_section(tmp_path):
    """--combine of a --checks-only folder (run.json, no records.json) writes MODE-jaxVERSION-checks, as the live
    --checks-only run does, and leaves the notebooks' section of that version as it was."""
    leg = _load_leg()
    env = {"date": "2026-12-07", "jax": "0.12.0.1", "python": "3.12.1", "backend": "tpu", "device_kind": "TPU v5 lite",
           "device_count": 1, "cpu_devices": 1, "mode": "accelerator"}
    b = tmp_path / "b"
    b.mkdir()
    (b / "run.json").write_text(json.dumps({"env": env, "skipped": [], "checks": {
        "seconds": 9.0, "passed": 5, "failed": [], "skipped": 0, "skip_reasons": {}}}))
    target = tmp_path / "accelerator.md"
    target.write_text(leg.merge("", "accelerator-jax0.12.0.1", "## the notebooks\nnotebooks/6_1_vmap.ipynb\n"))
    assert leg.main(["--combine", str(b), "--record", str(target)]) == 0
    text = target.read_text()
    assert "<!-- mode: accelerator-jax0.12.0.1-checks -->" in text and "5 passed, 0 failed" in text
    assert "<!-- mode: accelerator-jax0.12.0.1 -->" in text and "notebooks/6_1_vmap.ipynb" in text


def test_failures_the_cpu_shares_are_listed_apart(tmp_path):
    leg = _load_leg()
    xml = tmp_path / "cpu.xml"
    xml.write_text('<testsuites><testsuite><testcase classname="t" name="a"><failure message="x"/></testcase>'
                   '<testcase classname="t" name="b"/></testsuite></testsuites>')
    checks = {"seconds": 1.0, "passed": 1, "skipped": 0, "skip_reasons": {},
              "failed": [{"test": "t::a", "message": "x"}, {"test": "t::b", "message": "only on the chip"}]}
    text = "\n".join(leg.checks_lines(leg.against_baseline(checks, xml)))
    assert "1 fail on the CPU too" in text and "1 fail on the chip only" in text
    chip_part, cpu_part = text.split("Failed on the CPU as well:")
    assert "t::b`: only on the chip" in chip_part and "t::a" not in chip_part and "t::a" in cpu_part


def test_the_record_keeps_one_section_per_mode():
    import importlib.util

    spec = importlib.util.spec_from_file_location("accelerator", ROOT / "tools" / "accelerator.py")
    leg = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(leg)
    page = leg.merge("", "auto", "## auto\nfirst\n")
    page = leg.merge(page, "accelerator", "## accelerator\nchip\n")
    page = leg.merge(page, "auto", "## auto\nsecond\n")
    assert page.startswith(leg.TITLE)
    assert "chip" in page and "second" in page and "first" not in page
    assert page.count("<!-- mode: auto -->") == 1


def _load_leg():
    import importlib.util

    spec = importlib.util.spec_from_file_location("accelerator", ROOT / "tools" / "accelerator.py")
    leg = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(leg)
    return leg


def _run_folder(folder: Path, env: dict, records: list[dict], skipped=()) -> Path:
    folder.mkdir(parents=True)
    (folder / "records.json").write_text(json.dumps(records))
    (folder / "run.json").write_text(json.dumps({"env": env, "skipped": list(skipped)}))
    return folder


def test_runs_of_several_calls_make_one_section(tmp_path):
    """Lessons in one call of the machine and solutions in another: one section, lessons first, totals over both;
    runs on another JAX (or chip, mode, day) are refused rather than mixed."""
    leg = _load_leg()
    env = {"date": "2026-12-06", "jax": "0.10.2", "python": "3.11.7", "backend": "tpu", "device_kind": "TPU v5 lite",
           "device_count": 1, "cpu_devices": 8, "mode": "accelerator"}

    def rec(name, checks=(), errors=()):
        return {"notebook": name, "seconds": 1.0, "cells": [0.1], "errors": list(errors), "checks": list(checks),
                "measures": []}

    a = _run_folder(tmp_path / "a", env, [rec("solutions/6_1_vmap.ipynb", ["✅ 6.1-1"])])
    b = _run_folder(tmp_path / "b", env, [rec("notebooks/6_1_vmap.ipynb"), rec("solutions/6_2_pmap.ipynb", ["❌ 6.2-1"])],
                    [("notebooks/6_6_multihost.ipynb", "needs TCP")])
    target = tmp_path / "accelerator.md"
    assert leg.main(["--combine", str(a), str(b), "--record", str(target)]) == 0
    text = target.read_text()
    rows = [line.split(" | ")[0].lstrip("| ") for line in text.splitlines() if line.startswith("| notebooks/")
            or line.startswith("| solutions/")]
    assert rows == ["notebooks/6_1_vmap.ipynb", "solutions/6_1_vmap.ipynb", "solutions/6_2_pmap.ipynb",
                    "notebooks/6_6_multihost.ipynb"]
    assert "Unexpected errors: 0. Checks answering ❌: 1." in text and "- ❌ 6.2-1" in text
    c = _run_folder(tmp_path / "c", {**env, "jax": "0.12.0.1"}, [rec("notebooks/6_2_pmap.ipynb")])
    import pytest

    with pytest.raises(SystemExit, match="jax"):
        leg.main(["--combine", str(a), str(c)])
