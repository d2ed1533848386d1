"""The ch6 that tools, tests and kernels import is this checkout's own (issue 48): in a shared environment whose
editable install points at another checkout, kernels would silently run the other checkout's ch6. Here "another
checkout" is a folder with its own ch6/ put first on PYTHONPATH. Nothing is executed in a kernel."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ch6 import nbrun

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))


@pytest.fixture
def other(tmp_path, monkeypatch):
    """A second checkout's ch6 that a kernel started now would import first."""
    (tmp_path / "ch6").mkdir()
    (tmp_path / "ch6" / "__init__.py").write_text("", encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setattr(nbrun, "_CHECKED", set())
    return tmp_path / "ch6"


def test_this_checkouts_kernels_import_its_own_ch6():
    assert nbrun.kernel_ch6(ROOT / "notebooks") == ROOT / "ch6"
    nbrun.check_own_ch6(ROOT)


def test_another_checkouts_ch6_is_named_with_this_one(other):
    with pytest.raises(nbrun.OtherCheckout) as err:
        nbrun.check_own_ch6(ROOT)
    assert str(other) in str(err.value) and str(ROOT / "ch6") in str(err.value)


def test_twins_refuses_to_execute_before_starting_a_kernel(other, monkeypatch):
    import twins

    def no_kernel(*args, **kwargs):
        raise AssertionError("a kernel was started")

    monkeypatch.setattr(nbrun, "execute", no_kernel)
    with pytest.raises(nbrun.OtherCheckout, match="another checkout"):
        twins.execute(ROOT / "notebooks" / "6_1_vmap.ipynb", 8)


def test_the_recipe_stops_with_both_paths(other):
    import recipe

    with pytest.raises(SystemExit) as err:
        recipe.own_checkout()
    assert str(other) in str(err.value) and str(ROOT / "ch6") in str(err.value)


def test_pytest_refuses_to_start_when_kernels_would_import_another_checkout(tmp_path):
    (tmp_path / "ch6").mkdir()
    (tmp_path / "ch6" / "__init__.py").write_text("", encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                        "--collect-only", "tests/test_runtime.py"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert p.returncode != 0
    assert str(tmp_path / "ch6") in p.stderr + p.stdout and str(ROOT / "ch6") in p.stderr + p.stdout
