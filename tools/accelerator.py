#!/usr/bin/env python3
"""The accelerator leg: every lesson and solution notebook on whatever accelerator JAX finds.

    python tools/accelerator.py                       # all lessons and solutions, JAX_PLATFORMS unset
    python tools/accelerator.py notebooks/6_7_cost_memory.ipynb --out build/accelerator
    python tools/accelerator.py --record docs/accelerator.md   # also write the result page (date, chip, JAX)
    python tools/accelerator.py --combine run1 run2 --record docs/accelerator.md   # one page from several runs
    python tools/accelerator.py --checks-only --record docs/accelerator.md   # the checks' own tests on the chip
    make test-accelerator                             # the same, from the project's venv

Jupyter kernels need TCP sockets, which some accelerator machines forbid, so the cells run in-process in IPython's
InteractiveShell (no socket), one notebook after another in one process: the chip is opened once (opening it costs
about 10 s, and only one program at a time may hold it). Each notebook gets a fresh namespace, its own working
folder and JAX's caches cleared. The lessons that start several processes talking over TCP (6.6, 6.9c) are skipped
where no TCP socket can be opened, with the reason printed.

Per notebook it prints the cells that raised an error that is not one of the lesson's deliberate errors (those run
inside ``ch6.show.expect_error`` and do not raise), every check line (✅ / ❌ / ⏳), and the lines that report a
measurement. The exit status is 1 when any notebook had an unexpected error or a ❌ for a reference solution.
CI has no accelerator: this leg is run by hand (README, "On an accelerator"), and its last result is recorded in
``docs/accelerator.md``, one section per mode and JAX version (``accelerator-jax0.12.0.1``, ``auto-jax0.10.2``).

``--checks`` (or ``--checks-only``, without the notebooks) also runs the checks' own tests (tests/checks: every
right answer accepted, every wrong one named) in a child process on the accelerator at its device count, before the
notebooks open the chip; ``CH6_TESTS_ON=accelerator`` keeps conftest.py from forcing the CPU. Tests that need more
devices than the chip has are skipped with their reason, and the page counts them.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accelerator_checks import against_baseline, checks_lines, junit_cases, run_checks_tests  # noqa: F401 (the tests reach them here)

ROOT = Path(__file__).resolve().parent.parent
NEEDS_TCP = ("6_6_multihost", "6_9c_lost_process")
CHECK = re.compile(r"[✅❌⏳]")
FAIL = "❌"
# lines that report a measurement or what ran where (kept in the record for the lessons that measure)
MEASURE = re.compile(r"TFLOP|MFU|GB/s|ミリ秒|\bms\b|µs|トークン/秒|tokens?/s|ルーフライン|バックエンド|測定|計測")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def tcp_allowed() -> bool:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
        return True
    except OSError:
        return False


def default_paths() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "solutions").glob("*.ipynb"))


def _config_snapshot():
    import jax

    return dict(jax.config.values)


def _config_restore(snapshot) -> None:
    import jax

    for name, value in snapshot.items():
        if jax.config.values.get(name) != value:
            try:
                jax.config.update(name, value)
            except Exception:  # a flag that is fixed once the backends exist (jax_num_cpu_devices): leave it
                pass


def failing_line(err: BaseException, source: str) -> str:
    """The line of the cell where ``err`` was raised (the last traceback frame inside the cell), or ''."""
    lines = source.splitlines()
    tb, found = err.__traceback__, ""
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith("<ipython-input") or "ipykernel" in tb.tb_frame.f_code.co_filename:
            if 0 < tb.tb_lineno <= len(lines):
                found = lines[tb.tb_lineno - 1].strip()
        tb = tb.tb_next
    return found[:300]


def snapshot(ns: dict, source: str, limit: int = 200) -> dict:
    """The values of the small things the cell assigned (numbers, strings, tuples, short arrays), so that a failed
    assert on a compiler figure shows what this backend printed without a second run."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    out = {}
    for name in sorted(names):
        value = ns.get(name)
        if isinstance(value, (int, float, str, tuple, list, dict)) or (
                getattr(value, "size", 1e9) <= 16 and hasattr(value, "dtype")):
            try:
                out[name] = repr(value)[:limit]
            except Exception as exc:  # a donated (deleted) array, for one
                out[name] = f"<{type(exc).__name__}>"
    return out


