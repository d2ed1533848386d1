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

チェックは確かめる内容ごとのモジュールに分けてあります: 共有部品は ``common``、問 1〜4（サンプルごとの勾配、smap の形、
smap の中の grad、device_put の分け方）は ``gradients_and_placement``、問 5〜7（出力の形）は ``output_shapes``、
問 8〜10（コンパイラが入れる集団通信）は ``compiler_collectives``。このパッケージを import すると 10 問すべてが登録されます。
"""
from __future__ import annotations

from .common import CHOICES, Outcome
from .compiler_collectives import Q10_OPTIONS, collective_choices, q8_truth, q9_truth, q10_outcomes
from .gradients_and_placement import Q1_OPTIONS, Q4_OPTIONS, q1_loss, q1_outcomes, q2_truth, q3_outcomes, q4_outcomes
from .output_shapes import Q5_SHAPES, Q7_OPTIONS, q5_truth, q6_truth, q7_outcomes

__all__ = [
    "CHOICES", "Outcome", "Q1_OPTIONS", "Q4_OPTIONS", "Q5_SHAPES", "Q7_OPTIONS", "Q10_OPTIONS", "q1_loss",
    "q1_outcomes", "q2_truth", "q3_outcomes", "q4_outcomes", "q5_truth", "q6_truth", "q7_outcomes",
    "q8_truth", "q9_truth", "q10_outcomes", "collective_choices",
]
