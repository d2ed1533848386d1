"""用語集（ch6/glossary.toml）: GLOSSARY.md と一致し、学習者が読む文字列は使わない言い方を含まない。
規則ごとの例（見つかる文・許す文）は tests/test_glossary_wording.py。"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from ch6 import glossary, learner_text, sentences

ROOT = Path(__file__).resolve().parent.parent
LEARNER_FILES = glossary.learner_files(ROOT)
IDS = [p.relative_to(ROOT).as_posix() for p in LEARNER_FILES]


def test_glossary_md_is_generated_from_the_toml():
    assert (ROOT / "GLOSSARY.md").read_text(encoding="utf-8") == glossary.markdown(), \
        "GLOSSARY.md is stale: python -m ch6.glossary --write GLOSSARY.md"


def test_one_term_per_concept():
    ja = [t.ja for t in glossary.terms()]
    en = [t.en.lower() for t in glossary.terms()]
    assert len(ja) == len(set(ja)) and len(en) == len(set(en))
    for t in glossary.terms():
        assert t.definition.endswith("。") and len(t.definition) < 120, t.ja


def test_rejected_list_covers_what_the_editors_found():
    text = " ".join(r.pattern for r in glossary.rejected())
    for word in ("集団演算", "置き方", "断片", "詰め物", "旧式", "各台", "つまずき", "ランチャー", "住所", "顔合わせ",
                 "手目", "工場関数", "見張り", "正直に", "切れ端",
                 # issue 29
                 "送り元", "一時メモリ", "切り詰め", "返り値", "numpy", "専門家", "周回", "費用", "数字", "落ち",
                 "手元", "実行時", "印刷", "機械", "仕事", "閉包", "ルーター", "ユーザー", "チェッカー", "✔",
                 # issue 39
                 "送り先", "チップ", "置け", "台", "ノートブック", "注意", "ブック", "章", "（"):
        assert word in text, word
    for r in glossary.rejected():
        re.compile(r.pattern)
        for t in glossary.terms():
            assert not re.search(r.pattern, t.ja), f"the glossary term {t.ja} is itself rejected by {r.pattern}"


def test_the_decisions_of_issue_29_are_written_down():
    ja = {t.ja for t in glossary.terms()}
    for term in ("分割／配置", "手動", "本編", "送信元／送信先", "一時領域", "クリップ", "戻り値", "NumPy",
                 "エキスパート並列", "混合エキスパート（MoE）", "ステージ", "テンソル並列（TP）", "インターリーブ",
                 "コスト", "数値", "ドロップ", "適用する", "ルータ"):
        assert term in ja, term
    titles = " ".join(r["title"] + r["text"] for r in glossary.rules())
    assert "長音" in titles and "スカラー" in titles and "本編" in titles


# ---- どの文字列を読むか

def test_scan_reads_markdown_comments_strings_and_outputs():
    nb = {"cells": [{"cell_type": "markdown", "source": "集団演算です"},
                    {"cell_type": "code", "source": 'x = "旧式の API"  # 各台で\nprint("ok")',
                     "outputs": [{"output_type": "stream", "text": "集めたら詰め物を捨てる\n"},
                                 {"output_type": "execute_result", "data": {"text/plain": "'断片'"}}]}]}
    found = glossary.scan(nb)
    assert [f.split(":")[0] for f in found] == ["セル 0", "セル 1", "セル 1", "セル 1", "セル 1"], found
    words = " ".join(found)
    for word in ("「集団演算」", "「旧式」", "「各台」", "「詰め物」", "「断片」"):
        assert word in words, (word, found)


def test_a_hit_names_the_word_that_triggered_it_and_the_replacement():
    [hit] = glossary.scan_text("返り値は配列です")
    assert "「返り値」" in hit and "戻り値" in hit


def test_code_strings_skip_docstrings_and_read_f_strings_as_templates():
    src = ('def f(x):\n    """旧式の説明（学習者は読まない）"""\n'
           '    return f"期待 {x.shape}、実際 {x}"\n'
           'LABEL = "English only"\n')
    texts = learner_text.strings(src)
    assert texts == [(3, "期待 {x.shape}、実際 {x}")], texts


def test_notebook_code_cells_read_docstrings_too():
    """ノートブックの関数の docstring は学習者がセルの中で読むので、コードセルでは読む（.py のチェックでは読まない）。"""
    src = 'def f(x):\n    """割り切れる最初の軸を \'data\' で分ける"""\n    return x\n'
    assert (2, "割り切れる最初の軸を 'data' で分ける") in learner_text.code_texts(src)
    assert glossary.scan({"cells": [{"cell_type": "code", "source": src}]})


