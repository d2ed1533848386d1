"""セルの出力（図・印刷された表・わざと起こしたエラー）と本文の API 名のリンク（course_site.py が登録する変換）。"""
from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from course_nodes import INTENTIONAL, _is_output, _replace_text, _skipped, _staged
from docutils import nodes
from sphinx.transforms import SphinxTransform

_BOX = re.compile(r"[\u2500-\u257f]")  # 罫線の文字（visualize_array_sharding の図など）


_TABLE_RULE = re.compile(r"^-{2,}(?: {2}-{2,})*$")


def display_width(text: str) -> int:
    """等幅の表示の幅（全角の文字は 2。ch6.show が表の列をそろえるのと同じ数え方）。"""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def printed_table_parts(text: str) -> list[tuple[str, bool]]:
    """出力の文字を (部分, 表か) に分ける。表は「見出し・----  ----・行」の並びで、行は表の幅を超えない
    空でない行が続くところまで（表の後ろの文は表の幅より長いので表に入らない。入っても表より広くはない）。
    表がなければ [(text, False)]。"""
    lines = text.split("\n")
    parts: list[tuple[list[str], bool]] = []
    plain: list[str] = []
    i = 0
    while i < len(lines):
        rule = lines[i].rstrip()
        head = plain[-1] if plain else ""
        if _TABLE_RULE.match(rule) and head.strip() and display_width(head.rstrip()) <= display_width(rule):
            width = display_width(rule)
            end = i + 1
            while end < len(lines) and lines[end].strip() and display_width(lines[end].rstrip()) <= width:
                end += 1
            plain.pop()
            if plain:
                parts.append((plain, False))
            parts.append(([head, *lines[i:end]], True))
            plain = []
            i = end
            continue
        plain.append(lines[i])
        i += 1
    if plain:
        parts.append((plain, False))
    out = [("\n".join(p).strip("\n"), table) for p, table in parts]
    return [(t, table) for t, table in out if t] or [(text, False)]


def _split_printed_tables(block: nodes.literal_block) -> None:
    """出力の箱を、表の部分と文の部分の箱に分ける（表の箱に course-printed-table、続きの箱に印）。"""
    parts = printed_table_parts(block.astext())
    if not any(table for _, table in parts):
        return
    new = []
    for k, (text, table) in enumerate(parts):
        piece = block.copy()
        piece.rawsource = text
        piece += nodes.Text(text)
        piece["classes"] = list(block["classes"]) + (["course-printed-table"] if table else [])
        if k > 0:
            piece["classes"].append("course-output-cont")
        if k < len(parts) - 1:
            piece["classes"].append("course-output-more")
        new.append(piece)
    block.parent.replace(block, new)


class CourseOutputs(SphinxTransform):
    """セルの出力：図に代替テキストと拡大の印、印刷された表を折り返さない箱に、わざと起こしたエラーの出力に印。"""

    default_priority = 700

    def apply(self, **kwargs) -> None:
        alts = _staged(self.env, "_figure_alts.json")
        for image in self.document.findall(nodes.image):
            stem = Path(image["uri"]).stem
            if stem in alts:
                image["alt"] = alts[stem]
                # no-scaled-link：Sphinx は幅のある図を PNG へのリンクで包む。クリックで拡大するので包ませない
                image["classes"] += ["course-figure", "no-scaled-link"]
        for block in list(self.document.findall(nodes.literal_block)):
            if _is_output(block) and not _BOX.search(block.astext()):
                _split_printed_tables(block)
        for block in self.document.findall(nodes.literal_block):
            if _is_output(block) and _BOX.search(block.astext()):  # 区切り線の図は折り返さない
                block["classes"].append("course-diagram")
            if INTENTIONAL in block.astext() and _is_output(block):
                block["classes"].append("course-intentional-error")
                if isinstance(block.parent, nodes.container):
                    block.parent["classes"].append("course-has-intentional-error")


class ApiLinks(SphinxTransform):
    """本文のコード（`jax.jit`、`lax.psum(x, "i")`）の中の API 名を、JAX の API リファレンスのそのページへ。

    リンクはコードの中の名前の部分だけ（`jax.jit(jax.vmap(f))` なら 2 つ）。セルの入力と出力、見出し、
    すでにリンクの中のコードはそのまま。表（site/jax_api.txt）にない名前は、リファレンスの検索へ。
    """

    default_priority = 710

    def apply(self, **kwargs) -> None:
        import jax_api

        def link(m: re.Match):
            name = m.group(0)
            uri = jax_api.url(name) or f"{jax_api.BASE}search.html?q={jax_api.full_name(name)}"
            guide = ["course-api-guide"] if jax_api.full_name(name) in jax_api.GUIDES else []  # 項目のない名前は文書へ
            return nodes.reference(name, name, refuri=uri, reftitle=jax_api.full_name(name), classes=["course-api", *guide])

        for lit in list(self.document.findall(nodes.literal)):
            if _skipped(lit) or _is_output(lit):
                continue
            for text in list(lit.findall(nodes.Text)):
                if not isinstance(text.parent, nodes.reference):
                    _replace_text(text, jax_api.NAME, link)