def shown(path: Path) -> str:
    """The notebook's path as the record shows it (relative to the project when inside it)."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def run_notebook(shell, path: Path) -> dict:
    """Runs one notebook's code cells in ``shell``; returns its record."""
    import nbformat
    from IPython.utils.capture import capture_output

    nb = nbformat.read(str(path), as_version=4)
    rec = {"notebook": shown(path), "cells": [], "errors": [], "checks": [], "measures": []}
    here = os.getcwd()
    os.chdir(path.parent)
    start = time.perf_counter()
    try:
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            t = time.perf_counter()
            with capture_output(display=False) as cap:
                result = shell.run_cell(cell.source, store_history=True)
            secs = time.perf_counter() - t
            text = ANSI.sub("", cap.stdout + cap.stderr)
            err = result.error_in_exec or result.error_before_exec
            rec["cells"].append(round(secs, 2))
            first = cell.source.strip().splitlines()[0][:90] if cell.source.strip() else ""
            if err is not None:
                rec["errors"].append({"cell": index, "source": first,
                                      "error": f"{type(err).__name__}: {ANSI.sub('', str(err))[:600]}",
                                      "line": failing_line(err, cell.source),
                                      "values": snapshot(shell.user_ns, cell.source)})
            lines = text.splitlines()
            rec["checks"] += [line.strip()[:300] for line in lines if CHECK.search(line)]
            if any(MEASURE.search(line) for line in lines if not CHECK.search(line)):
                # the whole printed output of a cell that measures (its table rows say no keyword)
                rec["measures"] += [{"cell": index, "line": line.rstrip()[:200]}
                                    for line in lines[:40] if line.strip() and not CHECK.search(line)]
    finally:
        rec["seconds"] = round(time.perf_counter() - start, 1)
        os.chdir(here)
    return rec


def run_all(paths: list[Path], out: Path) -> list[dict]:
    """In this process: every notebook in turn, each with a fresh namespace."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.colors = "NoColor"
    records, snapshot = [], None
    for path in paths:
        shell.reset(new_session=True)
        rec = run_notebook(shell, path)
        if snapshot is None:  # after the first notebook's set-up cell, JAX is imported
            snapshot = _config_snapshot()
        else:
            _config_restore(snapshot)
        try:
            import jax

            jax.clear_caches()
        except Exception:
            pass
        records.append(rec)
        (out / "records.json").write_text(json.dumps(records, ensure_ascii=False, indent=1), encoding="utf-8")
        report(rec)
    return records


def report(rec: dict) -> None:
    bad = [c for c in rec["checks"] if FAIL in c]
    print(f"== {rec['notebook']}: {rec['seconds']} s, {len(rec['cells'])} cells, "
          f"unexpected errors {len(rec['errors'])}, checks {len(rec['checks'])} (❌ {len(bad)})", flush=True)
    for e in rec["errors"]:
        print(f"   cell {e['cell']} ({e['source']}): {e['error'][:400]}", flush=True)
        if e.get("line"):
            print(f"     at: {e['line']}", flush=True)
    for line in bad:
        print(f"   {line}", flush=True)


def environment() -> dict:
    import jax

    dev = jax.devices()[0]
    return {"date": datetime.date.today().isoformat(), "jax": jax.__version__,
            "python": sys.version.split()[0], "backend": jax.default_backend(),
            "device_kind": getattr(dev, "device_kind", str(dev)), "device_count": jax.device_count(),
            "cpu_devices": len(jax.devices("cpu")), "mode": os.environ.get("CH6_DEVICES", "auto")}


MODES = {
    "accelerator": "everything on the chip (`CH6_DEVICES=accelerator`, as `ch6.setup(accelerator=True)`)",
    "auto": "as a learner's `ch6.setup()` does it (beside a lone chip: meshes on CPU devices, timings on the chip)",
}
TITLE = """# The accelerator leg: its last result