def test_a_notebook_with_a_twin_is_reported_by_the_md_line(tmp_path):
    md = tmp_path / "n.md"
    md.write_text("---\njupytext:\n  formats: ipynb,md:myst\n---\n\n# 見出し\n\n本文はここ\n\n"
                  "```{code-cell} ipython3\n---\ntags: [nbval-ignore-output]\n---\nx = 1\n"
                  "print(\"返り値は 1\")  # 各台で\n```\n\nふつうの段落\n", encoding="utf-8")
    (tmp_path / "n.ipynb").write_text("{}", encoding="utf-8")
    (tmp_path / "n.outputs.txt").write_text("# header\n\n--- コードセル 1: x = 1\n数字は 1\n", encoding="utf-8")
    where = sorted(h.where.split("/")[-1] + " " + h.word for h in glossary.scan_file(tmp_path / "n.ipynb"))
    assert where == ["n.md:15 各台", "n.md:15 返り値", "n.md:18 ふつうの", "n.md:8 本文", "n.outputs.txt:4 数字"], where


def test_an_exercise_notebook_is_reported_by_the_line_of_the_solution_md_it_is_made_from(tmp_path):
    """exercises/ は solutions/X.md から作られるので、当たりは著者が直す .md の行で示す（生成された文はセルのまま）。"""
    import json

    (tmp_path / "solutions").mkdir()
    (tmp_path / "exercises").mkdir()
    (tmp_path / "solutions" / "6_1_x.md").write_text("# 見出し\n\n段落\n\n本文はここ\n", encoding="utf-8")
    cells = [{"cell_type": "markdown", "metadata": {}, "source": s} for s in ("# 見出し", "本文はここ", "ふつうの文")]
    (tmp_path / "exercises" / "6_1_x.ipynb").write_text(json.dumps({"cells": cells}), encoding="utf-8")
    hits = glossary.scan_file(tmp_path / "exercises" / "6_1_x.ipynb")
    where = [(h.where.replace(tmp_path.as_posix() + "/", ""), h.word) for h in hits]
    assert where == [("solutions/6_1_x.md:5（exercises/6_1_x.ipynb セル 1）", "本文"),
                     ("exercises/6_1_x.ipynb セル 2", "ふつうの")], where


def test_the_cli_scans_a_list_of_files(tmp_path, capsys):
    p = tmp_path / "m.py"
    p.write_text('MSG = "送り元のデバイス"\n', encoding="utf-8")
    assert glossary.main(["--scan", str(p)]) == 1
    out = capsys.readouterr().out
    assert "m.py:1: 「送り元」" in out and "送信元" in out


def test_the_learner_files_include_checks_explain_figures_and_readme():
    rel = set(IDS)
    for path in ("README.md", "ch6/explain.py", "ch6/draw/values.py", "ch6/checks/s6_1/rbf_features.py",
                 "notebooks/6_1_vmap.ipynb", "solutions/6_1_vmap.ipynb", "exercises/6_1_vmap.ipynb",
                 "ch6/grading/batch.py", "ch6/grading/nbgrader.py"):   # 採点のメッセージは先生が読む（issue 46）
        assert path in rel, path
    assert "ch6/glossary.py" not in rel


@pytest.mark.parametrize("path", LEARNER_FILES, ids=IDS)
def test_every_learner_string_uses_the_glossary(path):
    hits = [str(h) for h in glossary.scan_file(path)]
    assert not hits, "\n".join(hits[:20]) + (f"\n… {len(hits)} in all" if len(hits) > 20 else "")


def test_readme_is_scanned_up_to_its_english_section(tmp_path):
    p = tmp_path / "README.md"
    p.write_text("# 講座\n\n返り値を見ます。\n\n## English\n\nring attention, process 0\n", encoding="utf-8")
    assert [h.word for h in glossary.scan_file(p)] == ["返り値"]


