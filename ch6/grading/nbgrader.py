"""nbgrader 版: ``solutions/`` から nbgrader の ``source/<課題>/`` を作る（生成物です。手で直さないでください）。

使い方::

    python -m ch6.grading.nbgrader コース/                          # 1 冊 = 1 課題（課題名はノートブック名）
    python -m ch6.grading.nbgrader コース/ --assignment ps1 solutions/6_1_vmap.ipynb solutions/6_3b_shard_map.ipynb
    python -m ch6.grading.nbgrader コース/ --points 6.3b-5=2 --default-points 1
    cd コース && nbgrader generate_assignment ps1                   # 配布版（release/ps1/）ができる

作るもの:

- 解答のセル（``### BEGIN SOLUTION`` のあるセル）に nbgrader のメタデータ（solution: true）。
  ``grade_id`` は演習の番号から（``6.3b-2`` -> ``6_3b-2``。nbgrader が許すのは英数字と ``_`` ``-`` だけ）。
- 各演習の解答のセルのすぐ後に、編集できない採点のセル（grade: true、locked: true、点数つき、既定 1 点）::

      ch6_result = __import__("ch6.grading.nbgrader", fromlist=["grade"]).grade("6.3b-2", "ring_all_gather")
      assert ch6_result.ok, ch6_result.line

  :func:`grade` は学習者のセルが残した ``ch6`` を使わず、インストールされている ``ch6`` を読み込み直して採点します
  （ch6-grade と同じ）。``ch6.run_check`` などが差し替えられていれば ⚠️ で 0 点、正解なら ✅ の 1 行を表示し、
  正解でなければ講座の 1 行（❌ や ⏳ とヒント）が AssertionError のメッセージとして出ます。
  解答のセルの ``ch6.check(...)`` は残します（演習版と同じく、セルを実行するとすぐ 1 行が出ます。
  点数は採点のセルだけが決めるので、学習者が書き換えても点数は変わりません）。
- マークダウンの ``<!-- BEGIN SOLUTION -->`` 〜 ``<!-- END SOLUTION -->``（解答版だけに見せる文）は、
  nbgrader の解答の印 "BEGIN SOLUTION" を含むので、そのままでは nbgrader が解答欄とみなします。ここで移します:
  演習の後の解説は、その演習の採点のセルの ``### BEGIN HIDDEN TESTS`` 〜 ``### END HIDDEN TESTS`` に
  コメントとして入れます（nbgrader が配布版から消し、採点後のノートブックとフィードバックに戻します）。
  最初の演習より前のもの（「このノートブックは解答例つきです（solutions/）」の注記）は、solutions/ についての
  文なので入れません。
- Colab のバッジは ``exercises/`` の演習版へ向けます。
- 最初のコードセル（セットアップ）は編集できないセル（locked）にします。
- ``コース/nbgrader_config.py`` がなければ作ります（スタブを演習版と同じ ``# TODO`` に、そして :func:`configure`:
  セルの制限時間を講座の CELL_TIMEOUT 秒に、autograde で消された採点のセルや exercises/ から作った提出物の採点のセルを
  戻し（RestoreGradeCells）、実行の後に採点のセルを外から確かめ（GuardGrades: 採点のしくみに触れるコードの後は 0 点）、
  壊れた提出物は理由つきで 0 点に（Ch6Exporter）、nbgrader validate は失敗で終了コード 1）。課題のフォルダにも
  同じ設定を置くので、配布版と一緒に配られ、そのフォルダの nbgrader validate にも効きます。
- ``python -m ch6.grading.nbgrader validate ノートブック.ipynb``: nbgrader を入れずに提出前に確かめる（失敗なら終了コード 1）。

課題の分け方の既定は 1 冊 = 1 課題です。``--assignment 名前`` なら、渡したノートブックをすべてその課題に入れます。
"""
from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

# nbgrader 版の採点のセルの形（execute.py も使うので cells.py に。ここからも今までどおりの名前で使えます）
from .cells import (  # noqa: F401  (SCHEMA_VERSION, TEST_CALL: ch6.grading.nbgrader の名前として残す)
    MODULE,
    RESULT_NAME,
    SCHEMA_VERSION,
    TEST_CALL,
    VALID_ID,
    grade_id,
    is_test_cell,
    nbgrader_meta,
    nbmeta,
    test_exercise,
    test_source,
)
from .exercises import check_calls

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
BEGIN_CODE = "### BEGIN SOLUTION"
HIDDEN = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
# nbgrader が印とみなす文字列（採点のセル以外に残ってはいけない）
NBGRADER_MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS",
                    "BEGIN MARK SCHEME", "END MARK SCHEME")
CONFIG_NAME = "nbgrader_config.py"
CELL_TIMEOUT = 300  # 講座の 1 セルの制限時間（秒）: autograde・validate のどちらでも


class EditionError(ValueError):
    """nbgrader 版を作れない理由（1 文）。"""


def _tools():
    """リポジトリの tools/（演習版の作り方と Colab バッジ）。チェックアウトでだけ使えます。"""
    tools = ROOT / "tools"
    if not (tools / "make_exercises.py").exists():
        raise EditionError("tools/make_exercises.py が見つかりません。講座のリポジトリのチェックアウトで実行してください。")
    if str(tools) not in sys.path:
        sys.path.insert(0, str(tools))
    import make_exercises
    import nbtemplate

    return make_exercises, nbtemplate


