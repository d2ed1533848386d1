"""ch6-grade の端から端までのテスト（tests/test_grade.py）が採点するクラスの提出物を作る部品と、その期待値。

solutions/ と exercises/ の 6_1_vmap から作ります（関数名と番号は演習ノートブックから読み、正解は解答ノートブックの
セル、間違いは「文字列を返す」「例外を送出する」「終わらない」）。build_class が提出物と配るノートブックを書き、
学習者ごとの期待（印、点数、備考）を返します。tests/grading/test_gradebook.py も提出物の作り方をここから使います。
"""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import nbformat

from ch6.grading import exercises
from tests.grading.attacks import THREAD_SWAP

ROOT = Path(__file__).resolve().parent.parent
SOLUTION = ROOT / "solutions" / "6_1_vmap.ipynb"
EXERCISE = ROOT / "exercises" / "6_1_vmap.ipynb"
TIMEOUT, CHECK_TIMEOUT = 20, 20  # 採点の制限時間（セル・チェック）。期待するメッセージに出る

if EXERCISE.exists():
    _A = exercises.from_notebook(EXERCISE.stem, json.loads(EXERCISE.read_text(encoding="utf-8")))
    IDS, F = _A.ids, [_A.titles[i] for i in _A.ids]  # 演習の番号と、学習者が書く関数の名前（順に）
else:  # pragma: no cover
    IDS, F = [], []
N = len(IDS)


# ------------------------------------------------------------------------------ 提出物を作る部品

def read_notebook(path):
    return nbformat.read(str(path), as_version=4)


def _def_cell(nb, name):
    return next(i for i, c in enumerate(nb.cells)
                if c.cell_type == "code" and re.search(rf"^def {name}\(", c.source, re.M))


def problem_heading(nb, name) -> int:
    """関数 name の問題の見出しのセルの位置: その関数のセルより前の、最後の「## 」の見出し（見出しは問題の番号を
    書かないので、番号では探せない）。"""
    code = _def_cell(nb, name)
    return max(i for i, c in enumerate(nb.cells[:code]) if c.cell_type == "markdown" and c.source.startswith("## "))


def _set_def(nb, name, body):
    """関数 name の def 行と本体を ``def name(*args, **kwargs):`` + body で置き換える。ほかの行（チェック呼び出し）は残す。"""
    cell = nb.cells[_def_cell(nb, name)]
    lines = cell.source.splitlines()
    d = next(k for k, ln in enumerate(lines) if ln.startswith(f"def {name}("))
    e = d + 1
    while e < len(lines) and (not lines[e].strip() or lines[e].startswith((" ", "\t"))):
        e += 1
    while e > d + 1 and not lines[e - 1].strip():
        e -= 1
    lines[d:e] = [f"def {name}(*args, **kwargs):"] + ["    " + ln for ln in body.strip("\n").splitlines()]
    cell.source = "\n".join(lines)
    return d + 1  # def の行（1 始まり）


def _solve(nb, sol, name):
    """演習ノートブックの関数 name のセルを、解答ノートブックの同じセルにする。"""
    nb.cells[_def_cell(nb, name)].source = sol.cells[_def_cell(sol, name)].source


def _drop_check(nb, eid, replacement=None):
    """演習 eid のチェック呼び出しの行を消す（replacement があればその行に置き換える）。"""
    call = re.compile(rf"""check\(\s*["']{re.escape(eid)}["']""")
    for c in nb.cells:
        if c.cell_type == "code" and call.search(c.source):
            lines = c.source.splitlines()
            c.source = "\n".join(ln if not call.search(ln) else replacement for ln in lines
                                 if replacement is not None or not call.search(ln))
            return
    raise AssertionError(eid)


def _insert(nb, after_def, source):
    """関数 after_def のセルの直後にコードセルを入れ、その位置（0 始まり）を返す。"""
    pos = _def_cell(nb, after_def) + 1
    nb.cells.insert(pos, nbformat.v4.new_code_cell(source))
    return pos


def save_notebook(nb, path):
    nbformat.write(nb, str(path))


def lean_notebook(nb):
    """例のセルを除く: コードセルは最初の 2 つ（セットアップと import）と、演習の関数を定義するセルだけ残す。"""
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    keep = set(code[:2]) | {i for i in code if any(re.search(rf"^def {f}\(", nb.cells[i].source, re.M) for f in F)}
    nb.cells = [c for i, c in enumerate(nb.cells) if c.cell_type != "code" or i in keep]
    return nb


def _marks(*first, rest):
    return "".join(first) + rest * (N - len(first))


