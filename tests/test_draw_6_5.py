"""ch6.draw.flowchart: 判断の流れ図（6.5 の「どれを使うか」）を節と矢印の表から描く。"""
from __future__ import annotations

import pytest

from ch6 import draw
from tests.drawcheck import small_and_deterministic

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
