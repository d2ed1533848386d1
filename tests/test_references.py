"""章末の参考文献: どのノートブックも同じ書式で、本文の（参考文献 N）はある番号を指す（issue 39）。

書式（CONTRIBUTING.md の「Style」）: 番号付きの一覧で 1 行に 1 項目、番号は 1 から飛ばずに続き、
``N. 著者または組織「原語の題」（日本語の補足、任意）、媒体・年（任意）：<https://…>``。
本文は項目を（参考文献 N）で引き（どの項目も少なくとも 1 度）、著者と年（「Rajbhandari ほか 2019」）では引かない。
マークダウンの双子（.md）だけを読むので速い。
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEADING = "## 参考文献"
# 著者（「 を含まない）、「題」、そのあとは自由（補足・媒体・年）、最後に ：<https://…>
ENTRY = re.compile(r"(?P<n>[1-9]\d*)\. (?P<author>[^「」\s][^「」]*?)「(?P<title>[^「」]+)」.*：<https://[^<>\s]+>")
# （参考文献 4）（参考文献 1、2）（参考文献 2〜8）（…、参考文献 9）
CITATION = re.compile(r"参考文献\s*(\d+(?:\s*[、,〜~-]\s*\d+)*)")
# 番号のない引き方: （参考文献）（…。参考文献）「参考文献の Flax の文書」「参考文献の 2〜8」
UNNUMBERED = re.compile(r"参考文献[）)]|参考文献の")
# 本文に著者と年を書く引き方: 「（Rajbhandari ほか 2019）」「Austin ほか 2025」「Milakov と Gimelshein 2018）」
# 「Llama Team 2024）」「Dao et al. 2022」。出典は（参考文献 N）で引き、著者と年は節の項目にだけ書く
AUTHOR_YEAR = re.compile(r"ほか[\s、,]*(?:19|20)\d\d|et al\.?,?\s*\(?(?:19|20)\d\d"
                         r"|[A-Z][A-Za-z\-]+(?: (?:and|&|と) [A-Z][A-Za-z\-]+)?,? (?:19|20)\d\d[a-z]?[）)、]")


def notebooks_with_references() -> list[Path]:
    return [p for d in ("notebooks", "solutions") for p in sorted((ROOT / d).glob("*.md"))
            if HEADING in p.read_text(encoding="utf-8").splitlines()]


def split(text: str) -> tuple[str, list[str]]:
    """(本文, 参考文献の節の行)。節はファイルの終わりか次の見出しまで。"""
    lines = text.splitlines()
    start = lines.index(HEADING)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("#")), len(lines))
    return "\n".join(lines[:start] + lines[end:]), lines[start + 1:end]


def entry_problems(section: list[str]) -> list[str]:
    """節の空でない各行が書式に合い、番号が 1 から続くか。合わない行の説明の一覧（空なら合格）。"""
    problems = []
    entries = [ln for ln in section if ln.strip()]
    if not entries:
        problems.append("the section has no entries")
    for k, line in enumerate(entries, 1):
        m = ENTRY.fullmatch(line)
        if not m:
            problems.append(f"not `N. 著者「題」…：<https://…>`: {line}")
        elif int(m["n"]) != k:
            problems.append(f"numbered {m['n']}, expected {k}: {line}")
    return problems


def cited_numbers(body: str) -> list[int]:
    """本文が引く番号（「2〜8」は 2 から 8 のすべて）。"""
    found = []
    for m in CITATION.finditer(body):
        for part in re.split(r"\s*[、,]\s*", m.group(1)):
            lo, hi = (re.split(r"\s*[〜~-]\s*", part) * 2)[:2]
            found += range(int(lo), int(hi) + 1)
    return found


def citation_problems(text: str) -> list[str]:
    """本文の（参考文献 N）が節にある番号を指すか、番号のない引き方や著者と年の引き方がないか、
    節のどの項目も本文が少なくとも 1 度引いているか（「2〜8」の範囲も数える）。"""
    if HEADING not in text.splitlines():
        body = text
        problems = [f"cites 参考文献 {n} but has no {HEADING} section" for n in cited_numbers(text)]
    else:
        body, section = split(text)
        count = len([ln for ln in section if ln.strip()])
        cited = cited_numbers(body)
        problems = [f"（参考文献 {n}） but the list has {count} entries" for n in cited if not 1 <= n <= count]
        problems += [f"entry {n} is never cited as （参考文献 {n}）" for n in range(1, count + 1) if n not in cited]
    problems += [f"a citation without a number: …{body[max(0, m.start() - 20):m.end() + 10]}…"
                 for m in UNNUMBERED.finditer(body)]
    problems += [f"an author-year citation in the text (cite （参考文献 N）): …{body[max(0, m.start() - 20):m.end() + 5]}…"
                 for m in AUTHOR_YEAR.finditer(body)]
    return problems


WITH_REFERENCES = notebooks_with_references()


def test_the_lessons_have_reference_sections():
    names = {p.relative_to(ROOT).as_posix() for p in WITH_REFERENCES}
    assert len([n for n in names if n.startswith("notebooks/")]) == len(list((ROOT / "notebooks").glob("*.md")))
    assert {"solutions/6_8b_sequence_expert.md", "solutions/6_9b_checkpoint_resume.md"} <= names


@pytest.mark.parametrize("path", WITH_REFERENCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_entry_has_the_one_format(path):
    _, section = split(path.read_text(encoding="utf-8"))
    assert entry_problems(section) == []


@pytest.mark.parametrize("path", [p for d in ("notebooks", "solutions") for p in sorted((ROOT / d).glob("*.md"))],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_citation_points_at_an_entry(path):
    assert citation_problems(path.read_text(encoding="utf-8")) == []


# ---- the test itself catches the defects of issue 39

GOOD = """# 題

