"""ch6.grading.submission: 読めない提出ファイルは、学習者に伝わる理由 1 文になる（カーネルなし）。"""
from __future__ import annotations

import pytest

from ch6.grading.submission import read_submission


@pytest.mark.parametrize("content, words", [
    (b"", "空のファイルです"),
    (b"\x89PNG\r\n\x1a\n\x00\x00", "ノートブックではありません"),
    (b"\xff\xfe\x00x", "ノートブックではありません"),
    (b"\xe3\x83\xac\xe3\x83\x9d\xe3\x83\xbc\xe3\x83\x88", "ノートブックではありません"),
    (b'{"cells": [', "JSON の 1 行目"),
    (b'{"metadata": {}}', "cells がありません"),
    (b'[1, 2]', "JSON ですが cells がありません"),
    (b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", "source": 5}]}',
     "ノートブックの形式が正しくありません"),
])
def test_unreadable_files(tmp_path, content, words):
    path = tmp_path / "a.ipynb"
    path.write_bytes(content)
    nb, why = read_submission(path)
    assert nb is None and words in why


def test_missing_fields_are_filled_in(tmp_path):
    path = tmp_path / "a.ipynb"
    path.write_bytes(b'\xef\xbb\xbf{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": ['
                     b'{"cell_type": "code", "source": "x = 1", "metadata": {}}]}')  # BOM つき、outputs なし
    nb, why = read_submission(path)
    assert why is None and nb.cells[0].outputs == [] and nb.cells[0].execution_count is None
    nb, why = read_submission(tmp_path / "none.ipynb")
    assert nb is None and "ファイルを読めません（FileNotFoundError）" in why
