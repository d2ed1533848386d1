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

      ch6_result = ch6.run_check("6.3b-2", ring_all_gather)
      assert ch6_result.ok, ch6_result.line

  正解でなければ、講座の 1 行（❌ や ⏳ とヒント）が AssertionError のメッセージとして出ます。
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
- ``コース/nbgrader_config.py`` がなければ作ります（スタブを演習版と同じ ``# TODO`` に、セルの制限時間を長めに）。

課題の分け方の既定は 1 冊 = 1 課題です。``--assignment 名前`` なら、渡したノートブックをすべてその課題に入れます。
"""
from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

from .exercises import check_calls

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
SCHEMA_VERSION = 3
RESULT_NAME = "ch6_result"  # 採点のセルの変数名（ノートブックのほかの名前と重ならないことを確かめる）
VALID_ID = re.compile(r"^[a-zA-Z0-9_\-]*$")
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


def grade_id(exercise_id: str, prefix: str = "") -> str:
    """nbgrader の grade_id（英数字と _ - だけ）: "6.3b-2" -> "6_3b-2"。"""
    gid = prefix + re.sub(r"[^a-zA-Z0-9_\-]", "_", exercise_id)
    assert VALID_ID.match(gid) and gid, gid
    return gid


def nbgrader_meta(gid: str, *, solution: bool = False, grade: bool = False, locked: bool = False,
                  points: float | None = None) -> dict:
    meta = {"grade": grade, "grade_id": gid, "locked": locked, "schema_version": SCHEMA_VERSION,
            "solution": solution, "task": False}
    if grade:
        meta["points"] = points
    return meta


def test_source(exercise_id: str, function: str) -> str:
    return (f"# 採点のセル（nbgrader）: 上の関数を講座のチェックで確かめます（編集できません）\n"
            f"{RESULT_NAME} = ch6.run_check({exercise_id!r}, {function})\n"
            f"assert {RESULT_NAME}.ok, {RESULT_NAME}.line").replace("'", '"')


TEST_CALL = re.compile(rf'^{RESULT_NAME} = ch6\.run_check\("([^"]+)", ([A-Za-z_]\w*)\)$', re.M)


def is_test_cell(cell) -> bool:
    """この nbgrader 版の採点のセルそのもの（test_source の 3 行と、コメントだけの隠しテスト）か。
    ch6-grade はこのセルを実行しません（同じチェックを採点の側で行うので、実行しても何も増えません）。"""
    meta = (cell.get("metadata") or {}).get("nbgrader") or {}
    if cell.get("cell_type") != "code" or not meta.get("grade"):
        return False
    src = "".join(cell.get("source", ""))
    m = TEST_CALL.search(src)
    if not m or not src.startswith(head := test_source(m.group(1), m.group(2))):
        return False
    return all(ln.startswith("#") for ln in src[len(head):].strip("\n").splitlines())


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
        "# 1 セルの制限時間（秒）: チェックはコンパイルを含むので、nbgrader の既定（30 秒）より長く\n"
        "c.Execute.timeout = 300\n"
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
    config = out / CONFIG_NAME
    if not config.exists():
        config.write_text(course_config(), encoding="utf-8")
    return written


def _points(text: str) -> tuple[str, float]:
    eid, sep, value = text.partition("=")
    try:
        if not sep:
            raise ValueError
        return eid.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"「番号=点数」の形で指定してください（例 6.3b-5=2）: {text}") from None


def main(argv: list[str] | None = None) -> int:
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
