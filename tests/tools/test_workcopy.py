"""A learner's own work never collides with the course's files (issue 48): make lab opens work/, a copy of the lessons
and exercises that git ignores (tools/workcopy.py); a copy is never overwritten, an update's new notebook is added;
the first make lab says what it installs."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import workcopy  # noqa: E402


def _target(name: str) -> str:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return text.split(f"\n{name}:", 1)[1].split("\n\n", 1)[0]


def test_the_copy_has_every_lesson_and_exercise_and_no_solution(tmp_path):
    copied, kept = workcopy.update(tmp_path)
    assert kept == []
    for folder in ("notebooks", "exercises"):
        assert sorted(p.name for p in (tmp_path / folder).glob("*")) == \
            sorted(p.name for p in (ROOT / folder).glob("*.ipynb"))
    assert not (tmp_path / "solutions").exists() and (tmp_path / "README.txt").exists()
    nb = json.loads((tmp_path / "exercises" / "6_1_vmap.ipynb").read_text(encoding="utf-8"))
    course = json.loads((ROOT / "exercises" / "6_1_vmap.ipynb").read_text(encoding="utf-8"))
    assert nb["cells"] == course["cells"]                           # ids and outputs as the course has them
    lesson = json.loads((tmp_path / "notebooks" / "6_1_vmap.ipynb").read_text(encoding="utf-8"))
    assert "jupytext" not in lesson["metadata"]                     # saving a copy writes no MyST twin


def test_a_learners_work_is_kept_and_an_updates_new_notebook_is_added(tmp_path, monkeypatch):
    course = tmp_path / "course"
    for folder in workcopy.FOLDERS:
        (course / folder).mkdir(parents=True)
        shutil.copy(ROOT / folder / "6_1_vmap.ipynb", course / folder)
    monkeypatch.setattr(workcopy, "ROOT", course)
    work = tmp_path / "work"
    workcopy.update(work)
    mine = work / "exercises" / "6_1_vmap.ipynb"
    answered = mine.read_text(encoding="utf-8").replace("raise NotImplementedError", "return 42")
    mine.write_text(answered, encoding="utf-8")
    shutil.copy(ROOT / "notebooks" / "6_2_pmap.ipynb", course / "notebooks")   # the course is updated (git pull)
    (course / "exercises" / "6_1_vmap.ipynb").write_text("{}", encoding="utf-8")
    copied, kept = workcopy.update(work)
    assert copied == [work / "notebooks" / "6_2_pmap.ipynb"]
    assert mine in kept and mine.read_text(encoding="utf-8") == answered


def test_git_ignores_the_copy_and_make_lab_opens_it():
    ignored = subprocess.run(["git", "check-ignore", "-q", "work/exercises/6_1_vmap.ipynb"], cwd=ROOT)
    assert ignored.returncode == 0, ".gitignore must ignore /work/"
    lab = _target("lab")
    assert "tools/workcopy.py" in lab and '--ServerApp.root_dir="$(CURDIR)/work"' in lab
    assert "root_dir" not in _target("author-lab") and "jupyter lab" in _target("author-lab")


def test_the_first_make_lab_shows_its_progress():
    setup = (ROOT / "Makefile").read_text(encoding="utf-8").split("\n$(STAMP):", 1)[1].split("\n\n", 1)[0]
    assert [line for line in setup.splitlines() if "@echo \"[" in line][:3] and "[3/3]" in setup
    assert "$(PIP_SHOWN) -r requirements.txt" in setup   # one line per package, not --quiet