def hidden_note(text: str) -> str:
    """解答版だけの解説を、採点のセルの隠しテストの範囲（コメント）にする。"""
    lines = ["# 解説（解答版だけの文。配布版にはなく、採点後のノートブックとフィードバックに出ます）"]
    lines += [f"# {ln}".rstrip() for ln in text.strip("\n").splitlines()]
    return "\n".join([HIDDEN[0], *lines, HIDDEN[1]])


def to_source(solution, name: str, points: dict[str, float] | None = None, default_points: float = 1):
    """解答つきノートブック -> nbgrader の source 版（新しいノートブック。出力なし）。"""
    make_exercises, nbtemplate = _tools()
    points = dict(points or {})
    nb = copy.deepcopy(solution)
    block = re.compile(make_exercises.MD_BLOCK.pattern, re.S)
    out, tests, seen_ids = [], {}, []
    first_code = True
    last_exercise: str | None = None
    for i, cell in enumerate(nb.cells):
        cell.metadata.pop("nbgrader", None)
        where = f"{name} のセル {i + 1}"
        if cell.cell_type == "markdown":
            for m in block.finditer(cell.source):
                inner = m.group(0).split("-->", 1)[1].rsplit("<!--", 1)[0]
                if last_exercise is not None:
                    tests[last_exercise].source += "\n" + hidden_note(inner)
            cell.source = block.sub("", cell.source)
            cell.source = nbtemplate.BADGE.sub(lambda _: nbtemplate.badge(f"exercises/{name}.ipynb"), cell.source)
            out.append(cell)
            continue
        if cell.cell_type != "code":
            out.append(cell)
            continue
        cell.outputs, cell.execution_count = [], None
        calls = check_calls(cell.source)
        if BEGIN_CODE in cell.source:
            try:
                make_exercises.strip_code(cell.source, where)  # 印の誤りは演習版と同じ言葉で断る
            except make_exercises.MarkerError as err:
                raise EditionError(str(err)) from None
            key = calls[0][0] if calls else re.search(r"def\s+(\w+)", cell.source).group(1)
            cell.metadata["nbgrader"] = nbgrader_meta(grade_id(key), solution=True)
        elif first_code:
            cell.metadata["nbgrader"] = nbgrader_meta("setup", locked=True)
        first_code = False
        out.append(cell)
        for eid, fn, _ in calls:
            if eid in tests:
                continue
            test = copy.deepcopy(cell)
            test.id = grade_id(eid, "test-")
            test.source = test_source(eid, fn)
            test.metadata = {"nbgrader": nbgrader_meta(grade_id(eid, "test_"), grade=True, locked=True,
                                                       points=float(points.pop(eid, default_points)))}
            tests[eid] = test
            seen_ids.append(eid)
            last_exercise = eid
            out.append(test)
    if points:
        raise EditionError(f"{name} にない演習の点数が指定されています: {', '.join(sorted(points))}")
    nb.cells = out
    _check(nb, name)
    return nb


def _check(nb, name: str) -> None:
    """nbgrader が印とみなす文字列が、許された種類のセルの外に残っていないこと。変数名が重ならないこと。"""
    for k, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        allowed = (("BEGIN SOLUTION", "END SOLUTION") if meta.get("solution") else ()) + \
                  (HIDDEN if meta.get("grade") else ())
        for marker in NBGRADER_MARKERS:
            if marker in cell.source and not any(marker in a for a in allowed):
                raise EditionError(f"{name} のセル {k + 1}: nbgrader の印「{marker}」が残っています。")
        if not meta.get("grade") and re.search(rf"\b{RESULT_NAME}\b", cell.source):
            raise EditionError(f"{name} のセル {k + 1}: 名前 {RESULT_NAME} は採点のセルが使います。")


def course_config() -> str:
    make_exercises, _ = _tools()
    stub = f"{make_exercises.TODO}\nraise NotImplementedError"
    return (
        "# python -m ch6.grading.nbgrader が作りました（ch6 の nbgrader 版）\n"
        "c = get_config()  # noqa: F821\n"
        "# 配布版のスタブを講座の演習版（exercises/）と同じにする\n"
        f"c.ClearSolutions.code_stub = {{'python': {stub!r}}}\n"
        f"# 講座の採点: 1 セルの制限時間 {CELL_TIMEOUT} 秒（nbgrader の既定は 30 秒）、採点のセルを戻す・外から確かめる、\n"
        "# 読めない提出物は理由つきで 0 点、validate は失敗で終了コード 1（ch6.grading.nbgrader.configure）\n"
        f"from {MODULE} import configure\n"
        "configure(c)\n"
    )


ASSIGNMENT_CONFIG = (
    "# python -m ch6.grading.nbgrader が作りました: 配布版と一緒に配られ、このフォルダで nbgrader validate を\n"
    f"# 実行したときにも講座の制限時間（1 セル {CELL_TIMEOUT} 秒）と確かめ方を使います。講座のパッケージ ch6 が\n"
    "# 入っていなければ何もしません（そのときは python -m ch6.grading.nbgrader validate を使ってください）。\n"
    "c = get_config()  # noqa: F821\n"
    "try:\n"
    f"    from {MODULE} import configure\n"
    "except ImportError:\n"
    "    pass\n"
    "else:\n"
    "    configure(c)\n"
)


