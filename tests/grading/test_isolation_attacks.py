"""issue 47 の攻撃を学生として（ch6-grade で）: ほかの人の提出物を消す、成績簿を書き換える、採点のしくみに書き足す、
採点のしくみの .pyc を偽る、採点を偽る（読み込みのキャッシュの探し方、比べる関数の差し替え: tests/grading/attacks.py）。

採点は ``python -m ch6.grade`` を別のプロセスで、一時フォルダに写した ``ch6``（PYTHONPATH）で動かします:
隔離なしの採点で攻撃が本当に書き換えても、講座のチェックアウトにも、並んで動くほかのテストにも届きません。

- 隔離なし（``--unisolated``、どのマシンでも）: 書き換えは 1 冊ごとに見つかり、元に戻り、攻撃した人は全演習 ⚠️ tampered
  （0 点、備考に「採点の外のファイルが書き換えられました」とファイルの名前）。その後に採点した白紙の提出物は 0 点。
- bubblewrap（使えるマシンだけ）: 攻撃は書けずに終わります（ほかの提出物と成績簿は見えず、採点のしくみは読み取り専用）。

どちらでも、攻撃した人は名指しの指摘で全演習 ⚠️ tampered（0 点）です: 書こうとしただけで監視が
「採点の外のファイルを書き換えようとしました（そのファイル）」と書きます。採点を偽る攻撃は、見つかったもの
（``numpy.allclose`` など）を名指しします。ほかの人の点数とファイル、成績簿、採点のしくみは変わりません。
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from ch6.grading import isolate
from tests.grading.attacks import FORGERIES

ROOT = Path(__file__).resolve().parents[2]
SOLUTION, EXERCISE = ROOT / "solutions" / "6_1_vmap.ipynb", ROOT / "exercises" / "6_1_vmap.ipynb"
pytestmark = pytest.mark.skipif(not (SOLUTION.exists() and EXERCISE.exists()), reason="6_1_vmap の解答と演習が必要")

# 採点のしくみに書き足す: これより後に採点される提出物は、白紙でも全問正解になる（issue 47 で実際にあった攻撃）
PAYLOAD = '''

_ch6_grader = grader


def grader(emit, user_ns):
    _ch6_grader(emit, user_ns)

    def grade(exercise_id):
        emit(dict(id=exercise_id, title="?", status="pass", message="ok"))
    return grade
'''
# 採点のしくみの .pyc を偽る: 中身は PAYLOAD の採点、ヘッダはソースの更新時刻と大きさ（Python はソースの代わりにこれを読む）
PYC = """import importlib.util, importlib._bootstrap_external as ext, os, marshal
src = {path!r}
st = os.stat(src)
code = compile(open(src).read() + {payload!r}, src, "exec")
os.makedirs(os.path.dirname(importlib.util.cache_from_source(src)), exist_ok=True)
with open(importlib.util.cache_from_source(src), "wb") as f:
    f.write(ext._code_to_timestamp_pyc(code, st.st_mtime, st.st_size))
