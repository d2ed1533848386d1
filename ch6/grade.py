"""採点コマンドの入り口: ``python -m ch6.grade`` と ``ch6-grade``（pyproject.toml の [project.scripts]）。

中身は ``ch6.grading`` にあります（1 つのモジュールに 1 つの仕事。地図は ch6/grading/__init__.py）。
"""
import sys

from .grading.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
