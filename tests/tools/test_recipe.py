"""tools/recipe.py（make notebook / make exercise）: 何を実行し直すか、何を走らせるか。ノートブックは実行しません。"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import nbinputs  # noqa: E402
import recipe  # noqa: E402

from tests.tools.common import notebook_json  # noqa: E402


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """レッスン・解答・節のチェックを 1 つずつ持つ git リポジトリ（コミット済み）。"""
    files = {"notebooks/6_1_vmap.ipynb": notebook_json("x = 1"), "solutions/6_1_vmap.ipynb": notebook_json("def f(): ..."),
             "ch6/checks/s6_1/rbf.py": "A = 1\n", "ch6/checking.py": "B = 1\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], cwd=tmp_path, check=True)
    monkeypatch.setattr(recipe, "ROOT", tmp_path)
    monkeypatch.setattr(nbinputs, "ROOT", tmp_path)
    monkeypatch.setattr(recipe, "STAMPS", tmp_path / "build" / "recipe")
    return tmp_path


def test_only_what_changed_since_head_is_re_executed(repo):
    lesson, solution = repo / "notebooks" / "6_1_vmap.ipynb", repo / "solutions" / "6_1_vmap.ipynb"
    assert not recipe.needs_execution(lesson) and not recipe.needs_execution(solution)
    solution.write_text(notebook_json("def f(): return 1"), encoding="utf-8")  # 解答だけを直した
    assert recipe.needs_execution(solution) and not recipe.needs_execution(lesson)


def test_outputs_alone_do_not_count_but_the_sections_checks_do(repo):
    solution = repo / "solutions" / "6_1_vmap.ipynb"
    nb = json.loads(solution.read_text(encoding="utf-8"))
    nb["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "1\n"}]
    solution.write_text(json.dumps(nb), encoding="utf-8")
    assert not recipe.needs_execution(solution)
    (repo / "ch6" / "checks" / "s6_1" / "rbf.py").write_text("A = 2\n", encoding="utf-8")  # チェックの言葉が出力に出る
    assert recipe.needs_execution(solution)
    assert not recipe.needs_execution(repo / "notebooks" / "6_1_vmap.ipynb")


def test_a_change_in_a_library_module_the_notebook_imports_re_executes_it(repo):
    """ch6/lm.py を直すと、それを（直接または ch6.capstone 経由で）読み込むノートブックだけが実行し直しになる。"""
    files = {"ch6/lm.py": "A = 1\n", "ch6/capstone/__init__.py": "",
             "ch6/capstone/train.py": "from .. import lm\n", "ch6/capstone/worker.py": "W = 1\n",
             "notebooks/6_9a_train.ipynb": notebook_json("import ch6\nfrom ch6.capstone import (\n    train)"),
             "notebooks/6_1_vmap.ipynb": notebook_json("import ch6\nx = 1")}
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, encoding="utf-8")
    capstone, other = repo / "notebooks" / "6_9a_train.ipynb", repo / "notebooks" / "6_1_vmap.ipynb"
    inputs = {p.relative_to(repo).as_posix() for p in nbinputs.inputs(capstone)}
    assert {"ch6/capstone/__init__.py", "ch6/capstone/train.py", "ch6/lm.py"} <= inputs  # 間接の import（相対も）
    assert "ch6/capstone/worker.py" not in inputs  # 同じパッケージでも、読み込まないモジュールは入力ではない
    for nb in (capstone, other):
        recipe.write_stamp(nb)
    assert not recipe.needs_execution(capstone) and not recipe.needs_execution(other)
    (repo / "ch6" / "lm.py").write_text("A = 2\n", encoding="utf-8")  # 初期値を変えた
    assert recipe.needs_execution(capstone) and not recipe.needs_execution(other)


def test_a_stamp_records_the_last_execution(repo):
    solution = repo / "solutions" / "6_1_vmap.ipynb"
    solution.write_text(notebook_json("def f(): return 2"), encoding="utf-8")
    assert recipe.needs_execution(solution)
    recipe.write_stamp(solution)
    assert not recipe.needs_execution(solution)
    recipe._stamp(solution).write_text(recipe.fingerprint(solution) + "\n")  # 入力の数え方の版のない、古い印
    assert recipe.needs_execution(solution)  # 使わずに HEAD と比べる（HEAD から変わった）


def test_a_synced_code_change_after_execution_is_not_stamped_as_executed(repo):
    """make depends … RUN=1 の最後の段（本文の数を書き直して双子を揃える）: 本文だけが変わったら印を付け直し、
    実行の後で直されたコードを持ち込んだら印を付けない（付けると、実行していないコードが実行済みに見えた）。"""
    lesson = repo / "notebooks" / "6_1_vmap.ipynb"

    def rewrite(source_of_cell):
        def sync(nb):
            data = json.loads(nb.read_text(encoding="utf-8"))
            data["cells"].append({"cell_type": "markdown", "metadata": {}, "source": "本文"})
            data["cells"][0]["source"] = source_of_cell(data["cells"][0]["source"])
            nb.write_text(json.dumps(data), encoding="utf-8")
            return True
        return sync

    recipe.write_stamp(lesson)
    recipe.restamp_after_sync([lesson], rewrite(lambda src: src))  # 本文だけ
    assert not recipe.needs_execution(lesson)
    recipe.restamp_after_sync([lesson], rewrite(lambda src: "x = 2"))  # コードも
    assert recipe.needs_execution(lesson)


def test_exercise_runs_what_a_submission_is_judged_by():
    labels = [label for label, _ in recipe.steps("exercise", "6_1_vmap")]
    for want in ("sync + execute what changed", "ruff", "glossary scan", "mutation", "hostile values",
                 "grading + consistency tests"):
        assert want in labels, labels
    assert [f"check tests, {n} device(s)" for n in recipe.CHECK_DEVICES] == [x for x in labels if "device" in x]
    (scan,) = [cmd for label, cmd in recipe.steps("exercise", "6_1_vmap") if label == "glossary scan"]
    assert str(recipe.ROOT / "ch6" / "checks" / "s6_1") in scan  # the section's check messages are read too
    assert [label for label, _ in recipe.steps("notebook", "6_1_vmap")] == [
        "sync + execute what changed", "exercises up to date", "workshop guide's time tables"]
    assert recipe.exercise_prefix("6_10_inference") == "6.10-" and recipe.exercise_prefix("6_1_vmap") == "6.1-"
    assert recipe.section_of("6_3a_sharding") == "s6_3a"


def test_the_recipe_may_write_only_the_notebook_its_twins_and_the_grading_data():
    allowed = recipe.expected_outputs("6_2_pmap")
    assert {"solutions/6_2_pmap.outputs.txt", "notebooks/6_2_pmap.md", "exercises/6_2_pmap.ipynb",
            "ch6/grading/exercises.json", "tools/executed_inputs.json", "docs/workshop.md"} <= allowed
    assert "notebooks/6_1_vmap.ipynb" not in allowed and "tools/mutants_equivalent.txt" not in allowed


def test_depends_lists_the_notebooks_that_import_a_module_directly_or_not():
    """make depends MOD=…: 6.10 imports ch6.serving, which imports ch6.lm; a solution depends on its section's checks."""
    names = lambda mod: {p.relative_to(recipe.ROOT).as_posix() for p in recipe.dependents(mod)}  # noqa: E731
    lm = names("ch6/lm.py")
    assert "notebooks/6_10_inference.ipynb" in lm and "notebooks/6_9a_train.ipynb" in lm
    assert "notebooks/6_1_vmap.ipynb" not in lm
    assert names("ch6.lm") == lm  # the module's dotted name says the same
    assert "solutions/6_7_cost_memory.ipynb" in names("ch6/checks/s6_7")
    # issue 48: modules reached only by relative imports, a shared check helper, a data file read by a module
    for module in ("ch6/sanitize.py", "ch6/explain.py", "ch6/nbval_sanitize.cfg"):
        assert "notebooks/6_1_vmap.ipynb" in names(module) and "solutions/6_1_vmap.ipynb" in names(module), module
    assert {"solutions/6_7_cost_memory.ipynb", "solutions/6_8b_sequence_expert.ipynb"} <= names("ch6/checks/chips.py")
    assert "notebooks/6_1_vmap.ipynb" not in names("ch6/checks/chips.py")
    assert "notebooks/6_9a_train.ipynb" in names("ch6/capstone/corpus.txt")
    assert "notebooks/6_11a_profile.ipynb" in names("ch6/data/traces") or \
        not (recipe.ROOT / "notebooks" / "6_11a_profile.ipynb").exists()
    with pytest.raises(SystemExit):
        recipe.dependents("ch6/no_such_module.py")


