"""講座のサイトの画面の文字を日本語に：Sphinx とテーマの訳のない文字列を補い、書き出した HTML の英語の属性を直す。"""
from __future__ import annotations

import gettext
import json
import re
from pathlib import Path

# Sphinx・pydata-sphinx-theme・sphinx-book-theme の日本語の訳にない（または空の）文字列
UI_JA = {
    "Link to this heading": "この見出しへのリンク",
    "Link to this definition": "この定義へのリンク",
    "Link to this code": "このコードへのリンク",
    "Link to this image": "この図へのリンク",
    "Link to this table": "この表へのリンク",
    "System Settings": "システムの設定",
    "Light": "ライト",
    "Dark": "ダーク",
    "Color mode": "配色",
    "Search": "検索",
    "Search the docs ...": "サイトを検索…",
    "Search...": "検索…",
    "Search Results": "検索結果",
    "Skip to main content": "本文へ移動",
    "Back to top": "ページの先頭へ",
    "Contents": "目次",
    "Download this page": "このページをダウンロード",
    "Fullscreen mode": "全画面表示",
    "Source repository": "ソースのリポジトリ",
    "repository": "リポジトリ",
    "open issue": "課題を報告",
    "Toggle navigation": "ナビゲーションの表示",
    "Toggle secondary sidebar": "目次の表示",
    "Toggle primary sidebar": "ナビゲーションの表示",
    "Site navigation": "サイトのナビゲーション",
    "Section Navigation": "このページの節",
    "Section navigation": "このページの節",
    "On this page": "このページの内容",
    "Print to PDF": "PDF に印刷",
    "previous page": "前のページ",
    "next page": "次のページ",
    "previous": "前へ",
    "next": "次へ",
    "By %(author)s": "作成：%(author)s",
    "By the %(author)s": "作成：%(author)s",
    "Last updated on %(last_updated)s.": "最終更新：%(last_updated)s",
    "Breadcrumb": "現在の位置",
    "Home": "ホーム",
    "Index": "索引",
    "Copyright": "著作権",
    "© Copyright %(copyright)s.": "© %(copyright)s",
    "Copyright %(copyright)s": "© %(copyright)s",
    "Created using %(sphinx_link)s %(sphinx_version)s.": "%(sphinx_link)s %(sphinx_version)s で作りました。",
    "Built with the %(theme_name)s %(theme_version)s.": "%(theme_name)s %(theme_version)s を使っています。",
    "Theme by the %(executable_book_project)s": "テーマ：%(executable_book_project)s",
}
# ブラウザ（translations.js）で使う文字列：検索の件数など
UI_JA_JS = {
    "Search finished, found one page matching the search query.": "検索が終わりました。1 ページが見つかりました。",
    "Search finished, found ${resultCount} pages matching the search query.":
        "検索が終わりました。${resultCount} ページが見つかりました。",
    "Search didn't return any results. Please try again with different keywords.":
        "見つかりませんでした。別の言葉で検索してください。",
    "Searching": "検索しています",
    "Preparing search...": "検索を準備しています…",
    "Search Results": "検索結果",
    "Hide Search Matches": "検索語の強調を消す",
}


class _Fallback(gettext.NullTranslations):
    def gettext(self, message: str) -> str:
        return UI_JA.get(message, message)

    def ngettext(self, singular: str, plural: str, n: int) -> str:
        return UI_JA.get(singular if n == 1 else plural, singular if n == 1 else plural)


def _install_ui_strings(app) -> None:
    """Sphinx とテーマの訳の後ろに、訳のない文字列の日本語を足す（訳があるものはそのまま）。"""
    from sphinx import locale

    for key, translator in list(locale.translators.items()):
        if key[1] in ("sphinx", "booktheme", "pydata_sphinx_theme") and isinstance(translator, gettext.NullTranslations):
            if not getattr(translator, "_course_fallback", False):
                translator.add_fallback(_Fallback())
                translator._course_fallback = True


def _translations_js(app, exception) -> None:
    """サイトの translations.js の空の訳（検索の件数など）を日本語で埋める。"""
    if exception is not None or app.builder.format != "html":
        return
    path = Path(app.outdir) / "_static" / "translations.js"
    if not path.exists():
        return
    text = path.read_text(encoding="utf-8")
    m = re.search(r"Documentation\.addTranslations\((\{.*\})\);", text, re.S)
    data = json.loads(m.group(1))
    one = "Search finished, found one page matching the search query."
    many = "Search finished, found ${resultCount} pages matching the search query."
    # 日本語は単数と複数を分けない（plural_expr が 0）：どの件数でも 1 つ目の形を使う
    data["messages"][one] = [UI_JA_JS[many]]
    for key, value in UI_JA_JS.items():
        if key in (one, many):
            continue
        old = data["messages"].get(key)
        if not old or old == [""] or old == key:
            data["messages"][key] = value
    path.write_text("Documentation.addTranslations(" + json.dumps(data, ensure_ascii=False, indent=4) + ");\n",
                    encoding="utf-8")


# テーマのテンプレートに英語のまま書かれている属性（訳の関数を通らない）
UI_JA_ATTRIBUTES = {
    'title="Toggle primary sidebar"': 'title="ナビゲーションの表示"',
    'title="Toggle secondary sidebar"': 'title="目次の表示"',
    'aria-label="Toggle primary sidebar"': 'aria-label="ナビゲーションの表示"',
    'aria-label="Toggle secondary sidebar"': 'aria-label="目次の表示"',
    'aria-label="Main"': 'aria-label="サイトのナビゲーション"',
    'aria-label="Page"': 'aria-label="このページ"',
}


def _japanese_attributes(app, exception) -> None:
    """テンプレートに英語のまま書かれた title・aria-label を日本語に（書き出した HTML を直す）。"""
    if exception is not None or app.builder.format != "html":
        return
    for path in Path(app.outdir).rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        new = text
        for old, ja in UI_JA_ATTRIBUTES.items():
            new = new.replace(old, ja)
        if new != text:
            path.write_text(new, encoding="utf-8")
