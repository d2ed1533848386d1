"""講座のウェブサイトの Sphinx 設定。ソースは site/build_site.py が作る作業フォルダ（build/site-src）で、
ノートブックは保存された出力のまま使います（何も実行しません）。"""
from __future__ import annotations

import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tools"))

from jax_api import footer_note  # noqa: E402
from nbtemplate import repo_url  # noqa: E402

project = "JAX 第 6 章ハンズオン"
# フッタの作者は講座の名前で（GitHub の組織の短い名前 jax-ch6 ではなく）
author = f"{project}の作者"
copyright = author
language = "ja"
# 講座の版（pyproject.toml の version）と、講座が固定した JAX（requirements.txt の jax==…）。フッタに出す
_pyproject = tomllib.loads((HERE.parent / "pyproject.toml").read_text(encoding="utf-8"))
COURSE_VERSION = _pyproject["project"]["version"]
JAX_PIN = next((line.split("==", 1)[1].strip() for line in (HERE.parent / "requirements.txt").read_text().splitlines()
                if line.startswith("jax==")), "?")
version = release = COURSE_VERSION
LICENSE = next((p.name for p in (HERE.parent / n for n in ("LICENSE", "LICENSE.md", "LICENSE.txt")) if p.exists()), None)

extensions = ["myst_nb", "sphinx.ext.githubpages", "course_site"]

# 保存された出力をそのまま使う（ノートブックを実行しない）
nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
# 出力の Markdown（6.3b の表など）を GFM で：表が表になる
nb_render_markdown_format = "gfm"

exclude_patterns = ["_files/**", "_mathjax/**", "**/.ipynb_checkpoints"]
suppress_warnings: list[str] = []

# 検索：日本語（site/course_site.py の CourseJapanese が用語と API 名をひとまとまりで索引に入れる）
html_search_language = "ja"
# 数式は MathJax 3 で（pip の sphinx-mathjax-offline のファイルをサイトから配る。ネットから読み込まない）
html_math_renderer = "mathjax"
mathjax_path = "mathjax/tex-chtml.js"
mathjax3_config = {
    # 右クリックの英語のメニューを出さない。式は列の幅に合わせる（CSS が横にスクロールさせる）
    "options": {"enableMenu": False},
    "chtml": {"scale": 1.0, "displayAlign": "center"},
}

html_theme = "sphinx_book_theme"
html_title = "JAX 第 6 章ハンズオン"
html_static_path = ["_static"]
html_css_files = ["course.css"]
html_js_files = ["course.js", "course-headings.js", "course-search.js"]
html_favicon = "favicon.svg"
# 明るい配色から（テーマの JavaScript が「mode が空」とコンソールにエラーを出さないように）
html_context = {"default_mode": "light"}
html_copy_source = False
# テーマの「© Copyright …」は英語なので出さず、フッタ（extra_footer）に日本語で書く
html_show_copyright = False
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
    "extra_footer": (
        f"<p>© {author}。講座の版 {COURSE_VERSION}（JAX {JAX_PIN} で実行した出力）。"
        + (f'ライセンス：<a href="{repo_url()}/blob/main/{LICENSE}">{LICENSE}</a>。' if LICENSE
           else "ライセンス：まだ決まっていません（リポジトリにライセンスのファイルがありません）。")
        + f'講座のソース・ノートブック・課題の報告は <a href="{repo_url()}">GitHub のリポジトリ</a>にあります。'
        + footer_note(JAX_PIN) + "</p>"
    ),
}