def _timed_notebook(sources_outputs):
    """nbval-ignore-output のセルだけのノートブック: [(ソース, 出力の文字列)]。"""
    cells = [{"cell_type": "code", "id": f"c{k}", "metadata": {"tags": ["nbval-ignore-output"]}, "source": src,
              "outputs": [{"output_type": "stream", "name": "stdout", "text": out}], "execution_count": 1}
             for k, (src, out) in enumerate(sources_outputs)]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def _committed(repo, rel, text):
    (repo / rel).write_text(text, encoding="utf-8")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "add", rel], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "timed"], cwd=repo, check=True)


def _outputs(path):
    texts = [c["outputs"][0]["text"] for c in json.loads(path.read_text(encoding="utf-8"))["cells"]]
    return ["".join(t) if isinstance(t, list) else t for t in texts]


def test_timing_cells_keep_heads_outputs_only_when_none_of_them_changed(repo):
    rel = "notebooks/6_1_vmap.ipynb"
    _committed(repo, rel, _timed_notebook([("measure()", "表: 0.189 と 0.197\n"), ("ratio()", "比 0.96\n")]))
    path = repo / rel
    # 同じソースで実行し直した: 両方とも HEAD の値に戻す（git status に時間の揺れを出さない）
    path.write_text(_timed_notebook([("measure()", "表: 0.094 と 0.118\n"), ("ratio()", "比 0.80\n")]), encoding="utf-8")
    assert recipe.keep_head_outputs(path) == 2
    assert _outputs(path) == ["表: 0.189 と 0.197\n", "比 0.96\n"]
    # 比のセルだけソースが変わった: どちらも戻さない（表だけ戻すと、表と比が別々の実行の値になる）
    path.write_text(_timed_notebook([("measure()", "表: 0.094 と 0.118\n"), ("ratio(2)", "比 0.80\n")]), encoding="utf-8")
    assert recipe.keep_head_outputs(path) == 0
    assert _outputs(path) == ["表: 0.094 と 0.118\n", "比 0.80\n"]
