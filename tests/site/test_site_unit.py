"""サイトの部品の単体テスト（ブラウザも Sphinx のビルドも使わない。速い）。"""
from __future__ import annotations

import json
from pathlib import Path

import build_site
import course_site
from nbtemplate import colab_url

from tests.site import ROOT

PROTECTED = course_site.protected_words()


# ---------------------------------------------------------------- 見出しの id


def test_numbered_headings_get_their_number():
    ids = course_site.heading_ids([
        (1, "6.3b shard_map：デバイスごとのプログラムと集団通信"),
        (2, "5. 集団通信を 1 つずつ見る"),
        (3, "5.1 psum：全員の和を全員に（all-reduce）"),
        (3, "5.4 psum_scatter：和を取り、担当の部分だけを配る（reduce-scatter）"),
        (2, "10. まとめ"),
    ])
    assert ids == ["", "sec-5", "sec-5-1", "sec-5-4", "sec-10"]


def test_unnumbered_headings_use_words_under_their_parent():
    ids = course_site.heading_ids([
        (1, "6.2 pmap"),
        (2, "2. pmap の基本：1 つのデバイスに 1 要素"),
        (3, "落とし穴：データがデバイスより多い"),
        (3, "落とし穴：pmean を忘れる"),
        (3, "落とし穴：データがデバイスより多い"),
        (3, "のこりの話"),
        (2, "1 デバイスの学習と同じになるか"),  # 「1 」は節の番号ではない
        (2, "まとめ"),
    ])
    assert ids == [
        "", "sec-2", "sec-2-pitfall-device", "sec-2-pitfall-pmean", "sec-2-pitfall-device-2", "sec-2-h4",
        "sec-device", "sec-summary",
    ]


def test_heading_ids_survive_edits_elsewhere():
    """番号のある見出しの id は、前に見出しが増えても、本文が変わっても同じ。"""
    before = course_site.heading_ids([(1, "題"), (2, "5. 集団通信"), (3, "5.1 psum：全員の和")])
    after = course_site.heading_ids([(1, "題"), (2, "まえがき"), (2, "5. 集団通信を見る"), (3, "5.1 psum：和を全員に")])
    assert before[2] == after[3] == "sec-5-1"
    assert course_site.heading_ids([(2, "5.1 psum")]) == course_site.heading_ids([(2, "5.1 psum")])


def test_the_lesson_heading_5_1_psum_has_a_stable_id():
    nb = json.loads((ROOT / "notebooks" / "6_3b_shard_map.ipynb").read_text(encoding="utf-8"))
    text = "\n\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    headings = build_site.markdown_headings(text)
    ids = dict(zip((t for _, t in headings), course_site.heading_ids(headings)))
    psum = next(t for t in ids if t.startswith("5.1 psum"))
    assert ids[psum] == "sec-5-1"


def test_markdown_headings_skip_code_blocks():
    text = "# 題\n\n```bash\n# コメント\n```\n\n## 先生方へ：配布\n"
    assert build_site.markdown_headings(text) == [(1, "題"), (2, "先生方へ：配布")]


# ---------------------------------------------------------------- 検索の語


def test_query_keeps_course_words_whole():
    q = course_site.query_terms
    assert q("集団通信", PROTECTED) == ["集団通信"]
    assert q("シャーディング", PROTECTED) == ["シャーディング"]
    assert q("shard_map", PROTECTED) == ["shard_map"]
    assert q("psum_scatter", PROTECTED) == ["psum_scatter"]
    assert q("all-gather", PROTECTED) == ["all-gather"]
    assert q("落とし穴", PROTECTED) == ["落とし穴"]
    assert q("集団通信の前後", PROTECTED) == ["集団通信", "前後"]
    assert q("jax.lax.psum_scatter(x, 'i')", PROTECTED) == ["jax.lax.psum_scatter", "x", "i"]
    assert q("All-Gather", PROTECTED) == ["all-gather"]
    assert q("まとめ", PROTECTED) == ["まとめ"]  # ひらがなだけなら、そのまま