def write_edition(out: Path, notebooks: list[Path], assignment: str | None = None,
                  points: dict[str, float] | None = None, default_points: float = 1) -> list[tuple[Path, int, float]]:
    """out/source/<課題>/<名前>.ipynb を書き、(パス, 演習の数, 満点) の並びを返す。"""
    import nbformat

    points = dict(points or {})
    written = []
    for path in notebooks:
        name = Path(path).stem
        nb = nbformat.read(str(path), as_version=4)
        ids = {eid for c in nb.cells if c.cell_type == "code" for eid, _, _ in check_calls(c.source)}
        mine = {k: v for k, v in points.items() if k in ids}
        for k in mine:
            points.pop(k)
        src = to_source(nb, name, mine, default_points)
        target = out / "source" / (assignment or name) / f"{name}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.validate(src)
        target.write_text(nbformat.writes(src) + "\n", encoding="utf-8")
        grades = [c.metadata["nbgrader"]["points"] for c in src.cells if c.metadata.get("nbgrader", {}).get("grade")]
        written.append((target, len(grades), sum(grades)))
    if points:
        raise EditionError(f"どのノートブックにもない演習の点数が指定されています: {', '.join(sorted(points))}")
    for folder in sorted({t.parent for t, _, _ in written}):
        (folder / CONFIG_NAME).write_text(ASSIGNMENT_CONFIG, encoding="utf-8")
    config = out / CONFIG_NAME
    if not config.exists():
        config.write_text(course_config(), encoding="utf-8")
    return written


# ------------------------------------------------------------------------------ 学習者のカーネルの中（採点のセル）

# 学習者の名前空間にあってはいけない名前（採点のセルが名前で引く組み込みを隠す）
SHADOWED = ("__import__",)


class Graded:
    """採点のセル 1 つの結果: ok と講座の 1 行（line）。"""

    def __init__(self, ok: bool, line: str):
        self.ok, self.line = ok, line

    def __repr__(self) -> str:  # pragma: no cover - 表示用
        return self.line


def _same_function(a, b) -> bool:
    """a が講座の関数 b と同じもの（同じファイルの同じコード）か。学習者の lambda や別の関数なら False。"""
    ca, cb = getattr(a, "__code__", None), getattr(b, "__code__", None)
    return (ca is not None and cb is not None and ca.co_code == cb.co_code
            and ca.co_filename == cb.co_filename and ca.co_qualname == cb.co_qualname)


def _replaced(user_ns: dict, old_modules: dict, fresh_core, fresh_pkg) -> list[str]:
    """学習者のセルが差し替えた採点のしくみ（講座のインストールされた ch6 と比べて）。"""
    import builtins
    import types

    out = [name for name in SHADOWED if name in user_ns]
    out += [f"builtins.{name}" for name in ("__import__", "print", "getattr", "globals")
            if type(getattr(builtins, name, None)).__name__ != "builtin_function_or_method"]
    pkg = user_ns.get("ch6")
    if pkg is not None:
        if not isinstance(pkg, types.ModuleType) or getattr(pkg, "__file__", None) != fresh_pkg.__file__:
            out.append("ch6")
        else:
            out += [f"ch6.{n}" for n in ("run_check", "check")
                    if not _same_function(getattr(pkg, n, None), getattr(fresh_core, n))]
    out += [n for n in ("run_check", "check")
            if n in user_ns and not _same_function(user_ns[n], getattr(fresh_core, n))]
    core = old_modules.get("ch6._core")
    if core is not None:
        out += [f"ch6._core.{n}" for n in ("run_check", "check", "registry")
                if not _same_function(getattr(core, n, None), getattr(fresh_core, n))]
    return list(dict.fromkeys(out))


