"""ch6/grading/exercises.json: 採点がリポジトリなしで（Colab・wheel）使う演習ノートブックの情報。

exercises/ から作り直したものと同じでなければならない（ずれたら: python -m ch6.grading.exercises）。
"""
from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from ch6.grading import exercises

ROOT = Path(__file__).resolve().parents[2]
FIX = "exercises/ と食い違っています。python -m ch6.grading.exercises で作り直してください"


def test_packaged_data_equals_the_exercise_notebooks():
    assert exercises.DATA.read_text(encoding="utf-8") == exercises.dumps(exercises.from_folder(ROOT / "exercises")), FIX
    assert exercises.main(["--check"]) == 0


def test_every_exercise_notebook_is_described():
    # 登録名とノートブックのチェック呼び出しが同じであることは tests/test_consistency.py が確かめる
    packaged = exercises.packaged()
    assert sorted(packaged) == sorted(p.stem for p in (ROOT / "exercises").glob("*.ipynb"))
    for a in packaged.values():
        assert a.ids and a.cells and set(a.calls) == set(a.ids) == set(a.titles), a.name


def test_round_trip_and_check_calls():
    a = exercises.packaged()["6_1_vmap"]
    assert exercises.Assignment.from_json(a.name, a.to_json()) == a
    assert exercises.check_calls("x = 1\n# ch6.check('6.1-1', f)\nch6.check( '6.1-2' , g )  # ok") == [
        ("6.1-2", "g", 'ch6.check("6.1-2",g)')]
    cell = exercises.describe_cell({"cell_type": "code", "id": "a", "source": ["def f(x):\n", "    return x\n"]})
    assert cell.keys == ("def:f",) and cell.snippet == "def f(x):" and len(cell.hash) == 16
    assert exercises.describe_cell({"cell_type": "markdown", "source": "  \n"}).hash == ""


def test_check_mode_reports_a_stale_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(exercises, "DATA", tmp_path / "exercises.json")
    assert exercises.main(["--check", str(ROOT / "exercises")]) == 1
    assert exercises.main([str(ROOT / "exercises")]) == 0
    assert exercises.main(["--check", str(ROOT / "exercises")]) == 0
    assert exercises.packaged(tmp_path / "exercises.json") == exercises.from_folder(ROOT / "exercises")
    assert exercises.packaged(tmp_path / "none.json") == {}


def test_the_wheel_ships_the_data_file():
    """pyproject.toml の package-data が ch6/grading/exercises.json を含む（wheel でも採点できるように）。"""
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    data = conf["tool"]["setuptools"]["package-data"]
    shipped = ("*.json" in data.get("ch6.grading", []) or "grading/*.json" in data.get("ch6", [])
               or "*.json" in data.get("*", []))  # "*" は ch6 とその下のパッケージすべて（make test-wheel が実物で確かめる）
    if not shipped:
        pytest.fail('pyproject.toml [tool.setuptools.package-data] に "ch6.grading" = ["*.json"] が要ります')
