"""ch6.draw._base: 日本語のフォント（IPAex ゴシック）で描くこと。"""
from __future__ import annotations

from ch6 import draw, meshes


def test_japanese_font_is_used():
    from matplotlib import font_manager

    draw.mesh(meshes.mesh_1d())
    from matplotlib import rcParams

    assert rcParams["font.family"] == ["IPAexGothic"]
    assert "IPAexGothic" in {f.name for f in font_manager.fontManager.ttflist}