def grade(exercise_id: str, function: str) -> Graded:
    """採点のセルから呼ぶ: 講座に **インストールされている** チェックで、学習者の関数 function を採点する。

    学習者のセルが残した ``ch6`` は使いません。``ch6`` を ``sys.modules`` から消してインストール先から
    読み込み直し（ch6-grade と同じ）、その演習のチェックだけを読み込んで実行します。学習者のセルが
    ``ch6.run_check`` や ``ch6.check`` を書き換えた、同じ名前の関数を定義した、``ch6`` を差し替えたときは、
    結果を ⚠️ にして（0 点）何が差し替えられたかを書きます。正解なら ✅ の 1 行を表示します。"""
    import importlib
    import sys

    user_ns = sys._getframe(1).f_globals
    try:
        old = {k: sys.modules.pop(k) for k in [m for m in sys.modules if m == "ch6" or m.startswith("ch6.")]}
        importlib.invalidate_caches()
        pkg = importlib.import_module("ch6")
        core = importlib.import_module("ch6._core")
        replaced = _replaced(user_ns, old, core, pkg)
        if replaced:
            return Graded(False, core.Result(exercise_id, core.Status.INTERNAL, (
                f"採点のしくみが学習者のセルで差し替えられています（{', '.join(replaced)}）。"
                "この演習は 0 点です。差し替えるコードを消して、もう一度提出してください。")).line)
        module = "s" + exercise_id.split("-")[0].replace(".", "_")
        try:
            importlib.import_module(f"ch6.checks.{module}")
        except Exception as exc:
            return Graded(False, core.Result(exercise_id, core.Status.INTERNAL,
                                             f"チェックを読み込めませんでした（{module}: {type(exc).__name__}）。").line)
        core._LOADED = True  # ほかの節のチェックは読み込まない（採点のセルごとに速く）
        if function not in user_ns:
            return Graded(False, core.Result(exercise_id, core.Status.MISSING, (
                f"{function} が定義されていません（その関数のセルがエラーで止まったか、消されています）。")).line)
        result, noise = _quietly(core.run_check, exercise_id, user_ns[function])
    except Exception as exc:  # 採点のしくみ自身の問題: 学習者にはトレースバックを見せない
        return Graded(False, f"⚠️ 採点できません [{exercise_id}] 採点のセルの内部の問題です（解答のせいではありません）: "
                             f"{type(exc).__name__}")
    if noise:  # nbgrader は stderr に何か書かれた採点のセルを 0 点にするので、警告は stdout に見せる
        print(f"ℹ️ [{exercise_id}] チェックの実行中に出た警告（点数には関係しません）: {noise}")
    if result.ok:
        print(result.line)
    return Graded(result.ok, result.line)


def _quietly(run, *args):
    """run(*args) の間の Python の警告と sys.stderr への書き込みを集め、(結果, 1 行にまとめた文) を返す。
    学習者の正しいコードが出す警告（JAX の非推奨など）で、nbgrader が採点のセルを 0 点にしないため。"""
    import contextlib
    import io
    import warnings

    err = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stderr(err):
        warnings.simplefilter("default")
        result = run(*args)
    lines = [f"{w.category.__name__}: {w.message}" for w in caught] + err.getvalue().strip().splitlines()
    return result, " / ".join(dict.fromkeys(ln.strip() for ln in lines if ln.strip()))[:500]


# ------------------------------------------------------------------------------ 採点する側（nbgrader の中と validate）

# 学習者のセルにあれば、その後の採点のセルを 0 点にするコード（採点のしくみ・表示・エラーの報告に触れる）
GRADE_TAMPER = [
    ("showtraceback", r"\bshowtraceback\b"),
    ("__import__", r"__import__"),
    ("sys.modules", r"\bsys\.modules\b"),
    ("sys._getframe", r"\b_getframe\b"),
    ("sys.stdout", r"\bsys\.(stdout|stderr)\s*="),
]
UNREADABLE_KEY = "ch6_unreadable"  # 読めない提出物の代わりに採点するノートブックの印（notebook の metadata）


def course_notebook(name: str):
    """講座の演習ノートブック（exercises.json）の Assignment。nbgrader のノートブック名はファイル名そのもの。"""
    from .exercises import packaged

    return packaged().get(name)


def restore_grade_cells(nb, name: str, points: dict[str, float] | None = None) -> tuple[list[str], bool]:
    """なくなった採点のセルを、その演習の解答のセルの後に戻す。(戻した演習の番号, もともと 1 つもなかったか)。

    exercises/ や solutions/ から作った提出物（nbgrader のメタデータがない）も、採点のセルを消した提出物も、
    配布版と同じ採点のセルで採点できるようにします。points は戻す演習（grade_id）の点数、None なら講座の全演習を 1 点で。
    セットアップのセルの印がなければ最初のコードセルに付けます（nbgrader が配布版の中身に戻します）。"""
    import nbformat

    course = course_notebook(name)
    if course is None:
        return [], False
    present = {test_exercise(c) for c in nb.cells} - {None}
    had_none = not present
    wanted = [e for e in course.ids if points is None or grade_id(e, "test_") in points]
    if not any(nbmeta(c).get("grade_id") == "setup" for c in nb.cells) and (points is None or "setup" in points):
        first = next((c for c in nb.cells if c.cell_type == "code"), None)
        if first is not None and not nbmeta(first):
            first.metadata["nbgrader"] = nbgrader_meta("setup", locked=True)
    restored = []
    for eid in wanted:
        if eid in present:
            continue
        fn = course.titles[eid]
        anchor = None
        for k, c in enumerate(nb.cells):
            if c.cell_type != "code":
                continue
            if nbmeta(c).get("grade_id") == grade_id(eid) or any(e == eid for e, _, _ in check_calls(c.source)):
                anchor = k
                break
            if anchor is None and re.search(rf"^\s*def\s+{fn}\b", c.source, re.M):
                anchor = k
        cell = nbformat.v4.new_code_cell(test_source(eid, fn))
        ids = {c.get("id") for c in nb.cells}
        if grade_id(eid, "test-") not in ids:
            cell.id = grade_id(eid, "test-")
        cell.metadata["nbgrader"] = nbgrader_meta(grade_id(eid, "test_"), grade=True, locked=True,
                                                  points=float((points or {}).get(grade_id(eid, "test_"), 1.0)))
        nb.cells.insert(len(nb.cells) if anchor is None else anchor + 1, cell)
        restored.append(eid)
    return restored, had_none


