"""学習者版に解答の行がない（issue 47 の 4）: 作った学習者版のすべての文字のファイル（wheel の中も）で、
solutions/ の解答のすべての行を探す。

**数える行。** solutions/*.ipynb の ``### BEGIN SOLUTION`` と ``### END SOLUTION`` の間の行を、字下げと行末の
コメント（``  #`` から後）を外して比べます。数えないのは、どの Python のプログラムにもある行です: 空行、
コメントだけの行、12 文字未満の行（``else:``、``best = None``、``x = x + 1`` など）、``return`` と名前・定数
だけの行（``return rules``、``return None, None``）、かっこだけの行。

**見せてよい行。** 学習者版がわざと見せるものにある行は、答えではありません: 本編（notebooks/）、演習の
ノートブック（exercises/、解答を外して作ったもの）、講座のライブラリ（wheel の ``ch6/`` のうち ``ch6/checks/``
の外: 本編が読み込んで使い、問題文が「本編の ``serving.quantize_int8`` を自分で書きます」のように名を挙げます）。
それ以外の場所（チェック ``ch6/checks/``、記録 ``ch6/recorded.json``、README、Makefile…）に解答の行が
あれば、答えが配られています。

チェックの参照の実装は ``@recorded``（:mod:`ch6.recorded`）で記録した値に置き換わります。解答の行が 1 行でも
見つかれば失敗します。問題文が書き方まで渡す行（6.6-3 の ``size = mesh.shape[axis]``、6.9b-2 の
``mgr = train.manager(directory)``）は、解答の ``### BEGIN SOLUTION`` の前に置き、演習のノートブックに見せます。
"""
from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import learner_edition  # noqa: E402

BLOCK = re.compile(r"### BEGIN SOLUTION\n(.*?)\n\s*### END SOLUTION", re.S)
MIN_CHARS = 12
TRIVIAL = re.compile(r"^(return( [\w.]+(, [\w.]+)*)?|[\[\](){},]+|pass|break|continue|\.\.\.)$")


def _clean(line: str) -> str:
    return line.split("  #")[0].strip()


