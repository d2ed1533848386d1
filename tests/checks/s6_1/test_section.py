"""ch6/checks/s6_1 の全体にかかわるテスト（複数の演習をまたぐもの）。

6.1 のチェック: 参照解と別の正解は通り、典型的な誤りは問題を名指しして落ちる。

どの演習も 1 サンプル用の関数を引数で受け取ります。チェックはノートブックの例とは別の隠し関数を渡すので、
ここでの答えも、渡された関数だけを使って書きます。"""
from ch6.checks import s6_1


def test_checks_keep_no_copy_of_the_notebook_definitions():
    """チェックはノートブックの関数（predict、dist など）を写して持たない: 学習者の関数が引数で受け取る。"""
    for name in ("predict", "dist", "rbf", "mask_after", "mlp", "predict_p"):
        assert not hasattr(s6_1, name), name
