"""ch6/checks/s6_3a の全体にかかわるテスト（複数の演習をまたぐもの）。

6.3a（jit + sharding）のチェックの単体テスト: 正解（と同じ意味の別の書き方）は通り、典型的な誤りは理由つきで落ち、
学習者の値が原因の失敗は「internal」にならない。

conftest が JAX_NUM_CPU_DEVICES を決めてから jax を読み込みます（既定 8、--devices 1〜8 のどれでも動く）。"""
from __future__ import annotations

from tests.checks.s6_3a.common import ROOT


def test_no_message_uses_the_bare_word_nashi():
    """「集団通信なし」の表記は ch6.show.collectives_line の 1 通りだけ（チェックの中に「なし」の別表記を持たない）。"""
    src = "".join(f.read_text(encoding="utf-8")
                  for f in sorted((ROOT / "ch6" / "checks" / "s6_3a").glob("*.py")))  # パッケージの全モジュール
    assert "def check_predict" in src
    assert 'or "なし"' not in src and "def _comm" not in src
