"""Numbers in prose that a datasheet row or an executed cell decides (tools/prose_numbers.py): each is as ch6.hardware
and the stored outputs say now, every such number is listed, and a datasheet correction rewrites them (the policy in
CONTRIBUTING, "A datasheet correction")."""
from __future__ import annotations

import dataclasses
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import prose_numbers  # noqa: E402

from ch6 import hardware  # noqa: E402


def test_every_number_in_prose_is_as_the_rows_and_the_outputs_say():
    assert prose_numbers.stale() == [], "run: python tools/prose_numbers.py --write"


def test_every_number_beside_a_hardware_quantity_is_listed():
    assert prose_numbers.unlisted() == [], ("add each to NUMBERS (from a row or the outputs) or OTHER (with why) "
                                            "in tools/prose_numbers.py")


def test_every_other_number_is_still_in_its_file():
    gone = [f"{rel}: {words}" for rel, words, _ in prose_numbers.OTHER if words not in (ROOT / rel).read_text()]
    assert gone == []


def _corrected(monkeypatch, factor):
    v5e = hardware.chip("TPU v5e")
    fixed = dataclasses.replace(v5e, hbm_bw=v5e.hbm_bw * factor)
    monkeypatch.setattr(hardware, "CHIPS", tuple(fixed if c is v5e else c for c in hardware.CHIPS))


def test_a_datasheet_correction_names_and_rewrites_each_number_it_moves(tmp_path, monkeypatch):
    for rel in {rel for rel, _, _ in prose_numbers.NUMBERS}:
        for path in (ROOT / rel, (ROOT / rel).with_suffix(".outputs.txt")):
            if path.exists():
                (tmp_path / path.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, tmp_path / path.relative_to(ROOT))
    monkeypatch.setattr(prose_numbers, "ROOT", tmp_path)
    v5e = hardware.chip("TPU v5e")
    hbm, ridge = f"{v5e.hbm_bw / 1e9:.0f}", f"{round(v5e.ridge, -1):.0f}"      # as the row says now (819, 240)
    _corrected(monkeypatch, 1.05)   # e.g. 819 → 860 GB/s: the ridge 241 → 229
    v5e = hardware.chip("TPU v5e")
    hbm2, ridge2 = f"{v5e.hbm_bw / 1e9:.0f}", f"{round(v5e.ridge, -1):.0f}"
    assert hbm2 != hbm and ridge2 != ridge
    named = prose_numbers.stale()
    assert any(f"TPU v5e なら {hbm} GB/s" in line and f"TPU v5e なら {hbm2} GB/s" in line for line in named)
    assert any(f"リッジポイントは約 {ridge} なので、1 デバイスに {ridge}" in line
               and f"約 {ridge2} なので、1 デバイスに {ridge2}" in line for line in named)
    assert not any("リッジポイント 240、$b^*$" in line for line in named)   # the book's 240: the book's inputs
    assert all("公表値の" not in line or "GB/s" in line for line in named)   # 6.11a's share: from the outputs, not re-executed
    written = prose_numbers.write()
    assert tmp_path / "notebooks/6_10_inference.md" in written and tmp_path / "docs/workshop.md" in written
    assert prose_numbers.stale() == []
    assert f"公表値の {hbm2} GB/s を使う" in (tmp_path / "docs/workshop.md").read_text()


def test_a_number_in_prose_that_no_entry_lists_is_named(tmp_path, monkeypatch):
    lesson = tmp_path / "notebooks" / "6_99_new.md"
    lesson.parent.mkdir(parents=True)
    lesson.write_text("TPU v5e のリッジポイントは 241 です。\n\n```{code-cell} ipython3\nx = '819 GB/s'\n```\n",
                      encoding="utf-8")
    monkeypatch.setattr(prose_numbers, "ROOT", tmp_path)
    monkeypatch.setattr(prose_numbers, "NUMBERS", [])
    monkeypatch.setattr(prose_numbers, "OTHER", [])
    assert prose_numbers.unlisted() == ["notebooks/6_99_new.md:1: リッジポイントは 241"]  # code cells are not prose