WRONG = 'return "wrong"  # 配列ではなく文字列'
RAISES = 'raise TypeError("わざと")'
LOOPS = "import time\nwhile True:  # 終わらない（CPU を空けるため sleep）\n    time.sleep(0.1)"
TAMPER = ("採点に使う仕組み（{}）に触れるコードがあります。採点は改ざんを検出するだけで防げないので、結果とコードを確かめてください。")
CALLS_CHANGED = "チェックの呼び出しが書き換えられたか消されています（{}）。採点は講座のチェックで行いました。"


def build_class(folder: Path, reference: Path) -> dict[str, dict]:
    sol, ex = lean_notebook(read_notebook(SOLUTION)), lean_notebook(read_notebook(EXERCISE))
    save_notebook(ex, reference / EXERCISE.name)  # 配った演習ノートブック（例のセルなし）
    exp: dict[str, dict] = {}

    # 正解（解答ノートブックそのもの）
    save_notebook(sol, folder / "aoki_6_1_vmap.ipynb")
    exp["aoki"] = dict(marks=_marks(rest="✅"), score=N, notes=[])

    # 一部だけ: 1, 2 正解、3 文字列を返す、4 学習者のコードでエラー、5 無限ループ（チェック呼び出しは消した）、6 以降未着手
    nb = copy.deepcopy(ex)
    _solve(nb, sol, F[0])
    _solve(nb, sol, F[1])
    _set_def(nb, F[2], WRONG)
    _set_def(nb, F[3], RAISES)
    _set_def(nb, F[4], LOOPS)
    _drop_check(nb, IDS[4])
    save_notebook(nb, folder / "ito_6_1_vmap.ipynb")
    exp["ito"] = dict(marks=_marks("✅", "✅", "❌", "❌", "❌", rest="⏳"), score=2, notes=[CALLS_CHANGED.format(IDS[4])],
                      messages={IDS[3]: "解答のコードの中で TypeError が起きました",
                                IDS[4]: f"チェックが {CHECK_TIMEOUT} 秒以内に終わりませんでした",
                                IDS[5]: "関数の本体に答えを書いてから"},
                      statuses={IDS[3]: "error", IDS[4]: "timeout", IDS[5]: "not_done"})

    # ノートブックでないファイル、壊れた JSON
    (folder / "ueda_6_1_vmap.ipynb").write_text("レポートは明日出します\n", encoding="utf-8")
    exp["ueda"] = dict(marks="⚠️" * N, score=0, notes=["ノートブックではありません（.ipynb の JSON ではないファイルです）。"])
    text = nbformat.writes(sol)
    (folder / "endo_6_1_vmap.ipynb").write_text(text[: len(text) // 2], encoding="utf-8")
    line = text[: len(text) // 2].count("\n") + 1
    exp["endo"] = dict(marks="⚠️" * N, score=0, notes=None, note_re=[
        rf"ファイルが壊れていて読めません（JSON の {line} 行目 \d+ 文字目で解析エラー）。"])

    # カーネルが落ちるセル: そのセルを飛ばして全部採点できる
    nb = copy.deepcopy(sol)
    pos = _insert(nb, F[2], "import os\nos._exit(1)")
    save_notebook(nb, folder / "ota_6_1_vmap.ipynb")
    exp["ota"] = dict(marks=_marks(rest="✅"), score=N, notes=[
        f"上から {pos + 1} 番目のセルでカーネルが停止しました（os._exit やメモリ不足など）。"
        "新しいカーネルでそのセルを飛ばして採点しました。"])

    # 無限ループ（中断できる）: そこまでに定義された関数だけで採点
    nb = copy.deepcopy(sol)
    pos = _insert(nb, F[0], LOOPS)
    save_notebook(nb, folder / "kato_6_1_vmap.ipynb")
    exp["kato"] = dict(marks=_marks("✅", rest="⚠️"), score=1, notes=[
        f"上から {pos + 1} 番目のセルで制限時間 {TIMEOUT} 秒を超えました（無限ループ?）。"
        "そのセル以降は実行せずに採点しました。"],
        messages={IDS[1]: f"関数 {F[1]} が定義されていません（制限時間内にそのセルまで実行されませんでした）"},
        statuses={IDS[1]: "missing"})

    # 無限ループ（SIGINT を無視するので中断できない）: カーネルを替えて、そのセルの手前まで
    nb = copy.deepcopy(sol)
    pos = _insert(nb, F[1], "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n" + LOOPS)
    save_notebook(nb, folder / "kimura_6_1_vmap.ipynb")
    exp["kimura"] = dict(marks=_marks("✅", "✅", rest="⚠️"), score=2, notes=[
        f"上から {pos + 1} 番目のセルが制限時間を超え、中断もできませんでした。"
        "新しいカーネルでそのセルの手前までを実行して採点しました。"])

    # セルの削除（問題 2 の説明）と並べ替え（問題 6 を問題 5 の前へ）: 採点はそのまま
    nb = copy.deepcopy(sol)
    md = problem_heading(nb, F[1])
    deleted = copy.deepcopy(ex.cells[md])
    del nb.cells[md]
    six, five = _def_cell(nb, F[5]), _def_cell(nb, F[4])
    moved_src = nb.cells[six].source
    nb.cells.insert(five, nb.cells.pop(six))
    moved_ref = _def_cell(ex, F[5])
    save_notebook(nb, folder / "sasaki_6_1_vmap.ipynb")
    exp["sasaki"] = dict(marks=_marks(rest="✅"), score=N, notes=[
        f"演習ノートブックのセルが 1 個見つかりません（削除?）: {md + 1} 番目「{exercises.snippet_of(deleted.source)}」。",
        f"セルの順番が演習ノートブックと違います（1 個が移動: 演習ノートブックの {moved_ref + 1} 番目"
        f"「{exercises.snippet_of(moved_src)}」など）。"])

    # チェック呼び出しの書き換え・削除、ch6 の差し替え、偽の ch6 パッケージ: 採点は講座のチェックで
    nb = copy.deepcopy(sol)
    _set_def(nb, F[0], WRONG)
    _drop_check(nb, IDS[0], f'print("✅ 正解 [{IDS[0]}] {F[0]}: 正解です。")')
    _drop_check(nb, IDS[1])
    after_imports = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"][1] + 1  # 演習のセルより前
    nb.cells.insert(after_imports, nbformat.v4.new_code_cell(
        "import os, sys\n"
        "os.makedirs('ch6', exist_ok=True)\n"
        "open('ch6/__init__.py', 'w').write('')\n"
        "open('ch6/_core.py', 'w').write('''\n"
        "class E:\n    title = 'x'\n"
        "class R:\n    status, message = 'pass', 'ok'\n"
        f"def registry():\n    return {{k: E() for k in {IDS!r}}}\n"
        "def run_check(i, f):\n    return R()\n''')\n"
        "sys.path.insert(0, os.getcwd())\n"
        "ch6.check = lambda *a: print('✅ 正解です')\n"
        "ch6._core.run_check = lambda i, f: ch6.Result(i, 'pass', 'ok')\n"
        "sys.modules['ch6'] = None"))
    save_notebook(nb, folder / "kudo_6_1_vmap.ipynb")
    exp["kudo"] = dict(marks="⚠️" * N, score=0, notes=None, flagged=("ch6._core.run_check",), statuses={
        i: "tampered" for i in IDS})

    # 答えのハードコード（隠し入力で見つかる）と、構文エラーで定義されなかった関数
    nb = copy.deepcopy(sol)
    _set_def(nb, F[2], "import numpy as np\nreturn np.zeros((7, 5), np.float32)")
    _set_def(nb, F[3], "import numpy as np\nreturn np.ones(10, np.float32)")
    bad = _def_cell(nb, F[5])
    line = _set_def(nb, F[5], "return 0")
    nb.cells[bad].source = nb.cells[bad].source.replace(f"def {F[5]}(*args, **kwargs):", f"def {F[5]}(x, eps=1e-5:")
    save_notebook(nb, folder / "hayashi_6_1_vmap.ipynb")
    exp["hayashi"] = dict(marks=_marks("✅", "✅", "❌", "❌", "✅", "⚠️", rest="✅"), score=N - 3, notes=None, note_re=[
        rf"上から {bad + 1} 番目のセルでエラー: SyntaxError: .+（{line} 行目）"],
        messages={IDS[5]: f"関数 {F[5]} が定義されていません（上から {bad + 1} 番目のそのセルでエラー: SyntaxError"},
        statuses={IDS[5]: "missing"})

    # 無限ループする関数が 1 つ（def と同じセルに ch6.check がある）: 学習者セルの時間を使い切らず、
    # その演習だけがチェックの制限時間で ❌、ほかの演習は採点される（採点中は ch6.check が何もしない）
    nb = copy.deepcopy(sol)
    _set_def(nb, F[0], LOOPS)
    save_notebook(nb, folder / "mori_6_1_vmap.ipynb")
    exp["mori"] = dict(marks=_marks("❌", rest="✅"), score=N - 1, notes=[],
                       messages={IDS[0]: f"チェックが {CHECK_TIMEOUT} 秒以内に終わりませんでした"},
                       statuses={IDS[0]: "timeout"})

    # 採点の準備（ch6 の読み込み直し）でカーネルが落ちる: 1 回だけなので「何度も」とは書かない
    nb = copy.deepcopy(sol)
    nb.cells.append(nbformat.v4.new_code_cell(
        "import os, sys\n"
        "class Boom:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.startswith('ch6'):\n"
        "            os._exit(1)\n"
        "sys.meta_path.insert(0, Boom())"))
    save_notebook(nb, folder / "noguchi_6_1_vmap.ipynb")
    exp["noguchi"] = dict(marks="⚠️" * N, score=0, notes=None, flagged=("sys.meta_path の Boom",),
                          statuses={i: "tampered" for i in IDS})

    # IPython.display.display を包んで結果を「正解」に書き換える: 結果は監視のソケットで届くので効かず、
    # 差し替えは監視が見つける
    nb = copy.deepcopy(ex)
    nb.cells.append(nbformat.v4.new_code_cell(
        "import IPython.display\n"
        "_real_display = IPython.display.display\n"
        "def _fake_display(*objs, **kwargs):\n"
        "    for o in objs:\n"
        "        for v in (o.values() if isinstance(o, dict) else []):\n"
        "            if isinstance(v, dict) and 'status' in v:\n"
        "                v['status'] = 'pass'\n"
        "    return _real_display(*objs, **kwargs)\n"
        "IPython.display.display = _fake_display"))
    save_notebook(nb, folder / "fujita_6_1_vmap.ipynb")
    exp["fujita"] = dict(marks="⚠️" * N, score=0, notes=None, flagged=("IPython.display.display",),
                         statuses={i: "tampered" for i in IDS})

    # issue 40 の攻撃（監視が見つけて全問 0 点、備考に何が見つかったか）。どれも監視がなければ点が入る
    # 1. nbgrader 版の grade を別名で差し替える（何も解いていない）
    nb = copy.deepcopy(ex)
    nb.cells.append(nbformat.v4.new_code_cell(
        "import ch6.grading.nbgrader as g\ng.grade = lambda *a, **k: print('✅ 正解です。')"))
    save_notebook(nb, folder / "abe_6_1_vmap.ipynb")
    exp["abe"] = dict(marks="⚠️" * N, score=0, notes=None, flagged=("ch6.grading.nbgrader.grade",))
    # 2. sys.modules と builtins に文字列の組み立てで触れる
    nb = copy.deepcopy(ex)
    nb.cells.append(nbformat.v4.new_code_cell(
        "m = getattr(__import__('sy' + 's'), 'mod' + 'ules')\n__import__('ch6._core')\n"
        "setattr(m['ch6.' + '_core'], 'run_' + 'check', lambda *a, **k: None)\n"
        "setattr(__import__('built' + 'ins'), 'ro' + 'und', lambda *a, **k: 0)"))
    save_notebook(nb, folder / "ikeda_6_1_vmap.ipynb")
    exp["ikeda"] = dict(marks="⚠️" * N, score=0, notes=None, flagged=("ch6._core.run_check", "builtins.round"))
    # 3. 採点の最中も生きているスレッドが、読み込み直した ch6._core の run_check を「いつも正解」に替える
    nb = copy.deepcopy(ex)
    nb.cells.append(nbformat.v4.new_code_cell(THREAD_SWAP))
    save_notebook(nb, folder / "ueno_6_1_vmap.ipynb")
    exp["ueno"] = dict(marks="⚠️" * N, score=0, notes=None, flagged=("swap",))
    # 4. インストールされた ch6.checks から参照の答えを読み込んで返す（答えは正しいので、監視がなければ正解）
    nb = copy.deepcopy(sol)
    ref = "ensemble_sgd_step"
    if ref in F:
        nb.cells.insert(_def_cell(nb, ref), nbformat.v4.new_code_cell(
            "from ch6.checks.s6_1.ensemble_sgd_step import _sgd_reference"))
        _set_def(nb, ref, "return _sgd_reference(*args, **kwargs)")
    save_notebook(nb, folder / "okada_6_1_vmap.ipynb")
    exp["okada"] = dict(marks="⚠️" * N, score=0, notes=None, flagged=("ch6.checks.s6_1",))
    # 5. メタデータを壊した提出物（nbgrader の印が文字列、tags が数、ノートブックの metadata が壊れた値）:
    #    その人だけの問題で、クラスの採点は止まらない（正解の答えはそのまま採点される）
    nb = json.loads(nbformat.writes(sol))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    code[0]["metadata"]["nbgrader"] = "broken"
    code[1]["metadata"]["tags"] = 7
    code[2]["metadata"]["nbgrader"] = {"grade": "yes", "grade_id": 3, "points": "ten", "locked": True}
    nb["metadata"]["ch6"] = ["broken"]
    nb["metadata"]["kernelspec"] = "broken"
    (folder / "matsui_6_1_vmap.ipynb").write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    exp["matsui"] = dict(marks=_marks(rest="✅"), score=N, notes=None)
    return exp
