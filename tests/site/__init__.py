"""ウェブサイト（make site）のテスト。test_site_unit.py は速い単体テスト、test_browser_*.py は本物のブラウザで
（CH6_SITE=1、make test-site。共有する fixture は conftest.py）。"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# site/ の build_site と course_site を読み込めるように（site/ はパッケージではない）
for folder in (ROOT / "site", ROOT / "tools"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