def tampering(source: str) -> str | None:
    """学習者のセルのコードが採点のしくみに触れていれば、その名前（ch6-grade の手がかり + 採点のセルの仕組み）。"""
    from .tamper import REPLACES_CH6, TAMPER

    m = REPLACES_CH6.search(source)
    if m:
        return m.group(0).strip()
    return next((name for name, pattern in TAMPER + GRADE_TAMPER if re.search(pattern, source, re.M)), None)


def _error(exercise_id: str, text: str):
    import nbformat

    line = f"⚠️ 採点できません [{exercise_id}] {text}"
    return nbformat.v4.new_output("error", ename="Ch6GradeError", evalue=line, traceback=[line])


def _has_error(cell) -> bool:
    return any(o.get("output_type") == "error" for o in cell.get("outputs", []))


def _passed_line(cell, exercise_id: str) -> bool:
    text = "".join("".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("output_type") == "stream")
    from .._core import Status

    return any(ln.startswith(f"{Status.PASS.label} [{exercise_id}] ") for ln in text.splitlines())


def guard(nb, name: str) -> list[str]:
    """実行した後の採点のセルを、ノートブックの外から確かめる（nbgrader の点数はエラーの出力の有無で決まる）。
    採点する人への知らせ（1 行ずつ）を返す。

    - 読めなかった提出物の代わりのノートブック: すべての採点のセルに理由のエラー（0 点）。
    - 学習者のセル（配った中身と違うコードセル）が採点のしくみに触れていれば、その後の採点のセルに
      エラー（0 点。先生が確かめて、問題なければ formgrader で点数を直せます）。
    - エラーがないのに ✅ の 1 行を表示していない採点のセル（表示やエラーの報告が止められた）: エラー（0 点）。"""
    from .exercises import describe_cell

    said = []
    unreadable = (nb.get("metadata") or {}).get(UNREADABLE_KEY)
    course = course_notebook(name)
    given = {c.hash for c in course.cells or []} if course else set()
    first = None
    for k, c in enumerate(nb.cells):
        meta = nbmeta(c)
        if c.cell_type != "code" or meta.get("locked") or meta.get("grade") or describe_cell(c).hash in given:
            continue
        what = tampering(c.source)
        if what:
            first = (k, what)
            said.append(f"{name}: セル {k + 1} のコードが採点のしくみに触れています（{what}）。"
                        "その後の採点のセルを 0 点にしました。")
            break
    for k, c in enumerate(nb.cells):
        eid = test_exercise(c)
        if eid is None:
            continue
        if unreadable:
            c.outputs = [_error(eid, unreadable)]
        elif first is not None and k > first[0]:
            c.outputs.append(_error(eid, (
                f"セル {first[0] + 1} のコードが採点のしくみに触れています（{first[1]}）。この演習は 0 点にしました。"
                "そのコードを消して、もう一度提出してください。")))
        elif not _has_error(c) and not _passed_line(c, eid):
            c.outputs.append(_error(eid, "採点のセルが結果の 1 行を表示しませんでした"
                                         "（表示やエラーの報告のしくみが書き換えられたかもしれません）。0 点にしました。"))
    if unreadable:
        said.append(f"{name}: {unreadable}")
    return said


def regrade(nb, name: str, timeout: int = CELL_TIMEOUT) -> list[str]:
    """ch6-grade と同じ監視つきの採点（:mod:`ch6.grading.guard`）でこの提出物を新しいカーネルで採点し直し、
    採点のセルに反映する。採点する人への知らせ（1 行ずつ）を返す。

    nbgrader の点数は、学習者のカーネルで実行した採点のセルの出力で決まります。学習者のセルはそのカーネルで
    ``grade`` を差し替えられるので、ここでは外から採点し直します: 干渉が見つかればすべての採点のセルを 0 点に
    （理由つき）、講座の採点が正解でない演習は、採点のセルが ✅ でも 0 点にします。"""
    import asyncio
    import os
    import tempfile

    from .._core import Status
    from .execute import execute_and_check
    from .model import Config

    course = course_notebook(name)
    if course is None or (nb.get("metadata") or {}).get(UNREADABLE_KEY):
        return []
    work = copy.deepcopy(nb)
    for c in work.cells:
        if c.get("cell_type") == "code":
            c.outputs, c.execution_count = [], None
    devices = os.environ.get("JAX_NUM_CPU_DEVICES", "")
    cfg = Config(timeout=max(Config.timeout, timeout), check_timeout=timeout, jobs=1,
                 **({"devices": int(devices)} if devices.isdigit() else {}))
    with tempfile.TemporaryDirectory(prefix="ch6-regrade-") as cwd:
        results, notes = asyncio.run(execute_and_check(work, course, cfg, cwd))
    said = [f"{name}: {n}" for n in notes if n.startswith("採点のしくみへの干渉")]
    for c in nb.cells:
        eid = test_exercise(c)
        r = results.get(eid)
        if r is None:
            continue
        if r.status is Status.TAMPERED:
            c.outputs.append(_error(eid, r.message))
        elif r.status is not Status.PASS and not _has_error(c):
            c.outputs.append(_error(eid, "講座の採点（監視つき）では正解になりません: "
                                         f"{r.message or r.status.value}。この演習は 0 点にしました。"))
            said.append(f"{name}: 採点のセルは ✅ でしたが、講座の採点では {r.status.value} です（{eid}）。")
    return said


