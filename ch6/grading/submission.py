"""提出ファイルを読む: ノートブックか、壊れていないか。読めなければ学習者に伝わる理由を 1 文で。"""
from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import nbformat

NOT_A_NOTEBOOK = "ノートブックではありません（.ipynb の JSON ではないファイルです）。"


def read_submission(path: Path) -> tuple[nbformat.NotebookNode | None, str | None]:
    """(ノートブック, None) か (None, 読めない理由)。"""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return None, f"ファイルを読めません（{type(exc).__name__}）。"
    if not data.strip():
        return None, "空のファイルです（ノートブックを保存してから提出してください）。"
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None, NOT_A_NOTEBOOK
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        if not text.lstrip().startswith("{"):
            return None, NOT_A_NOTEBOOK
        return None, f"ファイルが壊れていて読めません（JSON の {exc.lineno} 行目 {exc.colno} 文字目で解析エラー）。"
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list):
        return None, "ノートブックの形式ではありません（JSON ですが cells がありません）。"
    try:
        return _parse(text), None
    except Exception as exc:
        return None, f"ノートブックの形式が正しくありません（{type(exc).__name__}）。"


def _parse(text: str) -> nbformat.NotebookNode:
    """nbformat で読み、実行に要る欠けた項目を補う。検証の長いメッセージ（traitlets のログ、セルの id が
    ないなどの警告）は採点する人の画面に出さない。"""
    log = logging.getLogger("traitlets")
    level = log.level
    try:
        log.setLevel(logging.CRITICAL)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nb = nbformat.reads(text, as_version=4)
    finally:
        log.setLevel(level)
    for cell in nb.cells:
        if cell.cell_type not in ("code", "markdown", "raw") or not isinstance(cell.source, str):
            raise ValueError(cell.cell_type)
        cell.setdefault("metadata", nbformat.NotebookNode())
        if cell.cell_type == "code":
            cell.setdefault("outputs", [])
            cell.setdefault("execution_count", None)
    return nb
