"""チェックを書く人の API は 1 つ: チェックのモジュール・テスト・ツールは ``ch6.checking``（と ``ch6`` の
``run_check`` / ``check`` / ``Status`` / ``registry`` / ``load_errors``）を import し、``ch6._core`` も、
ほかのモジュールの ``_`` で始まる名前も import しない。公開名を ``_`` で始まる別名で import することもしない。

import 文を ast で読んで確かめます（実行はしません）。``ch6/grading/`` はパッケージの内側なので ``ch6._core`` を
使ってよく、ここでは調べません。
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("ch6/checks", "tests", "tools")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(node: ast.ImportFrom, path: Path) -> str:
    if not node.level:
        return node.module or ""
    package = _module_of(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def violations(path: Path) -> list[str]:
    """path の import のうち、規則に反するもの（"行: 説明"）。"""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if any(_private(p) for p in a.name.split(".")):
                    out.append(f"{node.lineno}: import {a.name}（private module）")
                if a.asname and _private(a.asname):
                    out.append(f"{node.lineno}: import {a.name} as {a.asname}（private alias）")
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, path)
            if module == "__future__":
                continue
            own_package = _module_of(path).rsplit(".", 1)[0] if path.name != "__init__.py" else _module_of(path)
            if any(_private(p) for p in module.split(".")):
                out.append(f"{node.lineno}: from {module} import …（private module）")
            for a in node.names:
                if _private(a.name):
                    out.append(f"{node.lineno}: from {module} import {a.name}（private name of another module）")
                if a.asname and _private(a.asname):
                    out.append(f"{node.lineno}: from {module} import {a.name} as {a.asname}（private alias）")
            del own_package
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ch6"
              and _private(node.attr)):
            out.append(f"{node.lineno}: ch6.{node.attr}（private module of ch6）")
    return out


def _files() -> list[Path]:
    return sorted(p for top in SCANNED for p in (ROOT / top).rglob("*.py") if ".venv" not in p.parts)


# ch6._core の単体テストは、テストする当のモジュールを import してよい（時間切れの Result など、公開名にない部品を試す）
UNDER_TEST = {"tests/test_core.py": "from ch6 import _core"}


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_only_the_public_api(path):
    allowed = UNDER_TEST.get(str(path.relative_to(ROOT)), "\0")
    bad = [v for v in violations(path) if allowed not in v]
    assert not bad, f"{path.relative_to(ROOT)} imports private names: " + "; ".join(bad)


def test_the_rule_catches_each_kind_of_private_import(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    pkg = tmp_path / "ch6" / "checks" / "s9_9"
    pkg.mkdir(parents=True)
    (pkg / "ex.py").write_text(
        "from ch6._core import run_check\n"
        "from ch6 import _core\n"
        "from ._common import _rng\n"
        "from ...checking import f32 as _f32\n"
        "import ch6._core as core\n"
        "x = ch6._core.registry()\n"
        "from ch6.checking import f32, hidden_rng\n"
        "from .common import exercise_rng\n", encoding="utf-8")
    got = violations(pkg / "ex.py")
    assert [line.split(":")[0] for line in got] == ["1", "2", "3", "3", "4", "5", "6"], got
    assert "from ch6.checks.s9_9._common import _rng（private name of another module）" in got[3]


def test_runner_names_are_public_on_ch6():
    import ch6

    for name in ("run_check", "check", "Status", "Result", "RESULTS", "MARKS", "registry", "load_errors"):
        assert hasattr(ch6, name), name
    import sys

    runner = sys.modules[ch6.run_check.__module__]  # ch6._core（名前で import はしない）
    assert not {"exercise", "call", "expect_close", "hidden_rng", "f32"} & set(vars(runner)), (
        "ch6._core re-exports check-author names: import them from ch6.checking")
