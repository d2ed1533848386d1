#!/usr/bin/env python3
"""The learner's working copy: ``make lab`` opens ``work/`` (git ignores it), never the course's own files.

    python tools/workcopy.py            # copy into work/ each lesson and exercise notebook that is not there yet
    python tools/workcopy.py --dest DIR

A learner runs the lessons and answers the exercises in ``work/notebooks/`` and ``work/exercises/``. JupyterLab's
autosave and the answers change those copies only, so ``git pull`` of a course update never conflicts with them.
A copy that is already there is never overwritten (it holds the learner's answers); a notebook that a course update
adds is copied in at the next ``make lab``. To see the new version of a notebook that an update changed, rename or
delete its copy and run ``make lab`` again. The copies carry no jupytext pairing, so saving one writes no MyST twin.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("notebooks", "exercises")   # what a learner opens: the lessons and the exercises (never solutions/)
DEST = ROOT / "work"


def learner_copy(text: str) -> str:
    """The notebook as a learner's copy: the same cells and outputs, without the jupytext pairing."""
    nb = json.loads(text)
    nb.get("metadata", {}).pop("jupytext", None)
    return json.dumps(nb, ensure_ascii=False, indent=1) + "\n"


def update(dest: Path = DEST) -> tuple[list[Path], list[Path]]:
    """Copy what is missing: (copied, kept) paths under dest."""
    copied, kept = [], []
    for folder in FOLDERS:
        for src in sorted((ROOT / folder).glob("*.ipynb")):
            target = dest / folder / src.name
            if target.exists():
                kept.append(target)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(learner_copy(src.read_text(encoding="utf-8")), encoding="utf-8")
            copied.append(target)
    readme = dest / "README.txt"
    if not readme.exists():
        readme.write_text("ここは作業用のコピーです（git は無視します）。本編は notebooks/、演習は exercises/ にあります。\n"
                          "講座を更新しても（git pull）、ここにあるファイルは上書きされません。新しいノートブックだけが加わります。\n"
                          "更新後の版を見るには、そのファイルの名前を変えるか消してから、make lab をもう一度実行します。\n",
                          encoding="utf-8")
    return copied, kept


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dest", type=Path, default=DEST)
    args = ap.parse_args(argv)
    copied, kept = update(args.dest)
    where = args.dest.relative_to(ROOT) if args.dest.is_relative_to(ROOT) else args.dest
    print(f"{where}/: {len(copied)} 冊をコピーしました、{len(kept)} 冊はそのまま（書いた答えを残します）")
    return 0


if __name__ == "__main__":
    sys.exit(main())
