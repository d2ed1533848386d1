"""リポジトリの一貫性: 演習が解答と同期、環境ファイルの一致、セットアップセルとバッジ、ローカルパスなし。"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import make_exercises  # noqa: E402
import nbtemplate  # noqa: E402

FOLDERS = ("notebooks", "solutions", "exercises")
NOTEBOOKS = sorted(p for f in FOLDERS for p in (ROOT / f).glob("*.ipynb"))
IDS = [p.relative_to(ROOT).as_posix() for p in NOTEBOOKS]
LOCAL_PATH = re.compile(r"(/(home|root|work|Users|tmp|private|var/folders)/[\w.-]+|[A-Z]:\\\\Users|site-packages)")
RETIRED = re.compile(r"jax\.tree_map\(|PositionalSharding|device_put_replicated|device_put_sharded|"
                     r"jax\.experimental\.shard_map|check_rep\s*=|jnp\.empty\(")


def _nb(path):
    return json.loads(path.read_text(encoding="utf-8"))


def _src(cell):
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found"


def test_exercises_in_sync_with_solutions():
    sols = {p.name for p in (ROOT / "solutions").glob("*.ipynb")}
    exs = {p.name for p in (ROOT / "exercises").glob("*.ipynb")}
    assert sols == exs, f"solutions/ and exercises/ differ: {sorted(sols ^ exs)}"
    assert make_exercises.main(["--check"]) == 0


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_setup_cell_and_badge(path):
    nb = _nb(path)
    cells = nb["cells"]
    first_md = next(_src(c) for c in cells if c["cell_type"] == "markdown")
    rel = path.relative_to(ROOT).as_posix()
    assert nbtemplate.badge(rel) in first_md, f"{rel}: first markdown cell lacks its Colab badge"
    first_code = next(_src(c) for c in cells if c["cell_type"] == "code")
    assert first_code == nbtemplate.setup_cell(), \
        f"{rel}: first code cell is not the generated setup cell (run: python tools/nbtemplate.py --stamp)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_outputs_are_clean(path):
    nb = _nb(path)
    code = [c for c in nb["cells"] if c["cell_type"] == "code" and _src(c).strip()]
    counts = [c.get("execution_count") for c in code]
    assert counts == list(range(1, len(code) + 1)), "not one clean top-to-bottom run (execution counts)"
    for i, c in enumerate(code, 1):
        assert not RETIRED.search(_src(c)), f"code cell {i} uses a removed API"
        tags = c.get("metadata", {}).get("tags", [])
        for out in c.get("outputs", []):
            text = json.dumps(out, ensure_ascii=False)
            assert out.get("output_type") != "error", \
                f"code cell {i} stored an error: show intentional errors with ch6.show.expect_error"
            assert "\x1b" not in text and "\\u001b" not in text, f"code cell {i}: ANSI colour codes in the output"
            data = {k: v for k, v in out.get("data", {}).items() if not k.startswith("image/")}
            body = json.dumps([out.get("text", ""), data, out.get("traceback", [])], ensure_ascii=False)
            assert not LOCAL_PATH.search(body), f"code cell {i} output shows a local path: {LOCAL_PATH.search(body).group(0)}"
            assert "image/svg" not in text, f"code cell {i}: figures are stored as PNG only"
        assert "raises-exception" not in tags, \
            f"code cell {i}: Colab, Kaggle and VS Code ignore raises-exception; use ch6.show.expect_error"


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.parent.name == "exercises"],
                         ids=[i for i in IDS if i.startswith("exercises")])
def test_exercises_hold_no_solution(path):
    for c in _nb(path)["cells"]:
        assert "BEGIN SOLUTION" not in _src(c)


def _pins():
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, sep, ver = line.partition("==")
            assert sep, f"requirements.txt: not pinned exactly: {line}"
            pins[name.lower()] = ver
    return pins


def test_requirements_pinned_and_environment_agrees():
    pins = _pins()
    from ch6 import env as ch6_env

    assert pins["jax"] == pins["jaxlib"] == ch6_env.TESTED_JAX
    env = (ROOT / "environment.yml").read_text()
    assert "-r requirements.txt" in env
    assert not re.search(r"==|>=", env), "environment.yml repeats versions: keep them in requirements.txt"
    assert "python=3.12" in env
    assert (ROOT / ".python-version").read_text().strip() == "3.12"


def test_installed_versions_match_pins():
    from importlib.metadata import version

    for name, ver in _pins().items():
        assert version(name) == ver, f"{name}: installed {version(name)}, pinned {ver}"


def test_readme_lists_every_notebook():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        rel = path.relative_to(ROOT).as_posix()
        assert rel in readme, f"README does not list {rel}"
        assert nbtemplate.colab_url(rel) in readme, f"README has no Colab badge for {rel}"


# ---------------------------------------------------------------- チェックの行と登録表

CHECK_CALL = re.compile(r"""^\s*ch6\.check\(\s*["']([\w.-]+)["']\s*,\s*([A-Za-z_]\w*)\s*\)""", re.M)
CHECK_LINE = re.compile(r"^(✅|❌|⏳|⚠️) (?:正解|不正解|エラー|未解答|採点できません|未定義) \[([\w.-]+)\] ", re.M)
TWINS = sorted((ROOT / "solutions").glob("*.ipynb"))


def _check_calls(path):
    calls, lines = [], []
    for c in _nb(path)["cells"]:
        if c["cell_type"] != "code":
            continue
        found = CHECK_CALL.findall(_src(c))
        calls += found
        text = "".join("".join(o.get("text", "")) for o in c.get("outputs", []) if o.get("output_type") == "stream")
        lines += [(m.group(1), m.group(2)) for m in CHECK_LINE.finditer(text)]
    return calls, lines


@pytest.mark.parametrize("path", TWINS, ids=[p.name for p in TWINS])
def test_solution_lines_pass_and_exercise_lines_wait(path):
    for folder, mark in (("solutions", "✅"), ("exercises", "⏳")):
        calls, lines = _check_calls(ROOT / folder / path.name)
        assert calls, f"{folder}/{path.name}: no ch6.check calls"
        assert [i for _, i in lines] == [i for i, _ in calls], \
            f"{folder}/{path.name}: stored check lines {lines} do not match the calls {calls}"
        bad = [(m, i) for m, i in lines if m != mark]
        assert not bad, f"{folder}/{path.name}: every stored check line must be {mark}, got {bad}"


def test_registry_equals_the_check_calls_each_once():
    """Each registered exercise of a section is called once in its notebook, in any order: an exercise inserted
    anywhere takes the section's next free number (numbers are ids, never shifted, so older notebooks still grade)."""
    import ch6

    reg = ch6.registry()
    assert not ch6.load_errors()
    in_notebooks = []
    for path in TWINS:
        calls, _ = _check_calls(path)
        for ex_id, name in calls:
            assert ex_id in reg, f"{path.name}: {ex_id} is not registered"
            assert reg[ex_id].title == name, \
                f"{path.name}: {ex_id} checks {name!r} but the registry expects {reg[ex_id].title!r}"
        section = path.name.split("_")[0] + "." + path.name.split("_")[1]
        ids = [i for i, _ in calls]
        assert sorted(ids) == sorted(i for i in reg if i.startswith(section + "-")), \
            f"{path.name}: the check calls are not the registered exercises of {section}, each once"
        in_notebooks += [i for i, _ in calls]
    assert sorted(in_notebooks) == sorted(reg), "registered checks that no notebook calls (or the reverse)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_notebook_imports_jax_private_modules(path):
    """issue 22: jax._src は公開の API ではない。公開の名前のないエラーは型の名前で確かめる（caught.type_name）。"""
    for cell in _nb(path)["cells"]:
        if cell["cell_type"] == "code":
            assert "jax._src" not in _src(cell), f"{path.name}: {_src(cell).splitlines()[0]}"


LEGEND = "- ✅ 正解 ／ ❌ 不正解（理由とヒント）／ ❌ エラー（解答のコードの中で例外が起きた）／ ⏳ 未解答"


@pytest.mark.parametrize("path", sorted((ROOT / "solutions").glob("6_*.md")), ids=lambda p: p.stem)
def test_exercise_scaffolding_has_the_one_wording(path):
    """CONTRIBUTING の「Exercise scaffolding」: 凡例の 1 行（その後ろは空行）、最後の「すべて ✅ になったら、6.N は
    完了です。」、見出しの印は（チャレンジ）だけ。6.5 は小テスト（選択式）なので、凡例と完了の行は持たない。"""
    text = path.read_text(encoding="utf-8")
    section = path.stem.split("_")[1]
    if section == "5":
        return
    assert text.count(LEGEND + "\n\n") == 1, f"{path.name}: 凡例の行「{LEGEND}」（後ろに空行）がちょうど 1 つ必要です"
    assert f"すべて ✅ になったら、6.{section} は完了です。" in text, f"{path.name}: 完了の行がありません"
    assert "（挑戦）" not in text and "必ず守ること" not in text, f"{path.name}: （チャレンジ）と **必須** を使います"
