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

  学習者が自分のカーネルで実行したとき（と nbgrader validate）、:func:`grade` は学習者のセルが残した ``ch6`` を使わず、インストールされている ``ch6`` を読み込み直して採点します
  （ch6-grade と同じ）。``ch6.run_check`` などが差し替えられていれば ⚠️ で 0 点、正解なら ✅ の 1 行を表示し、
  正解でなければ講座の 1 行（❌ や ⏳ とヒント）が AssertionError のメッセージとして出ます（チェック 1 つに
  CHECK_TIMEOUT 秒まで）。autograde ではこのセルは学習者のカーネルで実行せず、外の採点の結果を同じ形で書きます。
  解答のセルの ``ch6.check(...)`` は残します（演習版と同じく、セルを実行するとすぐ 1 行が出ます。
  点数は採点のセルだけが決めるので、学習者が書き換えても点数は変わりません）。
- マークダウンの ``<!-- BEGIN SOLUTION -->`` 〜 ``<!-- END SOLUTION -->``（解答版だけに見せる文）は、
  nbgrader の解答の印 "BEGIN SOLUTION" を含むので、そのままでは nbgrader が解答欄とみなします。ここで移します:
  演習の後の解説は、その演習の採点のセルの ``### BEGIN HIDDEN TESTS`` 〜 ``### END HIDDEN TESTS`` に
  コメントとして入れます（nbgrader が配布版から消し、採点後のノートブックとフィードバックに戻します）。
  最初の演習より前のもの（「このノートブックは解答例付きです（solutions/）」の注記）は、solutions/ についての
  文なので入れません。
- Colab のバッジは ``exercises/`` の演習版へ向けます。
- 最初のコードセル（セットアップ）は編集できないセル（locked）にします。
- ``コース/nbgrader_config.py`` がなければ作ります（スタブを演習版と同じ ``# TODO`` に、そして :func:`configure`）。
  autograde はその設定で ch6-grade と同じ採点を 1 回だけ行い（:mod:`ch6.grading.autograde`: 1 人のメタデータ・
  停止するカーネル・終わらない関数でクラスを止めず、その人の点数に理由つきの印）、validate は失敗で終了コード 1
  （:mod:`ch6.grading.nbvalidate`）。課題のフォルダにも同じ設定を置くので、配布版と一緒に配られ、そのフォルダの
  nbgrader validate にも効きます。
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
from .gradecells import CELL_TIMEOUT, CHECK_TIMEOUT

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
BEGIN_CODE = "### BEGIN SOLUTION"
HIDDEN = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
# nbgrader が印とみなす文字列（採点のセル以外に残ってはいけない）
NBGRADER_MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS",
                    "BEGIN MARK SCHEME", "END MARK SCHEME")
CONFIG_NAME = "nbgrader_config.py"


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
        result, noise = _quietly(core.run_check_within, exercise_id, user_ns[function], CHECK_TIMEOUT)
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
def configure(c) -> None:
    """nbgrader の設定に講座の採点を組み込む（コースの nbgrader_config.py が呼ぶ。:func:`ch6.grading.autograde.configure`）。"""
    from .autograde import configure as configure_course

    configure_course(c)


def validate(path: Path, timeout: int = CELL_TIMEOUT, out=print) -> bool:
    """nbgrader を入れずに、提出前の 1 冊を確かめる（:func:`ch6.grading.nbvalidate.validate`）。"""
    from .nbvalidate import validate as validate_one

    return validate_one(path, timeout, out)


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
        from .nbvalidate import validate_main

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
        print(f"{CONFIG_NAME} はすでにあるので変えていません。スタブと制限時間の設定は、次のコマンドで見られます。")
        print("  python -c 'from ch6.grading.nbgrader import course_config; print(course_config())'")
    assignments = sorted({t.parent.name for t, _, _ in written})
    print(f"次に: cd {args.out} && nbgrader generate_assignment {assignments[0]}"
          + (f"（ほかに {', '.join(assignments[1:])}）" if len(assignments) > 1 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