def unreadable_notebook(name: str, why: str, where: str):
    """読めない提出物の代わりに nbgrader が採点するノートブック（採点のセルは RestoreGradeCells が足す）。"""
    import nbformat

    text = (f"提出されたファイル {where} は採点できません: {why}"
            "ノートブックを保存し直して、もう一度提出してください（すべての演習を 0 点にしました）。")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(f"⚠️ {text}")]
    nb.metadata[UNREADABLE_KEY] = text
    return nb


def _preprocessor_classes() -> dict:
    """nbgrader の autograde に足す前処理（nbgrader の前処理と同じく、いつも有効）。nbgrader の環境でだけ使います。"""
    from nbgrader.preprocessors import NbGraderPreprocessor as Preprocessor

    class RestoreGradeCells(Preprocessor):
        """消された採点のセルと、採点のセルのない提出物（exercises/ から作ったもの）の採点のセルを戻す。
        nbgrader の OverwriteCells の前に置きます（戻したセルの中身と点数は、OverwriteCells がデータベースの
        配布版のものにそろえます）。"""

        def preprocess(self, nb, resources):
            from nbgrader.api import Gradebook, MissingEntry

            info = resources["nbgrader"]
            with Gradebook(info["db_url"]) as gb:
                try:
                    record = gb.find_notebook(info["notebook"], info["assignment"])
                except MissingEntry:
                    return nb, resources
                points = {g.name: g.max_score for g in record.grade_cells}
                points.update({s.name: 0.0 for s in record.source_cells if s.name == "setup"})
            restored, had_none = restore_grade_cells(nb, info["notebook"], points)
            if restored and not nb.metadata.get(UNREADABLE_KEY):
                where = f"{info['student']}/{info['assignment']}/{info['notebook']}.ipynb"
                why = ("nbgrader の採点のセルがない提出物です（exercises/ や solutions/ から作ったもの）" if had_none
                       else f"採点のセルが消されています（{', '.join(restored)}）")
                self.log.warning("ch6: %s: %s。配布版の採点のセル %d 個を戻して採点します。", where, why, len(restored))
            return nb, resources

    class GuardGrades(Preprocessor):
        """実行の直後（SaveAutoGrades の前）に、採点のセルを外から確かめる（:func:`guard`）。"""

        def preprocess(self, nb, resources):
            info = resources["nbgrader"]
            try:
                said = guard(nb, info["notebook"]) + regrade(nb, info["notebook"])
            except Exception as exc:  # 1 人の提出物で、クラス全体の autograde を止めない
                said = [f"講座の確かめができませんでした（{type(exc).__name__}）。全問 0 点にしました。"]
                for c in nb.cells:
                    eid = test_exercise(c)
                    if eid:
                        c.outputs.append(_error(eid, said[0]))
            for line in said:
                self.log.warning("ch6: %s/%s: %s", info["student"], info["assignment"], line)
            return nb, resources

    return {"RestoreGradeCells": RestoreGradeCells, "GuardGrades": GuardGrades}


def __getattr__(name: str):  # nbgrader の設定が文字列で指す前処理（nbconvert は使うときだけ読み込む）
    if name in ("RestoreGradeCells", "GuardGrades", "Ch6Exporter"):
        cls = _exporter_class() if name == "Ch6Exporter" else _preprocessor_classes()[name]
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _repaired(nb):
    """nbformat の検証に通らないセルのメタデータ（tags が文字列の並びでない、metadata が辞書でない）を外した写し。
    もともと通るなら None。"""
    import nbformat

    from .execute import _sane_metadata

    try:
        nbformat.validate(nb)
        return None
    except nbformat.ValidationError:
        pass
    fixed = copy.deepcopy(nb)
    for cell in fixed.cells:
        _sane_metadata(cell)
    for key in ("kernelspec", "language_info"):  # ノートブックの metadata の、形の決まった項目
        if key in fixed.metadata and not isinstance(fixed.metadata[key], dict):
            del fixed.metadata[key]
    return fixed


def _exporter_class():
    from nbconvert.exporters import NotebookExporter

    class Ch6Exporter(NotebookExporter):
        """nbgrader が提出物（submitted/）を読むとき、読めないファイルならトレースバックで止まる代わりに、
        理由を書いた代わりのノートブックを採点する（全問 0 点。理由は採点のセルとログに）。"""

        def from_filename(self, filename, resources=None, **kw):
            import os
            import tempfile

            info = (resources or {}).get("nbgrader") or {}
            path = Path(filename)
            if info.get("student") and len(path.parents) > 3 and path.parents[2].name == "submitted":
                from .submission import read_submission

                nb, why = read_submission(path)
                fixed = _repaired(nb) if nb is not None else None
                if fixed is not None:  # セルのメタデータが壊れている: 直した写しを採点する（その人もクラスも止めない）
                    where = f"submitted/{info['student']}/{info['assignment']}/{path.name}"
                    self.log.warning("ch6: %s: セルのメタデータが壊れていたので、外して採点します。", where)
                    with tempfile.TemporaryDirectory() as tmp:
                        stand_in = os.path.join(tmp, path.name)
                        fixed_nb, nb = fixed, None
                        import nbformat

                        nbformat.write(fixed_nb, stand_in)
                        return super().from_filename(stand_in, resources, **kw)
                if nb is None:
                    import nbformat

                    where = f"submitted/{info['student']}/{info['assignment']}/{path.name}"
                    self.log.error("ch6: %s: %s 全問 0 点にして、理由を採点のセルに書きます。", where, why)
                    with tempfile.TemporaryDirectory() as tmp:
                        stand_in = os.path.join(tmp, path.name)
                        nbformat.write(unreadable_notebook(info["notebook"], why, where), stand_in)
                        return super().from_filename(stand_in, resources, **kw)
            return super().from_filename(filename, resources, **kw)

    return Ch6Exporter