"""
MODES = [isolate.UNISOLATED, pytest.param(isolate.BUBBLEWRAP, marks=pytest.mark.skipif(
    not isolate.bubblewrap_works(), reason="このマシンでは bubblewrap を使えません"))]


def _with_cell(source_nb: Path, code: str | None, out: Path) -> None:
    nb = nbformat.read(str(source_nb), as_version=4)
    if code:
        nb.cells.append(nbformat.v4.new_code_cell(code))
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(out))


@pytest.fixture
def klass(tmp_path):
    pkg = tmp_path / "pkg"
    shutil.copytree(ROOT / "ch6", pkg / "ch6", ignore=shutil.ignore_patterns("__pycache__"))
    subs, other = tmp_path / "提出", tmp_path / "別のコース"
    other.mkdir()
    (other / "gradebook.csv").write_text("learner,score\nwatanabe,5\n", encoding="utf-8")
    victim = subs / "z_victim" / "z_victim_6_1_vmap.ipynb"
    inkernel = pkg / "ch6" / "grading" / "inkernel.py"
    attacks = {  # 名前の順に採点される（隔離なしでは --jobs 1）: 攻撃 → 白紙 → 被害者
        "a_delete": f"import shutil\nshutil.rmtree({str(victim.parent)!r})",
        "b_gradebook": f"open({str(other / 'gradebook.csv')!r}, 'w').write('learner,score\\nwatanabe,0\\n')",
        "c_grader": f"open({str(inkernel)!r}, 'a').write({PAYLOAD!r})",
        "d_pyc": PYC.format(path=str(inkernel), payload=PAYLOAD),
        **{f"f_{name}": code for name, (code, _) in FORGERIES.items()},
    }
    for name, code in attacks.items():
        _with_cell(EXERCISE, code, subs / f"{name}_6_1_vmap.ipynb")
    _with_cell(EXERCISE, None, subs / "y_blank_6_1_vmap.ipynb")
    _with_cell(SOLUTION, None, victim)
    before = {p: p.read_bytes() for p in [*pkg.rglob("*.py"), victim, other / "gradebook.csv"]}
    before["pycache"] = sorted(p.name for p in pkg.rglob("*.pyc"))
    return tmp_path, pkg, subs, other, list(attacks), before


@pytest.mark.parametrize("how", MODES)
def test_attacks_harm_no_one_else(klass, how):
    tmp, pkg, subs, other, attackers, before = klass
    env = {**os.environ, "PYTHONPATH": str(pkg), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop(isolate.ENV_UNISOLATED, None)
    out = tmp / "seiseki.json"
    cmd = [sys.executable, "-m", "ch6.grade", str(subs), "--json", str(out), "--protect", str(other),
           "--devices", "2", "--timeout", "60", "--check-timeout", "30", "--jobs", "2", "--quiet"]
    run = subprocess.run(cmd + (["--unisolated"] if how == isolate.UNISOLATED else []), env=env, cwd=tmp,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    assert isolate.describe(how) in run.stderr  # どの隔離を使ったかを言う
    rows = {Path(r["file"]).name.removesuffix("_6_1_vmap.ipynb"): r for r in json.loads(out.read_text())["rows"]}
    assert set(rows) == {*attackers, "y_blank", "z_victim"}
    victim = rows["z_victim"]
    assert victim["score"] == victim["max_score"] > 0, victim  # ほかの人の点数は変わらない
    assert rows["y_blank"]["score"] == 0, rows["y_blank"]     # 書き足された採点のしくみで満点にならない
    assert all(r["status"] != "tampered" for r in rows["y_blank"]["exercises"].values())
    for name in attackers:  # どの攻撃も名指しで 0 点（隔離で書けなかった攻撃も）
        r = rows[name]
        assert r["score"] == 0 and {e["status"] for e in r["exercises"].values()} == {"tampered"}, r
    notes = {name: " ".join(rows[name]["notes"]) for name in attackers}
    tried = "採点の外のファイルを書き換えようとしました"
    assert tried in notes["a_delete"] and "z_victim" in notes["a_delete"], notes["a_delete"]
    assert tried in notes["b_gradebook"] and "gradebook.csv" in notes["b_gradebook"], notes["b_gradebook"]
    assert f"{tried}（ch6/grading/inkernel.py" in notes["c_grader"], notes["c_grader"]
    assert f"{tried}（ch6/grading/__pycache__" in notes["d_pyc"], notes["d_pyc"]
    if how == isolate.UNISOLATED:  # 書き換えは見つかって元に戻る
        for name in ("a_delete", "b_gradebook"):
            assert "採点の外のファイルが書き換えられました" in notes[name], notes[name]
        # 書き足した採点のしくみは、読み込み直すときにも見つかる（備考は 2 種類まで。3 つ目は「ほか 1 件」）
        assert "採点のしくみのファイルが、採点を始めたときと違います（ch6/grading/inkernel.py" in notes["c_grader"]
        assert "（ほか 1 件）" in notes["c_grader"], notes["c_grader"]
    for name, (_, found) in FORGERIES.items():  # 採点を偽る攻撃: 見つかったものを名指し（ほかのことのせいにしない）
        assert "採点のしくみへの干渉" in notes[f"f_{name}"] and found in notes[f"f_{name}"], notes[f"f_{name}"]
        assert tried not in notes[f"f_{name}"], notes[f"f_{name}"]
    pycache = before.pop("pycache")
    for path, data in before.items():  # ファイルはどれも元のまま（消えたものは戻り、足されたものはない）
        assert path.read_bytes() == data, path
    assert sorted(p.name for p in pkg.rglob("*.pyc")) == pycache  # 偽の .pyc も残らない
    assert sorted(p.name for p in other.iterdir()) == ["gradebook.csv"]
