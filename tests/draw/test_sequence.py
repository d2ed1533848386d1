"""ch6.draw の 6.8b 節の図（sequence.py）: リングアテンションの各ステップ、エキスパートごとの負荷、容量とドロップされたトークン。
図の文字に実際の番号と数が入り、入力が違えば図も違い、小さく決定的であること。"""
from __future__ import annotations

import pytest

from ch6 import draw
from tests.drawcheck import small_and_deterministic

RING4 = [[(d - s) % 4 for s in range(4)] for d in range(4)]  # held[d][s]: 右隣へ送るリング


def test_ring_steps_name_each_block_and_device():
    d = small_and_deterministic(lambda: draw.ring_attention_steps(RING4))
    assert sum(t.startswith("K/V ") for t in d.texts) == 16
    assert "D3\nQ 3" in d.texts and "ステップ 3" in d.texts
    assert not any("すべて捨てる" in t for t in d.texts)   # 因果マスクなしなら凡例もない
    assert "リング" in d.caption


def test_causal_ring_has_a_legend_and_a_different_picture():
    plain = draw.ring_attention_steps(RING4)
    causal = small_and_deterministic(lambda: draw.ring_attention_steps(RING4, causal=True))
    assert plain.png != causal.png
    assert any("すべて捨てる" in t for t in causal.texts) and any("対角" in t for t in causal.texts)
    other = draw.ring_attention_steps([[(d + s) % 4 for s in range(4)] for d in range(4)], causal=True)
    assert other.png != causal.png
    one = draw.ring_attention_steps([[0]], causal=True)      # 1 デバイス: ブロック 1 つ、対角だけ
    assert "K/V 0" in one.texts


def test_expert_load_shows_counts_capacity_and_dropped():
    d = small_and_deterministic(lambda: draw.expert_load([3, 9, 1, 5], dropped=[0, 5, 0, 2], capacity=4))
    assert "容量 4" in d.texts and "9" in d.texts and "E3" in d.texts
    assert any("ドロップ 7" in t for t in d.texts) and "ドロップ" in d.texts   # 題と凡例
    plain = draw.expert_load([3, 9, 1, 5])
    assert plain.png != d.png
    assert not any("容量" in t or "ドロップ" in t for t in plain.texts)
    with pytest.raises(ValueError):
        draw.expert_load([3, 9], dropped=[4, 0])               # 負荷より多くはドロップされない


def test_dropped_vs_capacity_labels_each_point():
    d = small_and_deterministic(lambda: draw.dropped_vs_capacity([0.5, 1.0, 2.0], [40, 12, 0], 64))
    assert "40" in d.texts and "0" in d.texts and any("64" in t for t in d.texts)
    assert draw.dropped_vs_capacity([0.5, 1.0, 2.0], [40, 13, 0], 64).png != d.png


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError):
        draw.ring_attention_steps([1, 2, 3])
    with pytest.raises(ValueError):
        draw.expert_load([])
    with pytest.raises(ValueError):
        draw.dropped_vs_capacity([1.0], [1, 2], 3)


def test_causal_categories_differ_in_grayscale():
    """すべて使う・対角・すべて捨てるは、色だけでなく模様でも区別する（白黒で印刷しても読める）。"""
    import io

    import numpy as np
    from matplotlib import image

    def gray(held):
        png = draw.ring_attention_steps(held, causal=True).png
        rgb = image.imread(io.BytesIO(png))[..., :3]
        return rgb @ np.array([0.299, 0.587, 0.114])

    full, diag, skip = gray([[0, 0], [0, 0]])[:, :], gray([[0, 1], [1, 1]]), gray([[1, 1], [0, 0]])
    assert full.shape == diag.shape == skip.shape
    # セルの中の明るさのばらつき（模様）が 3 通りで違う
    spreads = [float(np.std(g)) for g in (full, diag, skip)]
    assert len({round(s, 3) for s in spreads}) == 3
