"""tools/nbinputs.py: what a notebook's outputs depend on (make depends, make notebook, the ledger), one test per
kind of input: absolute imports and ch6.x attributes, relative imports, a solution's section checks and what they
import, data files of any suffix read by a module. Runs on a small package in a temporary folder; executes nothing."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import nbinputs  # noqa: E402
import recipe  # noqa: E402

from tests.tools.common import notebook_json  # noqa: E402

LOAD = '"""節。"""\nfrom .. import load_section\n\n__all__ = load_section(__name__, globals())\n'
PACKAGE = {
    "ch6/__init__.py": "from . import edition\nfrom .env import setup\n",
    "ch6/edition.py": 'PROTECTED = "ch6.checks"\n',
    "ch6/env.py": "def setup(): ...\n", "ch6/runtime.py": "", "ch6/_core.py": "from . import explain\n",
    "ch6/show.py": "from . import sanitize\n",
    "ch6/explain.py": "from . import sanitize\n",
    "ch6/sanitize.py": ('from importlib import resources\nCFG_NAME = "nbval_sanitize.cfg"\n\n\ndef cfg_text():\n'
                        '    return resources.files(__package__).joinpath(CFG_NAME).read_text()\n'),
    "ch6/nbval_sanitize.cfg": "[address]\nregex = 0x[0-9a-f]+\nreplace = 0x...\n",
    "ch6/precision.py": "X = 1\n",
    "ch6/checking.py": "from . import explain\n",
    "ch6/serving.py": "from .lm import forward\n", "ch6/lm.py": "def forward(): ...\n",
    "ch6/profile.py": ('from importlib import resources\n_TRACES = "data/traces"\n\n\ndef measurements():\n'
                       '    return resources.files("ch6").joinpath(_TRACES).joinpath("measurements.json")\n'),
    "ch6/data/traces/measurements.json": "{}\n", "ch6/data/traces/decode.json.gz": "gz\n",
    "ch6/capstone/__init__.py": "", "ch6/capstone/corpus.txt": "text\n",
    "ch6/capstone/data.py": ('from importlib import resources\n\n\ndef corpus():\n'
                             '    return resources.files("ch6.capstone").joinpath("corpus.txt").read_text()\n'),
    "ch6/capstone/resume.py": 'from pathlib import Path\nWORKER = Path(__file__).with_name("worker.py")\n',
    "ch6/capstone/worker.py": "from ch6 import lm\n",
    "ch6/capstone/unused.py": "U = 1\n",
    "ch6/multihost/__init__.py": 'SCRIPT = "ch6.multihost.train"\n', "ch6/multihost/train.py": "T = 1\n",
    "ch6/checks/__init__.py": "def load_section(package, namespace): ...\n",
    "ch6/checks/chips.py": "from ..checking import Fail  # noqa\n",
    "ch6/checks/other_section_helper.py": "H = 1\n",
    "ch6/checks/s6_7/__init__.py": LOAD,
    "ch6/checks/s6_7/common.py": "from ..chips import hidden  # noqa\nfrom ... import serving  # noqa\n",
    "ch6/checks/s6_7/dp_chips.py": "from .common import hidden  # noqa\n",
}



@pytest.fixture
def repo(tmp_path, monkeypatch):
    files = dict(PACKAGE)
    files["notebooks/6_1_vmap.ipynb"] = notebook_json("import ch6\nn = ch6.setup()", "y = ch6.precision.X")
    files["notebooks/6_9b_checkpoint_resume.ipynb"] = notebook_json("%matplotlib inline\nfrom ch6.capstone import data, resume")
    files["notebooks/6_11a_profile.ipynb"] = notebook_json("from ch6 import profile")
    files["solutions/6_7_cost_memory.ipynb"] = notebook_json("import ch6", 'ch6.check("6.7-1", f)')
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    for mod in (nbinputs, recipe):
        monkeypatch.setattr(mod, "ROOT", tmp_path)
    monkeypatch.setattr(nbinputs, "LEDGER", tmp_path / "tools" / "executed_inputs.json")
    (tmp_path / "tools").mkdir()
    return tmp_path


def _inputs(repo, nb):
    return {p.relative_to(repo).as_posix() for p in nbinputs.inputs(repo / nb)}


def _dependents(repo, module):
    return {p.relative_to(repo).as_posix() for p in recipe.dependents(module)}


def test_absolute_imports_and_ch6_attributes(repo):
    got = _inputs(repo, "notebooks/6_1_vmap.ipynb")
    assert {"ch6/__init__.py", "ch6/env.py", "ch6/precision.py"} <= got  # ch6.precision: loaded on first use
    assert "ch6/lm.py" not in got and "ch6/capstone/data.py" not in got
    assert _dependents(repo, "ch6.precision") == _dependents(repo, "ch6/precision.py") == {"notebooks/6_1_vmap.ipynb"}


def test_relative_imports(repo):
    """from . import x (ch6/show.py → sanitize), from ..checking import y, from ... import serving (→ lm)."""
    lesson = _inputs(repo, "notebooks/6_1_vmap.ipynb")
    assert {"ch6/sanitize.py", "ch6/explain.py", "ch6/edition.py"} <= lesson
    solution = _inputs(repo, "solutions/6_7_cost_memory.ipynb")
    assert {"ch6/checks/chips.py", "ch6/checking.py", "ch6/serving.py", "ch6/lm.py"} <= solution
    assert "notebooks/6_1_vmap.ipynb" in _dependents(repo, "ch6/explain.py")
    lm = _dependents(repo, "ch6/lm.py")
    assert "solutions/6_7_cost_memory.ipynb" in lm and "notebooks/6_1_vmap.ipynb" not in lm  # ... import serving


def test_a_solution_depends_on_its_sections_checks_and_what_they_import(repo):
    solution = _inputs(repo, "solutions/6_7_cost_memory.ipynb")
    assert {"ch6/checks/__init__.py", "ch6/checks/s6_7/__init__.py", "ch6/checks/s6_7/dp_chips.py",
            "ch6/checks/s6_7/common.py", "ch6/checks/chips.py"} <= solution
    assert "ch6/checks/other_section_helper.py" not in solution  # ch6/checks itself does not load its modules
    assert _dependents(repo, "ch6/checks/chips.py") == {"solutions/6_7_cost_memory.ipynb"}
    assert _dependents(repo, "ch6/checks/s6_7") == {"solutions/6_7_cost_memory.ipynb"}
    assert "ch6/checks/chips.py" not in _inputs(repo, "notebooks/6_1_vmap.ipynb")  # the lesson checks nothing


def test_data_files_of_any_suffix_read_by_a_module(repo):
    """resources.files(__package__) / resources.files("ch6") / Path(__file__).with_name, a file or a folder."""
    assert "ch6/nbval_sanitize.cfg" in _inputs(repo, "notebooks/6_1_vmap.ipynb")  # read through ch6/sanitize.py
    assert {"ch6/data/traces/measurements.json", "ch6/data/traces/decode.json.gz"} <= \
        _inputs(repo, "notebooks/6_11a_profile.ipynb")
    capstone = _inputs(repo, "notebooks/6_9b_checkpoint_resume.ipynb")  # a line magic does not hide the import
    assert {"ch6/capstone/corpus.txt", "ch6/capstone/worker.py", "ch6/lm.py"} <= capstone  # the script and its import
    assert "ch6/capstone/unused.py" not in capstone
    every = {"notebooks/6_1_vmap.ipynb", "notebooks/6_9b_checkpoint_resume.ipynb", "notebooks/6_11a_profile.ipynb",
             "solutions/6_7_cost_memory.ipynb"}
    assert _dependents(repo, "ch6/nbval_sanitize.cfg") == every
    assert _dependents(repo, "ch6/data/traces") == _dependents(repo, "ch6/data/traces/decode.json.gz") == \
        {"notebooks/6_11a_profile.ipynb"}
    assert _dependents(repo, "ch6/capstone/corpus.txt") == {"notebooks/6_9b_checkpoint_resume.ipynb"}


def test_a_module_started_by_name_is_an_input(repo):
    (repo / "notebooks" / "6_6_multihost.ipynb").write_text(notebook_json("from ch6 import multihost"), encoding="utf-8")
    assert "ch6/multihost/train.py" in _inputs(repo, "notebooks/6_6_multihost.ipynb")  # python -m ch6.multihost.train
    assert "ch6/checks/__init__.py" not in _inputs(repo, "notebooks/6_6_multihost.ipynb")  # a package's name: not started
    with pytest.raises(SystemExit):
        recipe.dependents("ch6/no_such_file.cfg")


@pytest.mark.parametrize("changed", ["ch6/sanitize.py", "ch6/nbval_sanitize.cfg", "ch6/checks/chips.py",
                                     "ch6/checks/s6_7/dp_chips.py", "ch6/data/traces/decode.json.gz",
                                     "ch6/capstone/corpus.txt", "ch6/lm.py"])
def test_the_ledger_sees_a_change_of_every_kind(repo, changed):
    nbs = [repo / p for p in ("notebooks/6_1_vmap.ipynb", "notebooks/6_9b_checkpoint_resume.ipynb",
                              "notebooks/6_11a_profile.ipynb", "solutions/6_7_cost_memory.ipynb")]
    for nb in nbs:
        nbinputs.record_inputs(nb)
    assert not any(nbinputs.stale_inputs(nb) for nb in nbs)
    with open(repo / changed, "a", encoding="utf-8") as f:
        f.write("# edited\n")
    stale = {nb.relative_to(repo).as_posix() for nb in nbs if nbinputs.stale_inputs(nb) == {changed: "changed"}}
    assert stale == _dependents(repo, changed) and stale


def test_a_ledger_row_written_before_relative_imports_were_followed_is_not_stale(repo):
    """A row without the marker (written by the older count): the inputs that count did not see are unrecorded, not
    stale (no notebook is re-executed for the new count); what it did see is still compared; the next execution
    records everything."""
    nb = repo / "notebooks" / "6_1_vmap.ipynb"
    old = nbinputs.input_hashes(nb, nbinputs.legacy_inputs(nb))
    assert "ch6/sanitize.py" not in old and "ch6/nbval_sanitize.cfg" not in old
    nbinputs.update_ledger({nbinputs.ledger_key(nb): old})
    assert nbinputs.stale_inputs(nb) == {}
    assert {"ch6/sanitize.py", "ch6/nbval_sanitize.cfg", "ch6/explain.py"} <= set(nbinputs.unrecorded_inputs(nb))
    (repo / "ch6" / "env.py").write_text("def setup(): return 1\n", encoding="utf-8")
    assert nbinputs.stale_inputs(nb) == {"ch6/env.py": "changed"}
    nbinputs.record_inputs(nb)
    assert nbinputs.unrecorded_inputs(nb) == [] and nbinputs.stale_inputs(nb) == {}
    (repo / "ch6" / "nbval_sanitize.cfg").write_text("[x]\nregex = a\nreplace = b\n", encoding="utf-8")
    assert nbinputs.stale_inputs(nb) == {"ch6/nbval_sanitize.cfg": "changed"}


def test_the_recipe_fingerprint_reads_data_files_as_bytes(repo):
    (repo / "ch6" / "data" / "traces" / "decode.json.gz").write_bytes(b"\x1f\x8b\x08\xff\xfe")
    assert recipe.fingerprint(repo / "notebooks" / "6_11a_profile.ipynb")


def test_twins_does_not_import_recipe():
    """The ledger and the inputs live in tools/nbinputs.py, which both import: recipe → twins only (no circle)."""
    import ast

    def imported(name):
        tree = ast.parse((ROOT / "tools" / f"{name}.py").read_text(encoding="utf-8"))
        found = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        return found | {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}

    assert "recipe" not in imported("twins") and "nbinputs" in imported("twins")
    assert "nbinputs" in imported("recipe") and "twins" not in imported("nbinputs") | imported("nbinputs")