本文です（参考文献 2）。範囲も引けます（参考文献 1〜2）。末尾の参考文献に挙げます。

## 参考文献

1. JAX の文書「Automatic vectorization」（vmap による自動ベクトル化）：<https://docs.jax.dev/en/latest/automatic-vectorization.html>
2. Huang ほか「GPipe: Efficient Training」、2018、arXiv:1811.06965：<https://arxiv.org/abs/1811.06965>
"""


def test_a_good_notebook_passes():
    body, section = split(GOOD)
    assert entry_problems(section) == [] and citation_problems(GOOD) == []
    assert cited_numbers(body) == [2, 1, 2]


@pytest.mark.parametrize("bad", [
    "- JAX の文書「Automatic vectorization」：<https://docs.jax.dev/>",                     # bullets
    "1. 「Automatic vectorization」：https://docs.jax.dev/",                                # bare URL, no author
    "1. JAX, \"Automatic vectorization\", https://docs.jax.dev/",                          # "" and commas
    "1. [Automatic vectorization](https://docs.jax.dev/)：vmap",                           # link text
    "1. Huang ほか「GPipe」、arXiv:1811.06965",                                             # no URL
    "JAX の公式ガイド（英語）です。",                                                        # an intro line
])
def test_an_entry_in_another_format_fails(bad):
    assert entry_problems([bad]) != []


def test_a_gap_in_the_numbers_fails():
    first, second = [ln for ln in split(GOOD)[1] if ln]
    assert entry_problems([first, second.replace("2. ", "3. ", 1)]) != []
    assert entry_problems([second, first]) != []


@pytest.mark.parametrize("old, new", [
    ("（参考文献 2）", "（参考文献 3）"),          # a number past the list
    ("（参考文献 1〜2）", "（参考文献 1〜4）"),     # a range past the list
    ("（参考文献 2）", "（参考文献）"),            # no number
    ("（参考文献 2）", "（参考文献の GPipe）"),     # a name instead of the number
])
def test_a_wrong_citation_fails(old, new):
    assert citation_problems(GOOD.replace(old, new)) != []


@pytest.mark.parametrize("text", [
    "ZeRO（Rajbhandari ほか 2019）の 3 つの段",
    "スケーリングブック（\"How to Scale Your Model\"、Austin ほか 2025）",
    "GShard（Lepikhin ほか 2020、参考文献 2）",
    "オンラインソフトマックス（online softmax、Milakov と Gimelshein 2018）",
    "（Llama 3 の学習、Llama Team 2024）",
    "FlashAttention (Dao et al. 2022)",
    "Yu ほかの Orca（OSDI 2022、参考文献 2）",
])
def test_an_author_year_citation_fails(text):
    assert citation_problems(GOOD.replace("本文です（参考文献 2）。", f"本文です{text}（参考文献 2）。")) != []


def test_an_entry_nobody_cites_fails():
    assert citation_problems(GOOD.replace("範囲も引けます（参考文献 1〜2）。", "")) != []   # 1 はどこからも引かれない
    assert citation_problems(GOOD.replace("本文です（参考文献 2）。", "")) == []            # 2 は範囲 1〜2 で引かれる
    assert citation_problems("# 題\n\nJAX 0.10.2 と TPU v5e、2025 年に測りました。\n") == []  # 版と年だけなら引用ではない


def test_a_citation_without_a_section_fails():
    assert citation_problems("# 題\n\n本文です（参考文献 1）。\n") != []
