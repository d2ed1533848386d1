"""古い JAX が入った venv の中で実行する（.ci/stale_colab.sh から）。作業フォルダにリポジトリはない。

1. wheel から入れたパッケージが、入っていた古い JAX をそのまま残したこと
2. Colab の印なし（学習者のマシン）: 最初のセルは何も入れず、そのマシンに合うコマンドを表示する（CPU と、自前の TPU VM）
3. Colab の印あり: 講義と演習のノートブックを、セルのタグを消して上から最後まで実行する（Colab と同じく止まらずに）。
   最初のノートブックの最初のセルが JAX を入れ直し、どのノートブックのカーネルも MIN_JAX 以上の JAX で終わること
"""
from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(sys.argv[1])  # ノートブックを読むためだけに使う
STALE = sys.argv[2]
HERE = Path.cwd()
DEVICES = os.environ.get("STALE_DEVICES", "2")
COLAB = {"COLAB_RELEASE_TAG": "release-colab-external_ci-stale", "COLAB_GPU": "0"}
PROBE = "import jax\nprint('CH6_KERNEL_JAX', jax.__version__, jax.device_count())"

import ch6  # noqa: E402  （JAX は読み込まない）
from ch6 import env as ch6_env  # noqa: E402
from ch6.runtime import version_tuple  # noqa: E402

MIN = ch6_env.MIN_JAX
assert not Path(ch6.__file__).resolve().is_relative_to(ROOT), f"ch6 comes from the checkout: {ch6.__file__}"
assert "jax" not in sys.modules and "numpy" not in sys.modules, "import ch6 loaded JAX or NumPy"


def kernel_env(**extra: str) -> dict[str, str]:
    """この CI の環境の印（Colab・Kaggle・TPU・JAX の設定）を消した環境変数に extra を足す。"""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("COLAB_", "KAGGLE_", "TPU_", "JAX_", "CH6_"))}
    e.update(JAX_NUM_CPU_DEVICES=DEVICES, PYTHONHASHSEED="0", **extra)
    return e


def jax_on_disk() -> str:
    code = "import importlib.metadata as m; print(m.version('jax'), m.version('jaxlib'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def first_cell(environ: dict[str, str]) -> str:
    """最初のセルの中身（setup_cell() の最後の行と同じ呼び出し）を新しいプロセスで。"""
    out = subprocess.run([sys.executable, "-c", "import ch6\nn_devices = ch6.setup()"], env=environ,
                         capture_output=True, text=True, timeout=600, cwd=HERE)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def run_book(path: Path) -> tuple[str, str, str, float]:
    """1 冊を新しいカーネルで、タグを消して最後まで実行する。(名前, 最初のセルの出力, カーネルの JAX の版, 秒)"""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    name = f"{path.parent.name}/{path.name}"
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        cell.metadata.pop("tags", None)  # Colab・Kaggle・VS Code はタグを見ない
        if cell.cell_type == "code":
            cell.outputs = []
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))
    folder = HERE / path.stem
    folder.mkdir(exist_ok=True)
    t0 = time.monotonic()
    try:
        NotebookClient(nb, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(folder)}}).execute(env=kernel_env(**COLAB))
    except CellExecutionError as e:
        done = sum(1 for c in nb.cells if c.cell_type == "code" and c.get("execution_count"))
        raise SystemExit(f"FAIL: {name} stopped at code cell {done}: {str(e).strip().splitlines()[-1][:300]}") from None
    code = [c for c in nb.cells if c.cell_type == "code"]
    first = "".join(o.get("text", "") for o in code[0].outputs if o.get("output_type") == "stream")
    probe = "".join(o.get("text", "") for o in code[-1].outputs if o.get("output_type") == "stream")
    m = re.search(r"CH6_KERNEL_JAX (\S+) (\d+)", probe)
    assert m, f"{name}: {probe}"
    assert m.group(2) == DEVICES, f"{name}: {m.group(2)} devices"
    return name, first, m.group(1), time.monotonic() - t0


def main() -> None:
    # 1. パッケージを入れても JAX はそのまま
    assert jax_on_disk() == f"{STALE} {STALE}", jax_on_disk()
    print(f"ok: the wheel kept the preinstalled jax {STALE} / jaxlib {STALE}")

    # 2. 学習者のマシン（Colab の印なし）: 入れずにコマンドを表示する
    for label, extra, want in [("a laptop (CPU)", {}, f'pip install -U "jax>={MIN}"'),
                               ("an own TPU VM", {"TPU_ACCELERATOR_TYPE": "v5litepod-8", "JAX_PLATFORMS": "cpu"},
                                f'pip install -U "jax[tpu]>={MIN}"')]:
        text = first_cell(kernel_env(**extra))
        print(f"--- first cell on {label}, jax {STALE}:\n{text.rstrip()}")
        assert f"JAX {STALE} は古すぎます" in text, text
        line = next(ln for ln in text.splitlines() if ln.startswith("⚠️"))
        assert line.endswith(want), f"expected the command {want!r}: {line}"
        assert "入れました" not in text, text
        assert jax_on_disk() == f"{STALE} {STALE}", f"something was installed on {label}: {jax_on_disk()}"
        print(f"ok: nothing installed on {label}; the command shown is {want}")

    # 3. Colab（印あり）: 講義と演習のノートブックすべてを、タグを消して最後まで。
    #    最初の 1 冊が JAX を入れ直す（その間はほかを動かさない）。残りは JOBS 個ずつ並べて
    books = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "exercises").glob("*.ipynb"))
    assert len(books) >= 10, books
    t_all = time.monotonic()
    jobs = max(1, int(os.environ.get("JOBS", "2")))
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        results = [pool.submit(run_book, books[0]).result()]
        print(f"ok: {results[0][0]} ran to the end in {results[0][3]:.1f} s on JAX {results[0][2]}")
        for r in pool.map(run_book, books[1:]):
            print(f"ok: {r[0]} ran to the end in {r[3]:.1f} s on JAX {r[2]}")
            results.append(r)
    for name, _, version, _ in results:
        assert version_tuple(version) >= version_tuple(MIN), f"{name}: the kernel ended on JAX {version} < {MIN}"

    print(f"--- first cell of {results[0][0]} (jax {STALE} preinstalled, Colab marker set):\n{results[0][1].rstrip()}")
    print(f"--- first cell of {results[1][0]} (after the upgrade):\n{results[1][1].rstrip()}")
    (up,) = [ln for ln in results[0][1].splitlines() if ln.startswith("🔧")]
    assert f"Colab の CPU ランタイムです。JAX {STALE} が入っています" in up and up.endswith("を入れました。"), up
    assert f'pip install -U "jax>={MIN}"' in up and "再起動" not in up, up
    for name, text, _, _ in results[1:]:
        assert text.startswith("✅ Colab の CPU ランタイムです。"), f"{name}: {text[:300]}"
    after = jax_on_disk()
    assert all(version_tuple(v) >= version_tuple(MIN) for v in after.split()), after
    print(f"ok: {len(books)} notebooks ran to the end in {time.monotonic() - t_all:.0f} s ({jobs} at a time); "
          f"jax/jaxlib on disk now {after}")


if __name__ == "__main__":
    main()
