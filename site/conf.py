"""講座のウェブサイトの Sphinx 設定。ソースは site/build_site.py が作る作業フォルダ（build/site-src）で、
ノートブックは保存された出力のまま使います（何も実行しません）。"""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tools"))

from nbtemplate import repo_url  # noqa: E402

project = "JAX 第 6 章ハンズオン"
author = "JAX 第 6 章ハンズオンの作者"
copyright = "JAX 第 6 章ハンズオンの作者"
language = "ja"

extensions = ["myst_nb", "sphinx.ext.githubpages", "course_site"]

# 保存された出力をそのまま使う（ノートブックを実行しない）
nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "colon_fence"]

exclude_patterns = ["_files/**", "**/.ipynb_checkpoints"]
suppress_warnings: list[str] = []

# 検索：日本語（site/course_site.py の CourseJapanese が用語と API 名をひとまとまりで索引に入れる）
html_search_language = "ja"
# 数式は MathML で（MathJax をネットから読み込まない）
html_math_renderer = "mathml"

html_theme = "sphinx_book_theme"
html_title = "JAX 第 6 章ハンズオン"
html_static_path = ["_static"]
html_css_files = ["course.css"]
html_favicon = "favicon.svg"
# 明るい配色から（テーマの JavaScript が「mode が空」とコンソールにエラーを出さないように）
html_context = {"default_mode": "light"}
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None
html_theme_options = {
    "repository_url": repo_url(),
    "use_repository_button": True,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "navigation_with_keys": False,
    # 検索欄は左の列に 1 つ（上の帯に 2 つ目を出さない）
    "navbar_persistent": [],
}