def test_every_glossary_word_is_one_query_term():
    for word in course_site.glossary_words():
        assert course_site.query_terms(word, PROTECTED) == [word.lower()], word


def test_index_has_whole_words_and_pieces():
    lang = course_site.CourseJapanese({})
    words = set(lang.split("lax.psum_scatter で集団通信を行い、all-gather でシャーディングを解きます"))
    assert {"lax.psum_scatter", "psum_scatter", "集団通信", "all-gather", "シャーディング"} <= words
    assert {"通信", "集団"} <= words  # 一部だけを検索しても見つかる
    assert "__COURSE_WORDS__" not in lang.js_splitter_code
    assert "集団通信" in lang.js_splitter_code


# ---------------------------------------------------------------- 作業フォルダ


def test_course_order():
    names = ["6_10_x.ipynb", "6_8b_b.ipynb", "6_3a_a.ipynb", "6_1_vmap.ipynb", "6_8a_a.ipynb", "6_3c_c.ipynb",
             "6_7_cost.ipynb", "6_3b_b.ipynb"]
    ordered = sorted((Path(n) for n in names), key=build_site.course_key)
    assert [p.name for p in ordered] == ["6_1_vmap.ipynb", "6_3a_a.ipynb", "6_3b_b.ipynb", "6_3c_c.ipynb",
                                         "6_7_cost.ipynb", "6_8a_a.ipynb", "6_8b_b.ipynb", "6_10_x.ipynb"]


def test_rewrite_links():
    pages = build_site.site_pages()
    fix = build_site.rewrite_links
    assert fix("[用語集](GLOSSARY.md)", "README.md", pages) == "[用語集](glossary.md)"
    assert fix("[6.1](notebooks/6_1_vmap.ipynb)", "README.md", pages) == "[6.1](notebooks/6_1_vmap.ipynb)"
    repo = build_site.repo_url()
    assert fix("[書き方](CONTRIBUTING.md)", "README.md", pages) == f"[書き方]({repo}/blob/main/CONTRIBUTING.md)"
    # 演習はサイトのページ（問題だけ）、解答はサイトに載らないので GitHub へ
    assert fix("[演習](../exercises/6_5_summary.ipynb)", "notebooks/6_5_summary.ipynb", pages) == \
        "[演習](../exercises/6_5_summary.ipynb)"
    assert fix("[解答](../solutions/6_5_summary.ipynb)", "notebooks/6_5_summary.ipynb", pages) == \
        f"[解答]({repo}/blob/main/solutions/6_5_summary.ipynb)"
    assert fix("[先頭](../README.md#x)", "notebooks/6_1_vmap.ipynb", pages) == "[先頭](../maintainers.md#x)"
    assert fix("[外](https://jax.dev/)", "README.md", pages) == "[外](https://jax.dev/)"
    # 出力の Markdown ではページの .html へ。「6.1 の 3 節」はその節へ（その id があるときだけ）
    assert fix("[6.1 の 3 節](6_1_vmap.ipynb)", "notebooks/6_5_summary.ipynb", pages, html=True) == \
        "[6.1 の 3 節](6_1_vmap.html#sec-3)"
    assert fix("[6.1 の 3 節](6_1_vmap.ipynb)", "notebooks/6_5_summary.ipynb", pages) == "[6.1 の 3 節](6_1_vmap.ipynb#sec-3)"
    assert fix("[6.1 の 99 節](6_1_vmap.ipynb)", "notebooks/6_5_summary.ipynb", pages) == "[6.1 の 99 節](6_1_vmap.ipynb)"


