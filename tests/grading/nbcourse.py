"""nbgrader のコースを README のコマンドどおりに動かす部品（tests/grading/test_nbgrader_*.py が共有）。"""
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from ch6.grading import nbgrader as edition

ROOT = Path(__file__).resolve().parents[2]
STUB = re.compile(r"^([ \t]*)# TODO: ここにコードを書いてください\n[ \t]*raise NotImplementedError$", re.M)


def snapshot(tmp: Path) -> Path:
    """この時点の ch6 の写し（tmp/pkg/ch6）。同じチェックアウトでほかの人が ch6 を書き換えても、採点の監視が
    それを改ざんと見ないように、nbgrader とカーネルはこの写しを読み込みます（env_for の package）。"""
    import shutil

    target = tmp / "pkg"
    shutil.copytree(ROOT / "ch6", target / "ch6", ignore=shutil.ignore_patterns("__pycache__"))
    return target


def env_for(tmp: Path, devices: str = "2", package: Path | None = None) -> dict:
    """nbgrader とカーネルの環境: この venv の python3 カーネル、ユーザーの Jupyter 設定は読まない、2 デバイス。
    HOME は一時フォルダ（README の ~/ch6-course がチェックアウトの外の、このテストだけのフォルダになる）。"""
    kernel = tmp / "jupyter" / "kernels" / "python3"
    kernel.mkdir(parents=True, exist_ok=True)
    (kernel / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (ipykernel)", "language": "python"}))
    env = dict(os.environ, JUPYTER_PATH=str(tmp / "jupyter"), JUPYTER_CONFIG_DIR=str(tmp / "jupyter-config"),
               JAX_NUM_CPU_DEVICES=devices, JAX_PLATFORMS="cpu", PYTHONHASHSEED="0", HOME=str(tmp))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # nbgrader は alembic を PATH から呼ぶ
    if package is not None:
        env["PYTHONPATH"] = str(package)
    return env


def readme_commands() -> list[str]:
    """README の「nbgrader で点数をつける場合」のコマンド（環境を作る 1 行目を除く）。このテストはこのとおりに実行します。"""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    item = text[text.index("6. **nbgrader で点数をつける場合**"):]
    block = item[item.index("```bash\n") + 8:item.index("```", item.index("```bash\n") + 8)]
    lines = [ln.split("  #")[0].strip() for ln in block.splitlines() if ln.strip()]
    assert lines[0] == "make nbgrader-setup && source .venv-nbgrader/bin/activate", lines[0]
    return lines[1:]


def argv(line: str, env: dict) -> list[str]:
    """README の 1 行 -> このテストの venv で動かす argv（venv を有効にしたのと同じ）。"""
    words = [w.replace("~", env["HOME"], 1) if w.startswith("~") else w for w in shlex.split(line)]
    head = {"python": [sys.executable], "nbgrader": [sys.executable, "-m", "nbgrader"],
            "ch6-grade": [sys.executable, "-m", "ch6.grade"]}[words[0]]
    return head + words[1:]


def run(line: str, cwd: Path, env: dict, *extra: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(argv(line, env) + list(extra), cwd=cwd, env=env, text=True, capture_output=True, timeout=1200)
    if check:
        assert p.returncode == 0, f"{line}: {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-60000:]}"
    return p


def answer_cell(nb, eid: str):
    """演習 eid の解答のセル（nbgrader の solution のセル、なければ ch6.check を呼ぶセル）。"""
    gid = edition.grade_id(eid)
    return next((c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == gid), None) or next(
        c for c in nb.cells if c.cell_type == "code" and f'ch6.check("{eid}"' in c.source)


def solution_body(source_cell) -> str:
    lines = source_cell.source.split("\n")
    a = next(k for k, ln in enumerate(lines) if "### BEGIN SOLUTION" in ln)
    b = next(k for k, ln in enumerate(lines) if "### END SOLUTION" in ln)
    return "\n".join(lines[a + 1:b])


def answer(cell, body: str) -> None:
    m = STUB.search(cell.source)
    assert m, cell.source
    indent = m.group(1)
    body = "\n".join(indent + ln.strip() if not ln.startswith(indent) else ln for ln in body.split("\n"))
    cell.source = cell.source[:m.start()] + body + cell.source[m.end():]