def solution_lines() -> dict[str, str]:
    """数える解答の行 → その解答のノートブック（最初に出たもの）。"""
    out: dict[str, str] = {}
    for sol in sorted((ROOT / "solutions").glob("*.ipynb")):
        for cell in json.loads(sol.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "code":
                continue
            for m in BLOCK.finditer("".join(cell["source"])):
                for raw in m.group(1).splitlines():
                    line = _clean(raw)
                    if line and not line.startswith("#") and len(line) >= MIN_CHARS and not TRIVIAL.match(line):
                        out.setdefault(line, sol.stem)
    return out


def _lines(text: str) -> set[str]:
    return {_clean(ln) for ln in text.splitlines()}


def _notebook_text(path: Path) -> str:
    return "\n".join("".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"])


def scan(folder: Path) -> tuple[dict[tuple[str, str], str], set[str]]:
    """学習者版のフォルダで見つかった解答の行 {(ファイル, 行): ノートブック} と、見せてよい場所にある解答の行。"""
    wanted = solution_lines()
    shown: set[str] = set()
    texts: dict[str, str] = {}
    for p in sorted(folder.rglob("*")):
        if not p.is_file() or ".git" in p.relative_to(folder).parts:
            continue
        rel = p.relative_to(folder).as_posix()
        if p.suffix == ".whl":
            with zipfile.ZipFile(p) as zf:
                for name in zf.namelist():
                    data = zf.read(name)
                    text = (gzip.decompress(data) if name.endswith(".gz") else data).decode("utf-8")
                    if name.startswith("ch6/") and not name.startswith("ch6/checks/") and name.endswith(".py"):
                        shown |= _lines(text)
                    else:
                        texts[name] = text
        elif rel.startswith(("notebooks/", "exercises/")) and p.suffix == ".ipynb":
            shown |= _lines(_notebook_text(p))
        else:
            texts[rel] = p.read_text(encoding="utf-8")
    found = {(name, line): nb for name, text in texts.items() for line in _lines(text) & set(wanted)
             if line not in shown for nb in [wanted[line]]}
    return found, shown & set(wanted)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return learner_edition.build(tmp_path_factory.mktemp("learner"), formats=())


def test_no_solution_line_in_the_learner_edition(built):
    found, shown = scan(built.folder)
    counted = solution_lines()
    print(f"\n解答の行 {len(counted)} 行のうち、学習者版の配布物に見つかった行 {len(found)}"
          f"（見せてよい本編・演習・ライブラリにある行 {len(shown)}）")
    for (name, line), nb in sorted(found.items()):
        print(f"  {name}: {line}  ← {nb}")
    assert not found, f"解答の行が学習者版にあります: {sorted(found)}"


def test_the_scan_sees_a_planted_answer(built, tmp_path):
    """見張りの見張り: 解答の 1 行を README に書いた学習者版では、その行が見つかる。"""
    line = next(ln for ln in solution_lines() if "rules" in ln and "fsdp" in ln)
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "README.md").write_text(f"# x\n    {line}  # 行末のコメント\n", encoding="utf-8")
    found, _ = scan(copy)
    assert ("README.md", line) in found


def test_recorded_bodies_are_gone_from_the_wheel(built):
    """@recorded の付いた参照の実装は、wheel では本体がなく、記録（ch6/recorded.json）がその名前を持つ。"""
    with zipfile.ZipFile(built.wheel) as zf:
        records = json.loads(zf.read("ch6/recorded.json"))
        stripped = {}
        for name in zf.namelist():
            if name.startswith("ch6/checks/") and name.endswith(".py"):
                source = (ROOT / name).read_text(encoding="utf-8")
                _, names = learner_edition.strip_recorded(source)
                if names:
                    stripped[name] = names
                    assert zf.read(name).decode("utf-8") == learner_edition.strip_recorded(source)[0]
    assert {"ch6/checks/s6_9a/rules_for_mesh.py", "ch6/checks/s6_10/max_batch.py",
            "ch6/checks/s6_10/critical_batch.py"} <= set(stripped)
    for path, names in stripped.items():
        module = path.removesuffix(".py").replace("/", ".")
        for name in names:
            assert records.get(f"{module}.{name}"), f"{module}.{name} の記録がありません"


# 学習者版の wheel の ch6 を使うテストのプロセスに入れる pytest のプラグイン: 見張り（ch6.edition）を外し
# （テストは ch6.checks の参照を読み込むので）、ch6.run_check の 1 行をすべて CH6_LOG に書く
_PLUGIN = '''
import os, sys
import ch6
from ch6 import edition
if os.environ.get("CH6_EXPECT_LEARNER"):
    assert edition.is_learner() and ch6.__file__.startswith(os.environ["CH6_EXPECT_LEARNER"]), ch6.__file__
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, edition._GUARD, False)]
    edition._active = False
    for name, module in list(edition._stash.items()):
        sys.modules[name] = module
    edition._stash.clear()
_run_check = ch6.run_check
def run_check(exercise_id, answer):
    result = _run_check(exercise_id, answer)
    with open(os.environ["CH6_LOG"], "a", encoding="utf-8") as f:
        f.write(result.line.replace("\\n", "\\\\n") + "\\n")
    return result
ch6.run_check = run_check
'''


def _recorded_test_files(wheel: Path) -> list[str]:
    """@recorded の付いた関数を持つチェックのモジュールの単体テスト（tests/checks/s6_N/test_<module>.py）。
    ``CH6_LEARNER_SECTIONS=s6_1,s6_8a`` でその節だけに（チップの短い実行のため）。"""
    only = {s for s in os.environ.get("CH6_LEARNER_SECTIONS", "").split(",") if s}
    out = []
    with zipfile.ZipFile(wheel) as zf:
        for name in sorted(zf.namelist()):
            if name.startswith("ch6/checks/") and name.endswith(".py"):
                if learner_edition.strip_recorded((ROOT / name).read_text(encoding="utf-8"))[1]:
                    test = ROOT / "tests" / "checks" / Path(name).parent.name / f"test_{Path(name).stem}.py"
                    if test.exists() and (not only or Path(name).parent.name in only):
                        out.append(str(test))
    return out


ON_CHIP = os.environ.get("CH6_TESTS_ON") == "accelerator"  # tools/accelerator.py がチップで動かすとき


@pytest.mark.parametrize("devices", [1, 8, 12])  # 12: 記録の範囲（1..8）の外
def test_learner_checks_give_the_full_editions_verdicts(built, tmp_path, devices):
    """記録に置き換えたチェックの単体テスト（正しい答えと名指しする誤り）を、学習者版の wheel の ch6 と完全版の ch6 で
    動かす: どちらも通り、ch6.run_check の行（判定とメッセージ）が 1 行ずつ同じ。

    記録は CPU で作ります。``CH6_TESTS_ON=accelerator`` では両方の版をチップ（その数のデバイス）で動かし、CPU で
    作った記録がチップでも同じ判定になることを確かめます（1 回だけ。devices は使いません）。"""
    if ON_CHIP and devices != 1:
        pytest.skip("チップではデバイスの数を選べない（1 回だけ動かす）")
    site = tmp_path / "site"
    with zipfile.ZipFile(built.wheel) as zf:
        zf.extractall(site)
    (tmp_path / "plug").mkdir()
    (tmp_path / "plug" / "learner_log_plugin.py").write_text(_PLUGIN, encoding="utf-8")
    tests = _recorded_test_files(built.wheel)
    assert len(tests) >= (1 if os.environ.get("CH6_LEARNER_SECTIONS") else 10), tests
    logs = {}
    for edition_name, path in (("learner", f"{site}:{tmp_path / 'plug'}:{ROOT}"), ("full", f"{tmp_path / 'plug'}:{ROOT}")):
        log = tmp_path / f"{edition_name}.log"
        env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": str(devices), "PYTHONPATH": path,
               "CH6_LOG": str(log), "CH6_EXPECT_LEARNER": str(site) if edition_name == "learner" else ""}
        if ON_CHIP:  # チップの JAX は PYTHONPATH にある（ACCELERATOR.md）ので、その後ろに残す
            del env["JAX_PLATFORMS"], env["JAX_NUM_CPU_DEVICES"]
            env["PYTHONPATH"] = os.pathsep.join([path, os.environ.get("PYTHONPATH", "")])
        # --noconftest: conftest.py は別のチェックアウトの ch6 を断る。--import-mode=append: PYTHONPATH の ch6 が先。
        # -o addopts=: pyproject の既定は nbval の引数（ノートブックは動かさない。チップの Python には nbval がない）
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "learner_log_plugin",
                              "-p", "no:cacheprovider", "--noconftest", "--import-mode=append", "--rootdir", str(ROOT),
                              *tests],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, f"{edition_name}: {run.stdout[-3000:]}"
        logs[edition_name] = log.read_text(encoding="utf-8").splitlines()
    assert len(logs["full"]) > 100
    assert logs["learner"] == logs["full"]
