"""wheel だけを入れた venv の中で実行する（.ci/wheel_smoke.sh から）。作業フォルダにリポジトリはない。

1. パッケージがチェックアウトではなく venv から読み込まれていること、出力を整える規則と採点用のデータがあること
2. 演習ノートブック 6.1 に、正しい解答 1 つと間違った解答 1 つを書いて実行: ✅ 正解・❌ 不正解・⏳ 未解答 が出ること
3. そのノートブックを ch6-grade で採点: 同じ結果になること
4. 6.6 の 2 プロセス実行（python -m ch6.multihost.launch）が成功すること
5. 6.9 の 3 冊（学習、チェックポイント、プロセスを失って再開）と 6.10 の本編のノートブックが、チェックアウトのない
   フォルダで最後まで動き、どのセルもエラーを出さないこと（コーパス、ワーカー、採点データは wheel から）
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(sys.argv[1])  # 入力のノートブックを読むためだけに使う
HERE = Path.cwd()
BIN = Path(sys.executable).parent
env = dict(os.environ, JAX_PLATFORMS="cpu", JAX_NUM_CPU_DEVICES="4")
os.environ.update(env)

import ch6  # noqa: E402
from ch6 import sanitize  # noqa: E402

pkg = Path(ch6.__file__).resolve()
assert not pkg.is_relative_to(ROOT), f"ch6 comes from the checkout: {pkg}"
assert sanitize.rules(), "the sanitising rules are missing from the package"
print(f"ok: ch6 from {pkg.parent.parent.name}/, {len(sanitize.rules())} sanitising rules")

import nbformat  # noqa: E402
from nbclient import NotebookClient  # noqa: E402

# 2. 学習者のノートブック: 6.1-1 を正しく、6.1-2 を間違えて解く
nb = nbformat.read(ROOT / "exercises" / "6_1_vmap.ipynb", as_version=4)
sol = nbformat.read(ROOT / "solutions" / "6_1_vmap.ipynb", as_version=4)
STUB = re.compile(r"(?m)^(?P<i>[ \t]+)# TODO: .*\n(?P=i)raise NotImplementedError\n?")
BLOCK = re.compile(r"(?ms)^[ \t]*### BEGIN SOLUTION\n(.*?)^[ \t]*### END SOLUTION\n")


def cell_for(book, check_id):
    return next(c for c in book.cells if c.cell_type == "code" and f'ch6.check("{check_id}"' in c.source)


good = cell_for(nb, "6.1-1")
good.source = STUB.sub(BLOCK.search(cell_for(sol, "6.1-1").source).group(1), good.source, count=1)
bad = cell_for(nb, "6.1-2")
bad.source = STUB.sub(lambda m: f"{m.group('i')}return None  # 間違い: 何も計算していない\n", bad.source, count=1)
assert "NotImplementedError" not in good.source and "NotImplementedError" not in bad.source
learner = HERE / "tanaka_6_1_vmap.ipynb"
nbformat.write(nb, learner)

run = nbformat.read(learner, as_version=4)
NotebookClient(run, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute(env=env)
text = "\n".join(o.get("text", "") for c in run.cells for o in c.get("outputs", []) if o.get("output_type") == "stream")
lines = re.findall(r"^(✅|❌|⏳|⚠️) (?:正解|不正解|エラー|未解答|採点できません|未定義) \[([\w.-]+)\]", text, re.M)
print("notebook:", " ".join(f"{m}{i}" for m, i in lines))
marks = dict((i, m) for m, i in lines)
assert marks.get("6.1-1") == "✅" and marks.get("6.1-2") == "❌", lines
assert all(marks[i] == "⏳" for i in marks if i not in ("6.1-1", "6.1-2")), lines

# 3. 採点コマンド
out = subprocess.run([str(BIN / "ch6-grade"), str(learner), "--json", str(HERE / "grades.json")],
                     env=env, capture_output=True, text=True, timeout=600)
print(out.stdout[-2000:])
assert out.returncode == 0, out.stderr[-2000:]
report = json.loads((HERE / "grades.json").read_text(encoding="utf-8"))
(row,) = report["rows"]
graded = {k: v["status"] for k, v in row["exercises"].items()}
print("ch6-grade:", graded)
assert graded["6.1-1"] == "pass" and graded["6.1-2"] == "fail", graded
assert all(v == "not_done" for k, v in graded.items() if k not in ("6.1-1", "6.1-2")), graded
assert row["learner"] == "tanaka", row["learner"]
assert row["notebook"] == "6_1_vmap", f"grading did not find its data file in the wheel: {row['notebook']}"
print("ok: ch6-grade agrees with the notebook")

# 4. 6.6: 2 プロセス × CPU 2 デバイス
mh = subprocess.run([sys.executable, "-m", "ch6.multihost.launch", "-n", "2", "--devices", "2", "--", "--steps", "3"],
                    env=env, capture_output=True, text=True, timeout=600)
print(mh.stdout[-1500:])
assert mh.returncode == 0, mh.stderr[-2000:]
print("ok: python -m ch6.multihost.launch -n 2")

# 5. 6.9a〜c と 6.10: wheel の中のコーパス（ch6/capstone/corpus.txt）とワーカー（ch6/capstone/worker.py）で
for name in ("6_9a_train", "6_9b_checkpoint_resume", "6_9c_lost_process", "6_10_inference"):
    book = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    for c in book.cells:
        if c.cell_type == "code":
            c.outputs = []
    NotebookClient(book, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute(env=env)
    errors = [o for c in book.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{name}: {errors[0].get('ename')}: {errors[0].get('evalue')}"
    print(f"ok: {name} runs from the wheel, no checkout")
shutil.rmtree(HERE / "__pycache__", ignore_errors=True)
