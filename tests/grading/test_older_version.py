"""古い版の演習ノートブックから解いた提出物: 改ざんではなく、どの演習がないか（違うか）をそのまま言う。

- 本物の古い版: 問が 9 つだったころの 6.5（tests/grading/data/6_5_summary_9_questions.json、出力を消したもの）
- 作った古い版: 今の 6.1 から最後の演習（説明・例・解答のセル）をまとめて除いたもの、1 問目の関数が違うもの
- すべての演習ノートブックの 1 つ前の版（最後の演習をまとめて除いたもの）: セルの id がそのままの版と、
  演習を足したときに id が動いた版（以前の tools/twins.py は、演習のあとのまとめのセルの id を新しい見出しに
  渡すことがありました: 古い版ではまとめのセルが、今の版の見出しと同じ id を持つ）
- 対照: 解答のセルだけを消した提出物は、これまでどおり削除として備考に書く
"""
import asyncio
import copy
from pathlib import Path

import nbformat
import pytest

from ch6 import Status
from ch6.grading import batch, exercises, tamper
from ch6.grading.model import Config, ExerciseResult

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).with_name("data")
ASSIGNMENTS = exercises.from_folder(ROOT / "exercises")
A61 = ASSIGNMENTS["6_1_vmap"]
LAST = A61.ids[-1]  # 6.1 の最後の演習（演習を足しても、ここは exercises.json から読む）


def _exercise(name="6_1_vmap"):
    return nbformat.read(ROOT / "exercises" / f"{name}.ipynb", as_version=4)


def _without_last_exercise():
    """最後の演習（LAST）がまだなかった版: その前の演習のチェックのセルより後ろの、LAST のセルまでを除く。"""
    nb = _exercise()
    blocks = tamper.exercise_blocks(A61)
    drop = set(blocks[LAST])
    nb.cells = [c for k, c in enumerate(nb.cells) if k not in drop]
    return nb


def _previous_version(name, moved_ids=False):
    """name の演習ノートブックの 1 つ前の版: 最後の演習のセル（前の演習のチェックの次から、最後の演習の
    チェックまで）がまだない。moved_ids なら、そのあとのセル（まとめなど）が、今の版で最後の演習の
    最初のセルが持つ id を持つ（id が中身と一緒に動かなかったときの古い版）。"""
    a = ASSIGNMENTS[name]
    nb = _exercise(name)
    block = tamper.exercise_blocks(a)[a.ids[-1]]
    if moved_ids and block.stop < len(nb.cells):
        nb.cells[block.stop].id = nb.cells[block.start].id
    nb.cells = [c for k, c in enumerate(nb.cells) if k not in block]
    return nb, a


def _older_note(a, lacking):
    return (f"古い版の演習ノートブックからの提出のようです: 演習 {lacking}（{a.titles[lacking]}）がありません"
            "（⚠️ にしました）。今の版を配り直すか、その演習を採点から外してください。")


def _no_tamper_words(notes):
    text = " ".join(notes)
    assert "書き換えられた" not in text and "削除?" not in text and "改ざん" not in text, notes


def test_real_older_version_says_which_exercise_it_lacks():
    nb = nbformat.reads((DATA / "6_5_summary_9_questions.json").read_text(encoding="utf-8"), as_version=4)
    a = ASSIGNMENTS["6_5_summary"]
    assert tamper.older_version(nb, a) == {"6.5-10": tamper.LACKING_MESSAGE}
    notes = tamper.structure_notes(nb, a)
    assert notes[0].startswith("古い版の演習ノートブックからの提出のようです: 演習 6.5-10（q10）がありません"), notes
    _no_tamper_words(notes)


def test_older_version_without_the_last_exercise():
    notes = tamper.structure_notes(_without_last_exercise(), A61)
    assert notes == [f"古い版の演習ノートブックからの提出のようです: 演習 {LAST}（{A61.titles[LAST]}）がありません"
                     "（⚠️ にしました）。今の版を配り直すか、その演習を採点から外してください。"]


def test_older_version_where_an_exercise_had_another_function():
    nb = _exercise()
    for c in nb.cells:
        c.source = c.source.replace("rbf_features", "batched_predict")
    assert tamper.older_version(nb, A61) == {
        "6.1-1": "提出物の演習ノートブック（古い版）では、この演習の関数が違います（提出物は batched_predict、今の版は rbf_features）。"}
    notes = tamper.structure_notes(nb, A61)
    assert notes[0].startswith("古い版の演習ノートブックからの提出のようです: 演習 6.1-1 は今の版と関数が違います")
    _no_tamper_words(notes)