FAILED: list[str] = []  # nbgrader validate（講座の設定のとき）で失敗したノートブック


def _patch_validate() -> None:
    """nbgrader validate（講座の nbgrader_config.py を読んだとき）を講座のものに: 消された採点のセルを戻して
    失敗にし、採点のセルを外から確かめ（guard）、失敗があれば終了コード 1。"""
    from nbgrader.apps.validateapp import ValidateApp
    from nbgrader.validator import Validator

    if getattr(Validator, "ch6", False):
        return
    validate, preprocess, start = Validator.validate, Validator._preprocess, ValidateApp.start

    def ch6_validate(self, filename):
        self.ch6_file = Path(filename)
        results = validate(self, filename)
        if any(results.get(k) for k in ("type_changed", "changed", "failed")):
            FAILED.append(str(filename))
        return results

    def ch6_preprocess(self, nb):
        name = identify_notebook(getattr(self, "ch6_file", Path("x.ipynb")), nb)
        deleted = prepare(nb, name) if name else []
        nb = preprocess(self, nb)
        if name:
            finish(nb, name, deleted)
            regrade(nb, name)
        return nb

    def ch6_start(self):
        start(self)
        if FAILED:
            self.exit(1)

    Validator.validate, Validator._preprocess, ValidateApp.start = ch6_validate, ch6_preprocess, ch6_start
    Validator.ch6 = True


def identify_notebook(path: Path, nb) -> str | None:
    """どの演習ノートブックか（ファイル名、なければ中身から）。"""
    from .exercises import packaged
    from .identify import identify

    found = identify(Path(path), nb, packaged())
    return found.name if found else None


def prepare(nb, name: str) -> list[str]:
    """validate の前に: 書き換えられた採点のセルを配布版の中身に戻し、消された採点のセルを戻す。
    失敗にする演習の番号（書き換え・削除）を返す。採点のセルが 1 つもない提出物（exercises/ から）は失敗にしない。"""
    course = course_notebook(name)
    changed = []
    for c in nb.cells:
        eid = test_exercise(c)
        if eid and course and eid in course.titles and not is_test_cell(c):
            c.source = test_source(eid, course.titles[eid])
            changed.append(eid)
    restored, had_none = restore_grade_cells(nb, name)
    return changed + ([] if had_none else restored)


def finish(nb, name: str, deleted: list[str]) -> list[str]:
    """validate の後に: 外から確かめ（guard）、書き換え・削除した採点のセルを失敗にする。"""
    said = guard(nb, name)
    for c in nb.cells:
        eid = test_exercise(c)
        if eid in deleted:
            c.outputs.append(_error(eid, "この演習の採点のセルが消されたか書き換えられています。採点では配布版の採点のセルに"
                                         "戻して採点します（上の結果はそのときのものです）。配布版のセルを戻してください。"))
    return said


def configure(c) -> None:
    """nbgrader の設定（nbgrader_config.py の c）に講座の採点を組み込む。

    - 1 セルの制限時間を講座の CELL_TIMEOUT 秒に（autograde と validate）。validate のメッセージを切らない。
    - autograde: 採点のセルを戻す（RestoreGradeCells、OverwriteCells の前）、実行の後に外から確かめる（GuardGrades）。
      読めない提出物は、トレースバックで止まらずに全問 0 点で、理由つきで採点する（Ch6Exporter）。
    - validate: 消された・書き換えられた採点のセルを失敗にし、失敗があれば終了コード 1。"""
    c.Execute.timeout = CELL_TIMEOUT
    c.Validator.width = 400
    pp = "nbgrader.preprocessors."
    c.Autograde.sanitize_preprocessors = [
        f"{pp}ClearOutput", f"{pp}DeduplicateIds", f"{pp}OverwriteKernelspec", f"{MODULE}.RestoreGradeCells",
        f"{pp}OverwriteCells", f"{pp}CheckCellMetadata"]
    c.Autograde.autograde_preprocessors = [
        "ch6.grading.isolate.Execute", f"{MODULE}.GuardGrades", f"{pp}IgnorePattern",
        "nbconvert.preprocessors.ClearMetadataPreprocessor", f"{pp}LimitOutput", f"{pp}SaveAutoGrades",
        f"{pp}AssignLatePenalties", f"{pp}CheckCellMetadata"]
    c.Autograde.exporter_class = f"{MODULE}.Ch6Exporter"
    _patch_validate()


