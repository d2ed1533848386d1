"""ノートブックを新しいカーネルで上から順に実行する（出力の更新・ベンチマーク・採点で共用）。"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat

from . import sanitize

DEFAULT_DEVICES = 8
# JupyterLab が開いたときに書くのと同じカーネル指定（違うと、開いただけでノートブックが変更扱いになる）
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def kernel_env(devices: int = DEFAULT_DEVICES, platforms: str | None = "cpu") -> dict[str, str]:
    """カーネルに渡す環境変数。テストと同じく CPU の模擬デバイスを使う。"""
    env = dict(os.environ)
    env["JAX_NUM_CPU_DEVICES"] = str(devices)
    if platforms:
        env["JAX_PLATFORMS"] = platforms
    env.setdefault("PYTHONHASHSEED", "0")
    return env


class OtherCheckout(RuntimeError):
    """カーネル（またはテスト、道具）が読み込む ch6 が、このチェックアウトのものではない。"""


def kernel_python(kernel_name: str = "python3") -> str:
    """kernel_name のカーネルを起動する Python（jupyter_client と同じく、"python" はこのプロセスの Python）。"""
    try:
        from jupyter_client.kernelspec import KernelSpecManager

        exe = KernelSpecManager().get_kernel_spec(kernel_name).argv[0]
    except Exception:  # カーネルの指定が見つからない: jupyter_client も既定ではこの Python を使う
        return sys.executable
    return sys.executable if re.fullmatch(r"python(\d+(\.\d+)?)?", exe) else exe


def kernel_ch6(cwd: str | os.PathLike, env: dict | None = None) -> Path | None:
    """cwd で env を渡して起動したカーネルが ``import ch6`` で読み込むパッケージのフォルダ（読み込まずに探す）。"""
    code = "import importlib.util as u; s = u.find_spec('ch6'); print(s.origin if s and s.origin else '')"
    p = subprocess.run([kernel_python(), "-c", code], cwd=cwd, env=env if env is not None else kernel_env(),
                       capture_output=True, text=True)
    origin = p.stdout.strip()
    return Path(origin).resolve().parent if p.returncode == 0 and origin else None


_CHECKED: set[str] = set()


def check_own_ch6(checkout: str | os.PathLike, cwd: str | os.PathLike | None = None, env: dict | None = None) -> None:
    """チェックアウト checkout の道具やテストが起動するカーネルが、そのチェックアウトの ch6 を読み込むことを確かめる。

    共有の環境で、編集可能なインストール（pip install -e）が別のチェックアウトを指していると、カーネルは黙って
    そちらの ch6 を読み込み、出力も台帳も別のコードのものになります。違えば両方のパスを挙げて OtherCheckout。
    同じ checkout・cwd では 1 プロセスに 1 回だけ確かめます。"""
    checkout = Path(checkout).resolve()
    cwd = Path(cwd) if cwd is not None else checkout / "notebooks"
    cwd = cwd if cwd.is_dir() else checkout
    key = f"{checkout}\0{cwd}"
    if key in _CHECKED:
        return
    own, found = checkout / "ch6", kernel_ch6(cwd, env)
    if found != own:
        raise OtherCheckout(
            f"kernels started from {cwd} import ch6 from {found or '(nowhere: ch6 is not installed)'}, not from this "
            f"checkout's {own}. The environment of {kernel_python()} (its editable install, or PYTHONPATH) points "
            f"at another checkout (or none): run `{kernel_python()} -m pip install --no-deps -e {checkout}`, or use "
            f"this checkout's own .venv (make test creates it).")
    _CHECKED.add(key)


def sanitizers() -> list[tuple[re.Pattern, str]]:
    """ch6/nbval_sanitize.cfg の regex/replace の組（テストと保存出力で同じ規則を使う）。"""
    return list(sanitize.rules())


def _clean_error(out, rules) -> None:
    """例外の出力: メッセージを規則で整え、トレースバックは最後の 1 行だけにする
    （ライブラリ内部のフレームはこの機械のパスを含むため）。"""
    evalue = out.get("evalue", "")
    for pattern, repl in rules:
        evalue = pattern.sub(repl, evalue)
    out["evalue"] = evalue
    out["traceback"] = [f"{out.get('ename', 'Error')}: {evalue}"]


def coalesce_streams(outputs: list) -> list:
    """続けて出た同じ種類のストリーム（stdout / stderr）を 1 つにまとめる。カーネルが出力をどこで区切って
    送るかは実行のたびに変わるので、まとめておくと保存する出力が毎回同じになる。"""
    merged = []
    for out in outputs:
        if (out.get("output_type") == "stream" and merged and merged[-1].get("output_type") == "stream"
                and merged[-1].get("name") == out.get("name")):
            prev = merged[-1]
            text = prev["text"] if isinstance(prev["text"], str) else "".join(prev["text"])
            more = out["text"] if isinstance(out["text"], str) else "".join(out["text"])
            prev["text"] = text + more
        else:
            merged.append(out)
    return merged


def clean(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """実行のたびに変わるメタデータ（時刻など）を落とし、例外の出力からローカルパスを除き、
    続けて出たストリームを 1 つにまとめる。"""
    rules = sanitizers()
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        cell.metadata.pop("collapsed", None)
        if cell.get("outputs"):
            cell.outputs = coalesce_streams(cell.outputs)
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                _clean_error(out, rules)
    for key in ("widgets", "papermill"):
        nb.metadata.pop(key, None)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    return nb


def execute(nb: nbformat.NotebookNode, *, cwd: str | os.PathLike, devices: int = DEFAULT_DEVICES,
            cell_timeout: int = 300, platforms: str | None = "cpu",
            allow_errors: bool = False) -> tuple[nbformat.NotebookNode, float]:
    """nb をその場で実行し、(nb, 秒) を返す。タグ raises-exception のセルは例外を許す。"""
    from nbclient import NotebookClient

    client = NotebookClient(
        nb, timeout=cell_timeout, kernel_name="python3", resources={"metadata": {"path": str(cwd)}},
        record_timing=False, allow_errors=allow_errors,
    )
    start = time.perf_counter()
    client.execute(env=kernel_env(devices, platforms))
    return clean(nb), time.perf_counter() - start


def read(path: str | os.PathLike) -> nbformat.NotebookNode:
    return nbformat.read(str(path), as_version=4)


def writes(nb: nbformat.NotebookNode) -> str:
    """保存するときの文字列（write と同じ形）。"""
    return nbformat.writes(nb) + "\n"


def write(nb: nbformat.NotebookNode, path: str | os.PathLike) -> None:
    """写しに書き終えてから置き換える（write_text）。同じときに読むもの（サイトを作る・テスト・JupyterLab）が、
    書きかけや空のノートブックを読まない。"""
    write_text(path, writes(nb))


def write_text(path: str | os.PathLike, text: str) -> None:
    """text を写しに書き終えてから置き換える（os.replace）。Path.write_text は先にファイルを空にするので、同じときに
    読むものが空や書きかけのファイルを読むことがある。"""
    target = Path(path).resolve()
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
