"""ch6.grading.identify と batch.collect: どの演習ノートブックか、学習者の名前、集める提出ファイル（カーネルなし）。"""
from __future__ import annotations

import json
from pathlib import Path

import nbformat

from ch6.grading import batch, exercises
from ch6.grading.identify import disambiguate, find, identify, learner_name
from ch6.grading.model import Row

ROOT = Path(__file__).resolve().parents[2]
IDS = [f"6.1-{k}" for k in range(1, 7)]  # 登録表からの節ごとの演習の例（下で作る）


def _exercise_nb():
    return nbformat.read(str(ROOT / "exercises" / "6_1_vmap.ipynb"), as_version=4)


def test_learner_names_from_file_names():
    nb = "6_1_vmap"
    assert learner_name(Path("x/tanaka_6_1_vmap.ipynb"), nb) == "tanaka"
    assert learner_name(Path("x/6_1_vmap-山田 花子.ipynb"), nb) == "山田_花子"
    assert learner_name(Path("x/6_1_vmap (1).ipynb"), nb) == "x"
    assert learner_name(Path("suzuki/6_1_vmap.ipynb"), nb) == "suzuki"
    # Colab・Drive のコピー
    assert learner_name(Path("x/Copy of 6_1_vmap.ipynb"), nb) == "x"
    assert learner_name(Path("x/6_1_vmap のコピー.ipynb"), nb) == "x"
    assert learner_name(Path("x/Copy of tanaka_6_1_vmap.ipynb"), nb) == "tanaka"
    assert learner_name(Path("x/6_1_vmap のコピー - 佐藤.ipynb"), nb) == "佐藤"


def test_identify_by_name_folder_or_content():
    assignments = exercises.from_folder(ROOT / "exercises")  # 同梱の exercises.json と同じもの（別のテストで確かめる）
    a = assignments["6_1_vmap"]
    assert a.ids[0] == "6.1-1" and all(i.startswith("6.1-") for i in a.ids) and a.titles[a.ids[-1]] in a.calls[a.ids[-1]]
    ex = _exercise_nb()
    assert identify(Path("a/tanaka_6_1_vmap.ipynb"), None, assignments).name == "6_1_vmap"
    assert identify(Path("6_1_vmap/tanaka.ipynb"), None, assignments).name == "6_1_vmap"
    assert identify(Path("a/tanaka_6_1.ipynb"), None, assignments).name == "6_1_vmap"  # 節の番号から
    assert identify(Path("a/tanaka.ipynb"), ex, assignments).name == "6_1_vmap"  # チェックの番号から
    assert identify(Path("a/tanaka.ipynb"), nbformat.v4.new_notebook(), assignments) is None
    # チェック呼び出しを全部消しても、配ったままのセルが 3 つ以上あれば分かる
    for c in ex.cells:
        c.source = c.source.replace("ch6.check(", "print(")
    assert identify(Path("a/tanaka.ipynb"), ex, assignments).name == "6_1_vmap"
    # --notebook: 名前そのもの、または節の番号
    assert identify(Path("a/x.ipynb"), None, assignments, forced="6_3a").name == "6_3a_sharding"
    assert find(assignments, "6_1_vmap").name == "6_1_vmap" and find(assignments, "nothing") is None


def test_without_notebook_information_the_registry_is_grouped_by_section():
    titles = {f"6.1-{k}": f"f{k}" for k in range(1, 7)} | {"6.2-1": "g"}
    fallback = exercises.from_registry(titles)
    assert list(fallback) == ["6.1", "6.2"] and fallback["6.1"].ids == IDS
    assert identify(Path("a/tanaka_6_1_vmap.ipynb"), None, fallback).name == "6.1"
    assert find(fallback, "6_2_pmap").name == "6.2"


def test_same_names_are_told_apart_by_folder():
    rows = [Row(learner_name(Path(p), "6_1_vmap"), p, "6_1_vmap") for p in
            ["submitted/tanaka/ps1/6_1_vmap.ipynb", "submitted/sato/ps1/6_1_vmap.ipynb", "x/ito_6_1_vmap.ipynb"]]
    disambiguate(rows)
    assert [r.learner for r in rows] == ["tanaka", "sato", "ito"]


def test_collect_skips_checkpoints_and_hidden(tmp_path):
    (tmp_path / "a.ipynb").write_text("{}")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.ipynb").write_text("{}")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".ipynb_checkpoints" / "a-checkpoint.ipynb").write_text("{}")
    (tmp_path / "notes.txt").write_text("x")
    got = batch.collect([tmp_path, tmp_path / "notes.txt", tmp_path / "a.ipynb"])
    assert [p.relative_to(tmp_path).as_posix() for p in got] == ["a.ipynb", "sub/b.ipynb", "notes.txt"]


def test_identify_reads_raw_json_cells_too():
    """参照はリストの source（ディスク上の .ipynb の形）でも読める。"""
    raw = json.loads((ROOT / "exercises" / "6_1_vmap.ipynb").read_text(encoding="utf-8"))
    for c in raw["cells"]:
        c["source"] = c["source"].splitlines(keepends=True) if isinstance(c["source"], str) else c["source"]
    a = exercises.from_notebook("6_1_vmap", raw)
    assert a == exercises.from_folder(ROOT / "exercises")["6_1_vmap"]
