"""ch6.draw.diagrams: 処理の段階の帯（timeline）、vmap の軸の図（vmap_axes、6.1）、判断の流れ図（flowchart、6.5）。
図の文字に名前・形・軸が入り、入力が違えば図も違い、小さく決定的であること。"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ch6 import draw
from tests.drawcheck import MAX_PNG_BYTES, small_and_deterministic

NODES = [
    ("q", "複数のデバイスで\n動かす？", "問い", (2.0, 0.0)),
    ("a", "jax.vmap", "選ぶもの", (0.5, 1.5)),
    ("b", "jax.shard_map", "選ぶもの", (3.5, 1.5)),
    ("old", "pmap のコード", "レガシー", (5.0, 0.0)),
]
EDGES = [("q", "a", "いいえ"), ("q", "b", "はい"), ("old", "q", "移す")]


def test_flowchart_shows_every_box_label_and_kind():
    d = small_and_deterministic(lambda: draw.flowchart(NODES, EDGES, title="どれを使うか", dashed=[("old", "q")]))
    texts = set(d.texts)
    assert {"複数のデバイスで\n動かす？", "jax.vmap", "jax.shard_map", "pmap のコード"} <= texts
    assert {"いいえ", "はい", "移す"} <= texts          # 矢印のラベル
    assert {"問い", "選ぶもの", "レガシー"} <= texts    # 凡例（種類ごとに 1 回）
    assert "どれを使うか" in texts
    assert d.caption.startswith("流れ図: 複数のデバイスで")


def test_a_different_chart_gives_a_different_picture():
    base = draw.flowchart(NODES, EDGES)
    fewer = draw.flowchart(NODES, EDGES[:2])
    moved = draw.flowchart([*NODES[:3], ("old", "pmap のコード", "レガシー", (5.0, 1.5))], EDGES)
    dashed = draw.flowchart(NODES, EDGES, dashed=[("old", "q")])
    assert len({base.png, fewer.png, moved.png, dashed.png}) == 4
    assert "移す" not in fewer.texts


def test_the_course_flowchart_fits():
    # 6.5 の流れ図と同じ大きさ（10 個の箱、3 種類、9 本の矢印）でも小さな PNG
    nodes = [(f"n{i}", f"箱 {i}\n2 行目\n3 行目", ("問い", "選ぶもの", "レガシー")[i % 3], (2.5 * (i % 4), 1.5 * (i // 4)))
             for i in range(10)]
    edges = [(f"n{i}", f"n{i + 1}", "はい") for i in range(9)]
    small_and_deterministic(lambda: draw.flowchart(nodes, edges))


@pytest.mark.parametrize("nodes,edges", [
    (NODES, [("q", "nowhere", "")]),                                   # 知らない名前への矢印
    (NODES + [("q", "重複", "問い", (0.0, 3.0))], EDGES),             # 同じ名前の箱が 2 つ
    ([(f"n{i}", "x", f"種類 {i}", (i, 0.0)) for i in range(6)], []),  # 種類が多すぎる
])
def test_bad_tables_are_rejected(nodes, edges):
    with pytest.raises(ValueError):
        draw.flowchart(nodes, edges)


def predict(W, x):
    return jnp.tanh(W @ x)


def _picture(in_axis, out_axis, n=6):
    W = jnp.ones((3, 4))
    xs = jnp.ones((4, n)) if in_axis == 1 else jnp.ones((n, 4))
    out = jax.vmap(predict, in_axes=(None, in_axis), out_axes=out_axis)(W, xs)
    return draw.vmap_axes([("W", W), ("xs", xs)], (None, in_axis), ("出力", out), out_axes=out_axis)


def test_texts_carry_names_shapes_and_axes():
    d = _picture(1, 1)
    assert "W\n形 (3, 4)\nin_axes=None" in d.texts
    assert "xs\n形 (4, 6)\nin_axes=1" in d.texts
    assert "出力\n形 (3, 6)\nout_axes=1" in d.texts
    assert any("0〜5" in t for t in d.texts) and "vmap" in d.texts


def test_small_deterministic_and_different_axes_give_different_pictures():
    a, b = _picture(1, 1), _picture(1, 1)
    assert a.png == b.png and a.png.startswith(b"\x89PNG") and len(a.png) < MAX_PNG_BYTES
    assert b"Matplotlib" not in a.png
    assert _picture(1, 0).png != a.png and _picture(0, 0).png != a.png


def test_long_axes_are_cut_and_said_so():
    d = _picture(0, 0, n=20)
    assert any("先頭の 12 個" in t for t in d.texts) and "…" in d.texts
    assert len(d.png) < MAX_PNG_BYTES


def test_disagreeing_batch_sizes_are_refused():
    with pytest.raises(ValueError, match="disagree"):
        draw.vmap_axes([("a", jnp.ones((3, 2))), ("b", jnp.ones((4, 2)))], 0, ("out", jnp.ones(3)), 0)
    with pytest.raises(ValueError, match="out of range"):
        draw.vmap_axes([("a", jnp.ones(3))], 1, ("out", jnp.ones(3)), 0)


def test_timeline():
    d = draw.timeline([("all-gather", "通信"), ("順伝播", "計算")], title="FSDP")
    assert {"all-gather", "順伝播", "通信", "計算", "FSDP"} <= set(d.texts)
    assert repr(d).startswith("<図: ")


def test_vmap_axes_writes_the_sample_number_in_each_batched_cell():
    # 白黒でも、どのマスがどのサンプルかが読めること（共通の引数のマスには数字を書かない）
    d = draw.vmap_axes([("W", np.ones((3, 4))), ("xs", np.ones((4, 6)))], (None, 1), ("出力", np.ones((3, 6))),
                       out_axes=1)
    for b in range(6):
        assert d.texts.count(str(b)) == 4 + 3, b   # xs の 4 行と出力の 3 行
    assert any("マスの数字" in t for t in d.texts)


def test_flowchart_kinds_differ_by_line_style_not_only_by_colour():
    from ch6.draw import diagrams

    styles = {style_width for style_width in diagrams._FLOW_LINES}
    assert len(styles) == len(diagrams._FLOW_FILLS)
