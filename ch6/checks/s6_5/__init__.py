"""6.5 まとめの小テスト（選択式、10 問）のチェック。

学習者は ``def q1(): return "b"`` のように、選択肢の記号を返す関数を書きます。記号は大文字・小文字、
前後の空白、全角・半角を区別しません（"b"、"B"、" b "、"ｂ" は同じ答え）。

どの問も、正解はチェックのその場で JAX を実際に動かして（いまのデバイス数で）求めます。
選択肢がコードの問（1・3・4・7・10）は、選択肢のコードを 1 つずつ実行し、結果が問の求めるものと一致するかで
判定します。違う選択肢を選んだときは「その選択肢がなぜ違うのか」と「実際に動かすと何が起きたか」を
1 行で説明します（正解の記号は言いません）。デバイスが 1 個だと区別できなくなる選択肢は、すべて正解として扱い、
そう書き添えます。

選択肢のコード（``Q1_OPTIONS`` など）は、解答ノートブックの問題文にそのまま載っています
（tests/test_checks_6_5.py が一致を確かめます）。

チェックは問ごとのまとまりに分けてあります: 共有部品は ``_common``、問 1〜4 は ``q1_q4``、問 5〜7 は ``q5_q7``、
問 8〜10 は ``q8_q10``。このパッケージを import すると 10 問すべてが登録されます。
"""
from __future__ import annotations

from ._common import CHOICES, Outcome
from .q1_q4 import Q1_OPTIONS, Q4_OPTIONS, _q1_outcomes, _q2_truth, _q3_outcomes, _q4_outcomes, q1_loss
from .q5_q7 import Q5_SHAPES, Q7_OPTIONS, _q5_truth, _q6_truth, _q7_outcomes
from .q8_q10 import Q10_OPTIONS, _collective_choices, _q8_truth, _q9_truth, _q10_outcomes

__all__ = [
    "CHOICES", "Outcome", "Q1_OPTIONS", "Q4_OPTIONS", "Q5_SHAPES", "Q7_OPTIONS", "Q10_OPTIONS", "q1_loss",
    "_q1_outcomes", "_q2_truth", "_q3_outcomes", "_q4_outcomes", "_q5_truth", "_q6_truth", "_q7_outcomes",
    "_q8_truth", "_q9_truth", "_q10_outcomes", "_collective_choices",
]