def test_stage_takes_only_the_notebooks_with_outputs(tmp_path):
    staged = build_site.stage(tmp_path)
    lessons = build_site.lessons()
    assert lessons, "notebooks/*.ipynb がありません"
    assert sorted(p.name for p in (tmp_path / "notebooks").iterdir()) == sorted(p.name for p in lessons)
    md_pages = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.md"))
    docs = [f"docs/{d.name}" for d in build_site.doc_pages()]
    assert md_pages == sorted(["glossary.md", "index.md", "maintainers.md", "teachers.md", *docs]), \
        "MyST の双子（notebooks/X.md）を写してはいけない"
    assert set(staged) >= {"index.md", "glossary.md", "teachers.md", "maintainers.md"}
    # 目次は講座の順
    index = (tmp_path / "index.md").read_text(encoding="utf-8")
    positions = [index.index(f"notebooks/{p.stem}\n") for p in lessons]
    assert positions == sorted(positions)
    # ダウンロード用はもとのノートブックそのもの
    for lesson in lessons:
        assert (tmp_path / "_files" / "notebooks" / lesson.name).read_bytes() == lesson.read_bytes()
    # 演習のページは exercises/ から（solutions/ は写さない）。目次では本編の後
    exercises = build_site.exercise_pages()
    assert exercises and sorted(p.name for p in (tmp_path / "exercises").iterdir()) == sorted(p.name for p in exercises)
    assert not (tmp_path / "solutions").exists()
    assert index.index(f"notebooks/{lessons[-1].stem}\n") < index.index(f"exercises/{exercises[0].stem}\n")


def test_staged_exercise_pages_have_links_and_no_solution(tmp_path):
    build_site.stage(tmp_path)
    for ex in build_site.exercise_pages():
        staged = (tmp_path / "exercises" / ex.name).read_text(encoding="utf-8")
        assert "BEGIN SOLUTION" not in staged
        nb = json.loads(staged)
        first = next(c["source"] for c in nb["cells"] if c["cell_type"] == "markdown")
        assert colab_url(f"exercises/{ex.name}") in first and f"(../notebooks/{ex.name})" in first
        assert "colab.research.google.com/assets/colab-badge.svg" not in first
        lesson = json.loads((tmp_path / "notebooks" / ex.name).read_text(encoding="utf-8"))
        assert f"(../exercises/{ex.name})" in next(c["source"] for c in lesson["cells"] if c["cell_type"] == "markdown")


def test_staged_pages_have_local_badges_and_lesson_links(tmp_path):
    build_site.stage(tmp_path)
    for path in [tmp_path / "index.md", *sorted((tmp_path / "notebooks").glob("*.ipynb"))]:
        assert "colab.research.google.com/assets/colab-badge.svg" not in path.read_text(encoding="utf-8"), path.name
    for lesson in build_site.lessons():
        nb = json.loads((tmp_path / "notebooks" / lesson.name).read_text(encoding="utf-8"))
        first = next(c["source"] for c in nb["cells"] if c["cell_type"] == "markdown")
        assert colab_url(f"notebooks/{lesson.name}") in first
        assert f"</_files/notebooks/{lesson.name}>" in first
        if (ROOT / "exercises" / lesson.name).exists():
            assert colab_url(f"exercises/{lesson.name}") in first
            assert f"</_files/exercises/{lesson.name}>" in first
        # 出力はそのまま（何も実行しない）。出力の Markdown の中のリンクの行き先だけがサイトのページに変わる
        original = json.loads(lesson.read_text(encoding="utf-8"))
        assert len(nb["cells"]) == len(original["cells"])
        for cell, orig in zip(nb["cells"], original["cells"]):
            for out, o in zip(cell.get("outputs", []), orig.get("outputs", [])):
                assert out.keys() == o.keys() and out.get("data", {}).keys() == o.get("data", {}).keys()
                for kind in out.get("data", {}):
                    if kind != "text/markdown":
                        assert out["data"][kind] == o["data"][kind]
                assert out.get("text") == o.get("text")
    teachers = (tmp_path / "teachers.md").read_text(encoding="utf-8")
    assert "{readme-teachers}" not in teachers and "<!-- exercises-table -->" not in teachers
    assert "maintainers.html#sec-teachers" in teachers


def test_identifier_pieces_are_indexed():
    pieces = course_site.identifier_pieces("6_3b_shard_map.ipynb")
    assert "shard_map" in pieces and "ipynb" in pieces
    assert {"make_jaxpr", "jaxpr", "jax"} <= set(course_site.identifier_pieces("jax.make_jaxpr"))
    assert {"all", "gather"} <= set(course_site.identifier_pieces("all-gather"))


