"""講座のサイトの Sphinx の変換が共有する小さな道具（docutils の節を調べ、文字をリンクに置き換える）。"""
from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path

from docutils import nodes

INTENTIONAL = "（わざと起こしたエラーです）"  # ch6.show.INTENTIONAL（ch6 を読み込まずに済むように写し）
# テキストの中をリンクにしない場所
_SKIP = (nodes.reference, nodes.literal, nodes.literal_block, nodes.title, nodes.term, nodes.raw,
         nodes.math, nodes.math_block, nodes.image, nodes.target, nodes.rubric)


def _staged(env, name: str):
    path = Path(env.srcdir) / name
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def _href(from_doc: str, to_doc: str, anchor: str = "") -> str:
    rel = posixpath.relpath(to_doc + ".html", posixpath.dirname(from_doc) or ".")
    return rel + ("#" + anchor if anchor else "")


def _is_output(node: nodes.Node) -> bool:
    """セルの出力の中か（出力の文字はそのままにする）。"""
    while node is not None:
        if isinstance(node, nodes.container) and "cell_output" in node.get("classes", []):
            return True
        node = node.parent
    return False


def _skipped(node: nodes.Node) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, _SKIP) or "course-links" in parent.get("classes", []):
            return True
        parent = parent.parent
    return False


def _replace_text(text_node: nodes.Text, pattern: re.Pattern, make) -> bool:
    """text_node の中の pattern に合うところを make(match) の節に置き換える（make が None ならそのまま）。"""
    value = str(text_node)
    pieces: list[nodes.Node] = []
    last = 0
    for m in pattern.finditer(value):
        new = make(m)
        if new is None:
            continue
        if m.start() > last:
            pieces.append(nodes.Text(value[last:m.start()]))
        pieces.append(new)
        last = m.end()
    if not pieces:
        return False
    if last < len(value):
        pieces.append(nodes.Text(value[last:]))
    text_node.parent.replace(text_node, pieces)
    return True
