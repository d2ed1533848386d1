"""ノートブックを新しいカーネルで上から順に実行する（出力の更新・ベンチマーク・採点で共用）。"""
from __future__ import annotations

import os
import re
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
    Path(path).write_text(writes(nb), encoding="utf-8")