def validate(path: Path, timeout: int = CELL_TIMEOUT, out=print) -> bool:
    """nbgrader を入れずに、提出前の 1 冊を確かめる（nbgrader validate の講座版）。通れば True。

    採点のセルがない（exercises/ から作った）ノートブックには採点のセルを足し、消された・書き換えられた採点のセルは
    戻したうえで失敗にし、講座の制限時間（1 セル timeout 秒）で上から実行して、採点のセルを外から確かめます
    （autograde と同じ）。失敗した演習は講座の 1 行（ヒントまで全部）を表示します。"""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    from .._core import Status
    from .submission import read_submission

    nb, why = read_submission(path)
    if nb is None:
        out(f"❌ {path}: {why}")
        return False
    name = identify_notebook(path, nb)
    if name is None:
        out(f"❌ {path}: 講座の演習ノートブックではありません（演習の番号のあるチェックが見つかりません）。")
        return False
    had = any(test_exercise(c) for c in nb.cells)
    deleted = prepare(nb, name)
    if not had:
        out(f"ℹ️ {path}: 採点のセルがないノートブックです（exercises/ などから作ったもの）。"
            "採点と同じく、配布版の採点のセルを足して確かめます。")
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(Path(path).resolve().parent)}})
    try:
        client.execute()
    except (CellTimeoutError, DeadKernelError, RuntimeError) as exc:
        out(f"❌ {path}: 最後まで実行できませんでした（{type(exc).__name__}）。")
        return False
    for line in finish(nb, name, deleted) + regrade(nb, name, timeout):
        out(f"⚠️ {line}")
    failed = []
    for c in nb.cells:
        eid = test_exercise(c)
        if eid is None:
            continue
        errors = [o for o in c.outputs if o.get("output_type") == "error"]
        if errors or any(o.get("name") == "stderr" for o in c.outputs if o.get("output_type") == "stream"):
            failed.append(eid)
            lines = [o.get("evalue", "") or o.get("ename", "") for o in errors] or ["（エラー出力に何か書かれました）"]
            for line in dict.fromkeys(lines):
                out(line if line.startswith(("❌", "⏳", "⚠️")) else f"{Status.FAIL.label} [{eid}] {line}")
    total = sum(1 for c in nb.cells if test_exercise(c))
    if failed:
        out(f"検証に失敗しました: {path}（{total} 問中 {len(failed)} 問が通りません: {', '.join(failed)}）。")
        return False
    out(f"✅ {path}: すべての採点のセルが通りました（{total} 問）。")
    return True


def validate_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m ch6.grading.nbgrader validate",
                                 description="提出前に nbgrader 版のノートブックを確かめる（失敗があれば終了コード 1）。")
    ap.add_argument("notebooks", nargs="+", type=Path)
    ap.add_argument("--timeout", type=int, default=CELL_TIMEOUT, help="1 セルの制限時間（秒、既定 %(default)s）")
    args = ap.parse_args(argv)
    ok = [validate(p, args.timeout) for p in args.notebooks]
    return 0 if all(ok) else 1


def _points(text: str) -> tuple[str, float]:
    eid, sep, value = text.partition("=")
    try:
        if not sep:
            raise ValueError
        return eid.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"「番号=点数」の形で指定してください（例 6.3b-5=2）: {text}") from None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["validate"]:
        return validate_main(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m ch6.grading.nbgrader", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="nbgrader のコースのフォルダ（source/ と nbgrader_config.py を書きます）")
    ap.add_argument("notebooks", nargs="*", type=Path, help="solutions/ のノートブック（省略時はすべて）")
    ap.add_argument("--assignment", help="すべてのノートブックをこの課題に入れる（既定: 1 冊 = 1 課題）")
    ap.add_argument("--points", type=_points, action="append", default=[], metavar="番号=点数",
                    help="演習ごとの点数（例 6.3b-5=2。何度でも）")
    ap.add_argument("--default-points", type=float, default=1.0, help="そのほかの演習の点数（既定 %(default)g）")
    args = ap.parse_intermixed_args(argv)
    if args.assignment is not None and not (VALID_ID.match(args.assignment) and args.assignment):
        print(f"--assignment {args.assignment}: 課題名に使えるのは英数字と _ - だけです。", file=sys.stderr)
        return 2
    notebooks = args.notebooks or sorted(SOLUTIONS.glob("*.ipynb"))
    missing = [str(p) for p in notebooks if not p.is_file()]
    if missing or not notebooks:
        print(f"ノートブックが見つかりません: {', '.join(missing) or SOLUTIONS}", file=sys.stderr)
        return 2
    had_config = (args.out / CONFIG_NAME).exists()
    try:
        written = write_edition(args.out, notebooks, args.assignment, dict(args.points), args.default_points)
    except EditionError as err:
        print(err, file=sys.stderr)
        return 1
    for target, n, total in written:
        print(f"{target.relative_to(args.out).as_posix()}: 演習 {n} 問、{total:g} 点")
    if had_config:
        print(f"{CONFIG_NAME} はすでにあるので変えていません（スタブと制限時間の設定は "
              "python -c 'from ch6.grading.nbgrader import course_config; print(course_config())' で見られます）。")
    assignments = sorted({t.parent.name for t, _, _ in written})
    print(f"次に: cd {args.out} && nbgrader generate_assignment {assignments[0]}"
          + (f"（ほかに {', '.join(assignments[1:])}）" if len(assignments) > 1 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