# ---- 用語集は自分の決まりを守る（issue 39: 容量係数の定義が「専門家」「送り元」「落ちる」を使っていた）

def _own_words(text):
    """用語集の文から、使わない言い方を挙げているだけの部分（「…」の中と「…とは書かない」の文）を除く。"""
    text = re.sub(r"「[^」]*」", "「」", text)
    return "".join(s for s in re.findall(r"[^。]*。?", text) if "とは書かない" not in s and "とは書かず" not in s)


@pytest.mark.parametrize("term", glossary.terms(), ids=[t.ja for t in glossary.terms()])
def test_each_definition_uses_the_glossary(term):
    assert not glossary.scan_text(_own_words(term.definition)), glossary.scan_text(_own_words(term.definition))


def test_the_writing_rules_use_the_glossary():
    for r in glossary.rules():
        assert not glossary.scan_text(_own_words(r["text"])), (r["title"], glossary.scan_text(_own_words(r["text"])))


def test_own_words_drops_only_the_mentions():
    assert _own_words("関数が返す値。返り値とは書かない。") == "関数が返す値。"
    assert _own_words("「手書き」は手で書いたコードだけに使う。") == "「」は手で書いたコードだけに使う。"
    assert glossary.scan_text(_own_words("専門家 1 つが受け取るトークンの上限。"))


# ---- 文の長さ（issue 39）: 学習者が読む文は表示される形で 120 文字まで。100 文字を超える文は --long で一覧

def test_a_sentence_is_measured_as_rendered():
    src = "[公式ドキュメント](https://docs.jax.dev/en/latest/201/sharding.html) の `jax.device_put` と $2(n-1)/n$ を **見ます**。"
    [(_, raw)] = sentences.split_sentences(src)
    assert sentences.rendered(raw) == "公式ドキュメント の jax.device_put と 2(n-1)/n を 見ます。"
    assert sentences.rendered("![図](fig.png)画像の<br>後<!-- メモ -->") == "画像の後"
    assert sentences.rendered("日本語の行が\n折り返しても続きます。English\nwraps") == "日本語の行が折り返しても続きます。English wraps"


def test_inline_code_that_looks_like_a_myst_role_is_code():
    """`{V:x}` は MyST のロール {role}`…` ではない（issue 46: 6.3b の 130 文字の文が、ここで 76 文字と数えられていた）。"""
    src = "型の（varying、`{V:x}`）値を足し合わせて、プリミティブ `psum_invariant` を使うからです。"
    assert sentences.rendered(src) == "型の（varying、{V:x}）値を足し合わせて、プリミティブ psum_invariant を使うからです。"
    assert sentences.rendered("{term}`シャーディング <sharding>` です") == "シャーディング です"
    assert sentences.rendered("型 `float32[2,4@y]{V:x}` に印 `{V:x}` が出ます") == "型 float32[2,4@y]{V:x} に印 {V:x} が出ます"


def test_a_paragraph_wrapped_over_lines_is_one_sentence(tmp_path):
    p = tmp_path / "doc.md"
    p.write_text("あ" * 60 + "、\n" + "い" * 60 + "、\n`code` と" + "う" * 10 + "です。\n", encoding="utf-8")
    [s] = sentences.sentences_in(p)
    assert s.where.endswith(":1") and len(s.text) == 60 + 1 + 60 + 1 + 1 + 4 + 2 + 10 + 3, s  # 改行は 1 つの空白


def test_sentences_end_at_the_period_outside_quotes_and_parentheses():
    src = "JAX は「軸が足りません。」と言います（理由は 2 つ。後で見ます）。次の文です。`a。b` も 1 つです。"
    assert [s for _, s in sentences.split_sentences(src)] == [
        "JAX は「軸が足りません。」と言います（理由は 2 つ。後で見ます）。", "次の文です。", "`a。b` も 1 つです。"]


def test_markdown_units_split_items_headings_and_cells_and_skip_code_and_math():
    md = ("# 見出しです\n\n段落の 1 行目、\n2 行目です。\n- 項目 A です\n- 項目 B です\n\n"
          "| 列 | 説明 |\n|---|---|\n| `a|b` | セルです |\n\n```bash\necho 日本語のコード。\n```\n\n"
          "$$\n\\text{式の中の日本語}\n$$\n<!-- 日本語のコメント -->\n> **引用**：引用です。\n")
    units = sentences.markdown_units(md)
    assert units == [(1, "見出しです"), (3, "段落の 1 行目、\n2 行目です。"), (5, "項目 A です"), (6, "項目 B です"),
                     (8, "列"), (8, "説明"), (10, "`a|b`"), (10, "セルです"), (20, "**引用**：引用です。")], units