Written by `python tools/accelerator.py --record docs/accelerator.md` (`make test-accelerator RECORD=1`); do not edit.
One section per mode and JAX version (`MODE-jaxVERSION`), replaced by the last run in that mode on that JAX (one
run, or several runs of one day combined with `--combine`, when the notebooks do not fit one call of the machine).
`MODE-jaxVERSION-checks` is a run of the checks' own tests alone (`--checks-only`); a section ending in `-partial`,
`-rerun` or a notebook's name (`--section`) is a later run of some notebooks only, kept beside that full run.
"""


def merge(old: str, mode: str, section: str) -> str:
    """The page with this mode's section replaced (or added), the other modes' sections kept."""
    parts = {}
    for chunk in re.findall(r"<!-- mode: (\S+) -->\n(.*?)<!-- /mode -->", old, flags=re.S):
        parts[chunk[0]] = chunk[1]
    parts[mode] = section
    body = "\n".join(f"<!-- mode: {m} -->\n{parts[m]}<!-- /mode -->\n" for m in sorted(parts))
    return TITLE + "\n" + body


def section_name(env: dict) -> str:
    """The page's section for this run: its mode and JAX version (both versions are kept side by side)."""
    return f"{env['mode']}-jax{env['jax']}"


def page(env: dict, records: list[dict], skipped: list[tuple[str, str]], checks: dict | None = None) -> str:
    """One mode's section of the recorded result (docs/accelerator.md)."""
    lines = [
        f"## Mode `{env['mode']}`: {MODES.get(env['mode'], '')}",
        "",
        f"- date: {env['date']}",
        f"- chip: {env['device_kind']} × {env['device_count']} (JAX backend `{env['backend']}`, "
        f"{env['cpu_devices']} CPU devices beside it), mode `{env['mode']}`",
        f"- JAX {env['jax']}, Python {env['python']}",
        "",
        "| notebook | seconds | cells | unexpected errors | checks | ❌ |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in records:
        bad = sum(FAIL in c for c in r["checks"])
        lines.append(f"| {r['notebook']} | {r['seconds']} | {len(r['cells'])} | {len(r['errors'])} | "
                     f"{len(r['checks'])} | {bad} |")
    for name, why in skipped:
        lines.append(f"| {name} | skipped: {why} | | | | |")
    total_err = sum(len(r["errors"]) for r in records)
    total_bad = sum(FAIL in c for r in records for c in r["checks"])
    if records or skipped:
        lines += ["", f"Unexpected errors: {total_err}. Checks answering ❌: {total_bad}.", ""]
    else:
        lines = [line for line in lines if not line.startswith("|")]
    lines += checks_lines(checks)
    for r in records:
        if r["errors"] or any(FAIL in c for c in r["checks"]):
            lines.append(f"### {r['notebook']}")
            lines += [f"- cell {e['cell']}: `{e['error'][:300]}`" for e in r["errors"]]
            lines += [f"- {c}" for c in r["checks"] if FAIL in c]
            lines.append("")
    measured = [r for r in records if r["measures"] and r["notebook"].startswith("notebooks/")]
    if measured:
        lines += ["### What the lessons measured", ""]
        for r in measured:
            lines.append(f"#### {r['notebook']}")
            lines += ["```"] + [m["line"] for m in r["measures"]] + ["```", ""]
    return "\n".join(lines).rstrip() + "\n"


def combine(folders: list[Path]) -> tuple[dict, list[dict], list[tuple[str, str]], dict | None]:
    """The runs written to several --out folders (records.json, run.json) as one run: they must share the chip,
    the JAX, the mode and the day; a notebook run twice keeps its last record, and the checks' own tests the last
    run of them."""
    envs, records, skipped, checks = [], {}, {}, None
    for folder in folders:
        run = json.loads((folder / "run.json").read_text(encoding="utf-8"))
        envs.append(run["env"])
        skipped.update(dict(run["skipped"]))
        checks = run.get("checks") or checks
        recs = folder / "records.json"
        for rec in json.loads(recs.read_text(encoding="utf-8")) if recs.exists() else []:
            records[rec["notebook"]] = rec
    keys = ("date", "jax", "python", "backend", "device_kind", "device_count", "cpu_devices", "mode")
    for env in envs[1:]:
        differ = [k for k in keys if env[k] != envs[0][k]]
        if differ:
            raise SystemExit(f"runs differ in {differ}: {envs[0]} vs {env}")
    order = sorted(records, key=lambda n: (not n.startswith("notebooks/"), n))
    return envs[0], [records[n] for n in order], sorted(skipped.items()), checks


def write_record(target: Path, env: dict, text: str, section: str | None = None) -> None:
    """Replace this mode and JAX version's section (or the named one: a partial run kept beside the full run)."""
    old = target.read_text(encoding="utf-8") if target.exists() else ""
    target.write_text(merge(old, section or section_name(env), text), encoding="utf-8")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", help="notebooks (default: notebooks/ and solutions/)")
    ap.add_argument("--out", default=str(ROOT / "build" / "accelerator"), help="folder for records.json")
    ap.add_argument("--record", help="also write the result page here (e.g. docs/accelerator.md)")
    ap.add_argument("--section", help="with --record: write under this name instead of MODE-jaxVERSION (a run of "
                    "some notebooks, kept beside that full run), e.g. accelerator-jax0.10.2-partial")
    ap.add_argument("--checks", action="store_true",
                    help="also run the checks' own tests (tests/checks) on the accelerator, before the notebooks")
    ap.add_argument("--checks-only", action="store_true",
                    help="run only the checks' own tests (recorded under MODE-jaxVERSION-checks)")
    ap.add_argument("--baseline", metavar="XML",
                    help="with --combine: pytest's JUnit file of the same checks' tests on the CPU at the same commit; "
                    "the page lists the failures the CPU shares apart from the chip's own")
    ap.add_argument("--combine", nargs="+", metavar="OUT",
                    help="run nothing: write the page from these runs' --out folders (with --record)")
    args = ap.parse_args(argv)
    if args.combine:
        env, records, skipped, checks = combine([Path(f) for f in args.combine])
        if checks and args.baseline:
            checks = against_baseline(checks, Path(args.baseline))
        text = page(env, records, skipped, checks)
        print(text)
        if args.record:  # runs of the checks' tests alone keep their own section, as a live --checks-only run does
            alone = checks is not None and not records
            write_record(Path(args.record), env, text, args.section or (section_name(env) + "-checks" if alone else None))
        return 0
    os.environ.pop("JAX_PLATFORMS", None)  # whatever accelerator JAX finds
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.path.insert(0, str(ROOT))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    checks = None
    if args.checks or args.checks_only:
        checks = run_checks_tests(out)
        print("\n".join(checks_lines(checks)), flush=True)
    paths = [] if args.checks_only else [Path(p).resolve() for p in args.paths] or default_paths()
    skipped = []
    if not tcp_allowed():
        for p in list(paths):
            if p.stem in NEEDS_TCP:
                why = "needs TCP sockets between processes (jax.distributed), and this machine allows none"
                print(f"== {shown(p)}: skipped ({why})", flush=True)
                skipped.append((shown(p), why))
                paths.remove(p)
    records = run_all(paths, out) if paths else []
    env = environment()
    text = page(env, records, skipped, checks)
    (out / "accelerator.md").write_text(text, encoding="utf-8")
    (out / "run.json").write_text(json.dumps({"env": env, "skipped": skipped, "checks": checks}, ensure_ascii=False),
                                  encoding="utf-8")
    if args.record:
        section = args.section or (section_name(env) + "-checks" if args.checks_only else None)
        write_record(Path(args.record), env, text, section)
    errors = sum(len(r["errors"]) for r in records)
    fails = sum(FAIL in c for r in records for c in r["checks"] if r["notebook"].startswith("solutions/"))
    broken = len(checks["failed"]) if checks else 0
    print(f"== {env['device_kind']} × {env['device_count']}, JAX {env['jax']}: {len(records)} notebooks, "
          f"unexpected errors {errors}, ❌ in solutions {fails}"
          + (f"; checks' own tests {checks['passed']} passed, {broken} failed" if checks else ""), flush=True)
    return 1 if errors or fails or broken else 0


if __name__ == "__main__":
    sys.exit(main())