def test_deleting_only_the_solution_cell_is_still_a_deletion():
    """説明のセルが残っていれば古い版ではない: 削除と呼び出しの変更として書く（これまでどおり）。"""
    nb = _exercise()
    nb.cells = [c for c in nb.cells if "def batched_distances" not in c.source]
    assert tamper.older_version(nb, A61) == {}
    notes = " ".join(tamper.structure_notes(nb, A61))
    assert "削除?" in notes and "6.1-3" in notes and "古い版" not in notes


def test_grading_marks_the_lacking_exercise_with_the_plain_reason(tmp_path, monkeypatch):
    """採点の表: 古い版にない演習は ⚠️ で、理由は「古い版にはこの演習がありません」（関数が見つからない、ではない）。"""
    async def run(nb, assignment, cfg, cwd):
        return {i: ExerciseResult(i, assignment.titles[i], Status.NOT_GRADED if i == LAST else Status.NOT_DONE,
                                  f"関数 {assignment.titles[LAST]} が見つかりません") for i in assignment.ids}, []

    monkeypatch.setattr("ch6.grading.execute.execute_and_check", run)
    path = tmp_path / "tanaka_6_1_vmap.ipynb"
    nbformat.write(_without_last_exercise(), path)
    row = asyncio.run(batch.grade_one(path, ASSIGNMENTS, Config(jobs=1)))
    assert (row.learner, row.notebook) == ("tanaka", "6_1_vmap")
    r = row.exercises[LAST]
    assert (r.status, r.message) == (Status.NOT_GRADED, tamper.LACKING_MESSAGE) and r.mark == "⚠️"
    assert all(row.exercises[i].status is Status.NOT_DONE for i in A61.ids[:-1])
    assert len(row.notes) == 1 and row.notes[0].startswith("古い版の演習ノートブック")


def test_current_version_has_no_older_version_note():
    for name, a in ASSIGNMENTS.items():
        nb = _exercise(name)
        assert tamper.older_version(nb, a) == {} and tamper.structure_notes(copy.deepcopy(nb), a) == [], name


EVERY = sorted(n for n, a in ASSIGNMENTS.items() if a.cells)


def test_every_exercise_notebook_is_covered():
    assert len(EVERY) == len(ASSIGNMENTS) >= 13, (EVERY, sorted(ASSIGNMENTS))


@pytest.mark.parametrize("moved_ids", [False, True], ids=["same ids", "ids moved"])
@pytest.mark.parametrize("name", EVERY)
def test_previous_version_of_every_exercise_notebook_is_an_older_version(name, moved_ids):
    nb, a = _previous_version(name, moved_ids)
    assert tamper.older_version(nb, a) == {a.ids[-1]: tamper.LACKING_MESSAGE}
    assert tamper.structure_notes(nb, a) == [_older_note(a, a.ids[-1])]


@pytest.mark.parametrize("name", EVERY)
def test_grading_the_previous_version_of_every_exercise_notebook(name, tmp_path, monkeypatch):
    """採点の表と備考: 最後の演習は ⚠️（古い版にはこの演習がありません）、備考は古い版の 1 つだけ（改ざんの備考なし）。"""
    async def run(nb, assignment, cfg, cwd):  # カーネルは起動しない: 配ったままの演習は「まだ」
        return {i: ExerciseResult(i, assignment.titles[i], Status.NOT_DONE,
                                  f"関数 {assignment.titles[i]} が見つかりません") for i in assignment.ids}, []

    monkeypatch.setattr("ch6.grading.execute.execute_and_check", run)
    nb, a = _previous_version(name, moved_ids=True)
    path = tmp_path / f"sato_{name}.ipynb"
    nbformat.write(nb, path)
    row = asyncio.run(batch.grade_one(path, ASSIGNMENTS, Config(jobs=1)))
    assert (row.learner, row.notebook) == ("sato", name)
    last = row.exercises[a.ids[-1]]
    assert (last.status, last.message, last.mark) == (Status.NOT_GRADED, tamper.LACKING_MESSAGE, "⚠️")
    assert row.notes == [_older_note(a, a.ids[-1])]
    _no_tamper_words(row.notes)