def test_a_reference_list_entry_is_not_measured_but_a_citation_in_a_sentence_is(tmp_path):
    p = tmp_path / "doc.md"
    entry = ("- Jacobs ほか 2023、\"DeepSpeed Ulysses: System Optimizations for Enabling Training of Extreme Long Sequence "
             "Transformer Models\"、[arXiv:2309.14509](https://arxiv.org/abs/2309.14509)")
    sentence = ("もう 1 つの方法は、アテンションの間だけ分割する軸を入れ替えることです（Jacobs ほか, \"DeepSpeed Ulysses: "
                "System Optimizations for Enabling Training\", https://arxiv.org/abs/2309.14509）。")
    p.write_text(f"## 参考文献\n\n{entry}\n\n{sentence}\n", encoding="utf-8")
    assert sentences.is_reference(entry) and not sentences.is_reference(sentence)
    assert [(s.where.split(":")[-1], len(s.text) > 120) for s in sentences.sentences_in(p)] == [("1", False), ("5", True)]


def test_sentences_in_a_notebook_twin_are_its_markdown_only(tmp_path):
    md = tmp_path / "n.md"
    long = "あ" * 130 + "。"
    md.write_text("---\njupytext:\n  formats: ipynb,md:myst\n---\n\n# 見出し\n\n短い文です。" + long + "\n\n"
                  "```{code-cell} ipython3\nprint(\"" + long + "\")  # " + long + "\n```\n", encoding="utf-8")
    (tmp_path / "n.ipynb").write_text("{}", encoding="utf-8")
    found = sentences.sentences_in(tmp_path / "n.ipynb")
    assert [(s.where.split("/")[-1], len(s.text)) for s in found] == [("n.md:6", 3), ("n.md:8", 6), ("n.md:8", 131)]


def test_check_messages_are_measured_per_sentence_with_fields_as_four_characters(tmp_path):
    p = tmp_path / "m.py"
    p.write_text('def f(x):\n    raise Fail(f"形が {x.shape} でした。" "直します。")\n', encoding="utf-8")
    assert [s.text for s in sentences.sentences_in(p)] == ["形が 〇〇〇〇 でした。", "直します。"]


def test_the_cli_lists_long_sentences_and_fails_over_the_limit(tmp_path, capsys):
    p = tmp_path / "doc.md"
    p.write_text("短い文です。\n\n" + "い" * 110 + "。\n\n" + "う" * 125 + "。\n", encoding="utf-8")
    assert glossary.main(["--long", str(p)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert [ln[:2] for ln in out] == ["  ", "!!"] and "doc.md:3: 111 字" in out[0] and "doc.md:5: 126 字" in out[1]
    p.write_text("い" * 110 + "。\n", encoding="utf-8")
    assert glossary.main(["--long", str(p)]) == 0


def test_lessons_solutions_and_messages_stop_at_90_characters_other_pages_at_120():
    # issue 46: 91〜100 文字の文をすべて分けたので 100 から 90 へ（目安は 50〜80 文字）
    for where in ("notebooks/6_1_vmap.md:3", "solutions/6_7_cost_memory.md:9", "ch6/checks/s6_1/rbf_features.py:20",
                  "ch6/explain.py:5", "ch6/grading/batch.py:47"):
        assert sentences.limit_for(where) == 90, where
    for where in ("README.md:38", "docs/workshop.md:119", "site/teachers.md:61", "GLOSSARY.md:3"):
        assert sentences.limit_for(where) == 120, where


LENGTH_FILES = sentences.length_files(ROOT)
@pytest.mark.parametrize("path", LENGTH_FILES, ids=[p.relative_to(ROOT).as_posix() for p in LENGTH_FILES])
def test_no_learner_sentence_is_over_its_limit(path):
    over = [str(s) for s in sentences.sentences_in(path) if len(s.text) > sentences.limit_for(s.where)]
    assert not over, "\n".join(over)


