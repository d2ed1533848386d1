"""図のテストが共有する確認: 同じ入力なら同じ PNG、小さい（60 KB 未満）、版の入ったメタデータなし。"""


def small_and_deterministic(make):
    a, b = make(), make()
    assert a.png == b.png, "the same input must give the same PNG bytes"
    assert a.png.startswith(b"\x89PNG") and len(a.png) < 60_000
    assert b"Matplotlib" not in a.png  # 版の入ったメタデータを入れない
    return a
