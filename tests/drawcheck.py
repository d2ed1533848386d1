"""図のテストが共有する確認: 同じ入力なら同じ PNG、小さい（MAX_PNG_BYTES 未満）、版の入ったメタデータなし、
高精細の画面のために表示の 2 倍の解像度。"""

# 図は 160 dpi（表示の 2 倍）で描くので、80 dpi のころの 60 KB の上限も約 2.5 倍に（ノートブックを軽く保つ上限）
MAX_PNG_BYTES = 160_000


def small_and_deterministic(make):
    a, b = make(), make()
    assert a.png == b.png, "the same input must give the same PNG bytes"
    assert a.png.startswith(b"\x89PNG") and len(a.png) < MAX_PNG_BYTES
    assert b"Matplotlib" not in a.png  # 版の入ったメタデータを入れない
    png, shown = a._repr_png_()  # Jupyter には、ピクセルの半分の大きさで表示させる
    assert png == a.png and (shown["width"], shown["height"]) == (a.size[0] // 2, a.size[1] // 2)
    return a
