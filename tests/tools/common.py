"""tests/tools/ のテストが共有するもの。"""
from __future__ import annotations

import json


def notebook_json(*sources: str) -> str:
    """コードセルだけのノートブック（nbformat 4.5）の JSON。セルの id は c0, c1, …。"""
    cells = [{"cell_type": "code", "id": f"c{k}", "metadata": {}, "source": s, "outputs": [],
              "execution_count": None} for k, s in enumerate(sources)]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