# ---------------------------------------------------------------- 用語集・同義語・図・zip


def test_glossary_anchors_are_unique_and_english():
    anchors = [course_site.term_anchor(t) for t in course_site.glossary_terms()]
    assert len(anchors) == len(set(anchors))
    assert all(a.startswith("term-") and a.isascii() and len(a) > 5 for a in anchors)
    assert course_site.term_anchor({"ja": "集団通信", "en": "collective"}) == "term-collective"
    assert course_site.term_anchor({"ja": "テンソル並列（TP）", "en": "tensor parallelism (TP)"}) == "term-tensor-parallelism"


def test_glossary_page_lists_every_term_as_a_definition(tmp_path):
    text = build_site.glossary_page()
    assert "|---" not in text, "用語集は表にしない（狭い列に収まらない）"
    for term in course_site.glossary_terms():
        assert f"\n{term['ja']}" in text and term["definition"] in text, term["ja"]


def test_english_terms_are_search_synonyms():
    syn = course_site.synonyms()
    assert syn["集団通信"] == ["collective"]
    assert syn["ローカル"] == ["local"] and syn["グローバル"] == ["global"]
    assert "tp" in syn["テンソル並列（tp）"] or "tp" in syn.get("テンソル並列（TP）".lower(), [])
    lang = course_site.CourseJapanese({})
    words = set(lang.split("ここで集団通信を使います"))
    assert "collective" in words
    assert "__COURSE_SYNONYMS__" not in lang.js_splitter_code


def test_figure_alts_come_from_the_stored_text_form():
    lesson = ROOT / "notebooks" / "6_3b_shard_map.ipynb"
    alts = build_site.figure_alts(lesson)
    assert alts and all(a.startswith("図：") and "/" not in a.split("：")[0] for a in alts.values())
    # 出力の双子 X.outputs.txt（置き場所は tools/twins.py が決める）の図の行（[PNG 幅×高さ sha256:…] <図: …>）と同じ説明
    import twins

    twin = twins.outputs_path(lesson)
    described = {line.split("] ", 1)[1] for line in twin.read_text(encoding="utf-8").splitlines()
                 if line.startswith("[PNG ")}
    assert {a.removeprefix("図：") for a in alts.values()} == {d.removeprefix("<図: ").removesuffix(">") for d in described}


def test_archive_is_reproducible(tmp_path):
    import zipfile

    build_site.write_archive(tmp_path / "a.zip")
    build_site.write_archive(tmp_path / "b.zip")
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()
    names = zipfile.ZipFile(tmp_path / "a.zip").namelist()
    assert "ch6-notebooks/notebooks/6_1_vmap.ipynb" in names
    assert not any("solutions/" in n for n in names)


def test_lessons_list_has_titles_prerequisites_and_time():
    text = build_site.lessons_list()
    for lesson in build_site.lessons():
        assert build_site.lesson_title(lesson) in text
    assert text.count("目安") == len(build_site.lessons())
    assert "前提：" in text


# ---------------------------------------------------------------- 印刷された表・API 名・解答（issue 40）


def test_printed_table_is_cut_out_of_its_output():
    import ch6.show

    table = ch6.show.table([["データ並列", 204304, 1.0], ["FSDP（reshard）", 25552, 0.13]], header=("配置", "保存", "比"))
    note = "FSDP は保存を 0.13 倍にします。" * 3  # 表より長い文は表に入らない（折り返してよい）
    parts = course_site.printed_table_parts(f"1 デバイスあたりのバイト数\n{table}\n{note}\n")
    assert parts == [("1 デバイスあたりのバイト数", False), (table, True), (note, False)]
    assert course_site.printed_table_parts("a\n\nb") == [("a\n\nb", False)]
    assert course_site.printed_table_parts("----\n区切り") == [("----\n区切り", False)]  # 見出しのない線は表ではない
    two = f"{table}\n\n{table}"
    assert course_site.printed_table_parts(two) == [(table, True), (table, True)]


def test_api_names_map_to_the_reference():
    import jax_api

    base = jax_api.BASE
    assert jax_api.url("lax.psum") == base + "_autosummary/jax.lax.psum.html"
    assert jax_api.url("jnp.einsum") == base + "_autosummary/jax.numpy.einsum.html"
    assert jax_api.url("jax.shard_map") == base + "_autosummary/jax.shard_map.html"
    assert jax_api.url("jax.sharding.NamedSharding") == base + "jax.sharding.html#jax.sharding.NamedSharding"
    assert jax_api.url("jax.numpy") == base + "jax.numpy.html"
    assert jax_api.url("jax.Array.sharding").startswith(base + "_autosummary/jax.Array")  # 属性は、あればそのページ
    assert jax_api.url("jax.config.update") == base + "config_options.html"  # 項目のない名前は、それを説明する文書へ（GUIDES）
    assert jax_api.url("jax.lax.pcast") == base + "notebooks/shard_map.html"
    assert jax_api.url("jax.no_such_thing") is None
    assert jax_api.NAME.findall('jax.jit(jax.vmap(f)) と lax.psum(x, "i")') == ["jax.jit", "jax.vmap", "lax.psum"]
    assert jax_api.NAME.findall("docs.jax.dev、jaxpr.eqns、self.lax.psum") == []


def test_api_links_go_to_the_latest_docs_and_the_footer_says_so():
    """docs.jax.dev に版ごとの住所はない（jax-ml/jax#22709）：リンクは /en/latest/ で、フッタが固定した JAX と違い
    うることを言う。固定した版は requirements.txt から（conf.JAX_PIN）。"""
    import conf
    import jax_api

    assert jax_api.BASE == "https://docs.jax.dev/en/latest/"
    pin = next(ln.split("==")[1].strip() for ln in (ROOT / "requirements.txt").read_text().splitlines()
               if ln.startswith("jax=="))
    assert conf.JAX_PIN == pin
    note = jax_api.footer_note(pin)
    assert "最新の文書" in note and f"JAX {pin}" in note and jax_api.BASE in note
    assert note in conf.html_theme_options["extra_footer"]


def test_api_table_is_read_from_the_jax_docs(tmp_path):
    import jax_api

    (tmp_path / "jax.lax.rst").write_text(
        "``jax.lax`` module\n==================\n\n.. automodule:: jax.lax\n\n.. autosummary::\n  :toctree: _autosummary\n\n"
        "    psum\n    ppermute\n\nText\n", encoding="utf-8")
    (tmp_path / "jax.sharding.rst").write_text(
        ".. currentmodule:: jax.sharding\n\n.. autoclass:: NamedSharding\n   :members:\n", encoding="utf-8")
    table = jax_api.parse_docs(tmp_path)
    assert table == {"jax.lax": "jax.lax.html", "jax.lax.psum": "", "jax.lax.ppermute": "",
                     "jax.sharding.NamedSharding": "jax.sharding.html#jax.sharding.NamedSharding"}


def test_every_exercise_has_a_solution_block_and_its_function():
    from ch6.grading import exercises as grading_exercises

    data = json.loads(grading_exercises.DATA.read_text(encoding="utf-8"))["notebooks"]
    blocks = build_site.solution_blocks()
    assert len(blocks) == sum(len(nb["exercises"]) for nb in data.values())
    assert all(b["function"] for b in blocks)


def test_solution_leaks_are_found(tmp_path):
    blocks = build_site.solution_blocks()
    block = next(b for b in blocks if b["lines"])
    stem = block["notebook"].removesuffix(".ipynb")
    (tmp_path / "exercises").mkdir()
    page = tmp_path / "exercises" / f"{stem}.html"
    stub = f"<pre>def {block['function']}(x):\n    # TODO\n    raise NotImplementedError\n</pre>"
    page.write_text(stub, encoding="utf-8")
    assert not [p for p in build_site.solution_leaks(tmp_path, [block])]
    page.write_text(f"<pre>def {block['function']}(x):\n    {block['lines'][0]}\n</pre>", encoding="utf-8")
    found = build_site.solution_leaks(tmp_path, [block])
    assert any(block["lines"][0] in p for p in found) and any("NotImplementedError" in p for p in found), found
