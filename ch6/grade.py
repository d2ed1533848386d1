"""クラス全員の演習ノートブックを採点する / Grade a whole class of exercise notebooks.

使い方 / usage::

    python -m ch6.grade 提出フォルダ/                   # 学習者 × 演習 の表
    python -m ch6.grade 提出フォルダ/ --csv 成績.csv --json 成績.json
    python -m ch6.grade exercises/6_1_vmap.ipynb        # 1 冊だけなら、学習者の自己チェック
    ch6-grade 提出フォルダ/ --jobs 4 --timeout 300      # 同じもの（コンソールスクリプト）

しくみ:

- 提出物は 1 冊ずつ新しいカーネルで上から実行します（``--jobs`` 冊を並列に）。
  学習者のセルでエラーが起きても止めずに最後まで実行し、ノートブック全体には制限時間
  （``--timeout``）があります。時間切れのセルは中断し、それまでに定義された関数で採点します。
- 採点中のカーネルでは、学習者のセルにある ``ch6.check(...)`` は何もしません（環境変数
  ``CH6_GRADING=1``）。無限ループする関数が 1 つあっても、学習者セルの制限時間を使い切らず、
  ほかの演習は採点されます（その演習だけがチェックの制限時間で ❌ になります）。
- そのあと同じカーネルで採点用のセルを実行します。採点用セルは ``ch6`` をインストール先から
  読み込み直し（``sys.modules`` から消して再 import）、演習ごとに ``run_check`` を呼びます。
  学習者が ``ch6.check`` の呼び出しを消したり書き換えたり、``ch6`` を差し替えたりしても、
  採点は講座のチェック（隠し入力）で行われます。学習者の関数は、チェックの登録名
  （``@exercise(id, "関数名")``）で探します。
- 採点結果の表示に使う関数と、提出物ごとの乱数（nonce）は、学習者のセルより先に実行する準備の
  コードで閉じ込めます。学習者のコードが ``IPython.display.display`` などを差し替えても、
  その表示は結果として使いません。ただし学習者のコードは採点と同じカーネルで動くので、
  これは改ざんの防止ではなく検出です（tamper-evident, not tamper-proof）。
  ``IPython.display``・``sys.meta_path``・``builtins``・``importlib``・``input_transformers``・
  ``events.register`` などに触れるコードは備考に書くので、そういう提出物は結果とコードを確かめてください。
- どの演習がどのノートブックのものかは、参照ノートブック（既定はリポジトリの
  ``exercises/``。``--reference`` で変更）の ``ch6.check("6.N-k", …)`` 呼び出しから決めます。
  参照がなければ、ファイル名の ``6_1`` から ``6.1-`` で始まる演習すべてとします。
- 参照ノートブックとセルを突き合わせ、セルの削除・並べ替え、チェック呼び出しの変更を
  備考に書きます（採点はそのまま行います）。
- カーネルが落ちたセル（``os._exit`` やメモリ不足）は、新しいカーネルでそのセルを飛ばして
  やり直します。中断しても応答しないセルは、新しいカーネルでその手前までを実行し直します
  （カーネルは 1 冊につき最大 3 回）。
- カーネルの作業フォルダは提出物ごとの一時フォルダです。ただし学習者のコードは採点する人の
  権限で動くので、知らない人の提出物はコンテナなど隔離した環境で採点してください。

印: ✅ 正解、❌ 不正解・学習者のコードのエラー・チェック中の時間切れ、⏳ 未解答
（NotImplementedError のまま）、⚠️ 採点できない（関数が見つからない、ファイルが読めない など）。
"""
from __future__ import annotations

import argparse
import asyncio
import copy
import csv
import dataclasses
import io
import json
import logging
import math
import re
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nbformat

from . import nbrun

MIME = "application/vnd.ch6.grade+json"
PACKAGE_DIR = Path(__file__).resolve().parent
DEFAULT_REFERENCE = PACKAGE_DIR.parent / "exercises"
MAX_KERNELS = 3  # 1 冊あたり: カーネルが落ちた・固まったときのやり直しを含めて

MARKS = {
    "pass": "✅", "fail": "❌", "error": "❌", "timeout": "❌", "crash": "❌",
    "not_done": "⏳", "missing": "⚠️", "internal": "⚠️", "not_graded": "⚠️",
}


# ------------------------------------------------------------------------------ データ

@dataclasses.dataclass
class ExerciseResult:
    id: str
    title: str
    status: str  # MARKS のキー
    message: str

    @property
    def mark(self) -> str:
        return MARKS.get(self.status, "⚠️")

    def line(self) -> str:
        return f"{self.mark} [{self.id}] {self.message}"


@dataclasses.dataclass
class Row:
    learner: str
    file: str
    notebook: str | None
    exercises: dict[str, ExerciseResult] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    @property
    def score(self) -> int:
        return sum(r.status == "pass" for r in self.exercises.values())

    @property
    def max_score(self) -> int:
        return len(self.exercises)

    def to_dict(self) -> dict[str, Any]:
        return {
            "learner": self.learner, "file": self.file, "notebook": self.notebook,
            "score": self.score, "max_score": self.max_score,
            "exercises": {k: {"title": r.title, "status": r.status, "mark": r.mark, "message": r.message}
                          for k, r in self.exercises.items()},
            "notes": list(self.notes), "seconds": round(self.seconds, 1),
        }


@dataclasses.dataclass
class Assignment:
    """1 冊の演習ノートブック: 名前、演習の番号と関数名、参照ノートブック（あれば）。"""
    name: str
    ids: list[str]
    titles: dict[str, str]
    reference: nbformat.NotebookNode | None = None
    check_lines: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Config:
    timeout: float = 120.0       # ノートブック 1 冊の学習者セル全体の制限時間（秒）
    check_timeout: float = 60.0  # チェック 1 つの制限時間（秒）
    grace: float = 10.0          # 中断のあとカーネルが応答するまで待つ秒数
    devices: int = nbrun.DEFAULT_DEVICES
    jobs: int = 2


# ------------------------------------------------------------------------------ 演習の一覧

_CHECK_CALL = re.compile(r"""(?:\b[\w.]*\.)?\bcheck\(\s*["']([^"']+)["']\s*,\s*([A-Za-z_]\w*)\s*\)""")
_SECTION = re.compile(r"(?<![0-9])(\d+)_(\d+[a-z]?)(?![0-9])")


def load_checks() -> dict[str, str]:
    """すべてのチェックを読み込む。読み込めないモジュールがあっても残りは使う
    （``_core.registry`` が 1 つずつ読み込む）。返り値は {モジュール名: 理由}（読み込めなかったもの）。"""
    from . import _core

    _core.registry()
    return _core.load_errors()


def _registry_titles() -> dict[str, str]:
    from ._core import registry

    load_checks()
    return {k: e.title for k, e in registry().items()}


def _check_module(exercise_id: str) -> str:
    return "s" + exercise_id.split("-")[0].replace(".", "_")


def _norm_line(line: str) -> str:  # 空白と引用符の違いは同じとみなす
    return re.sub(r"\s+", "", line).replace("'", '"')


def _code_lines(source: str):
    for line in source.splitlines():
        s = line.strip()
        if s and not s.startswith("#"):
            yield s


def assignment_from_notebook(name: str, nb, titles: dict[str, str]) -> Assignment:
    ids, lines = [], {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for line in _code_lines(cell.source):
            for m in _CHECK_CALL.finditer(line):
                if m.group(1) not in ids:
                    ids.append(m.group(1))
                    lines[m.group(1)] = _norm_line(m.group(0))
    return Assignment(name, ids, {i: titles.get(i, "?") for i in ids}, nb, lines)


def load_assignments(reference: Path | None, titles: dict[str, str]) -> dict[str, Assignment]:
    """参照フォルダの演習ノートブックから。なければ登録済みのチェックを節ごとにまとめる。"""
    out: dict[str, Assignment] = {}
    if reference is not None and reference.is_dir():
        for path in sorted(reference.glob("*.ipynb")):
            try:
                a = assignment_from_notebook(path.stem, nbrun.read(path), titles)
            except Exception:  # 参照が壊れていれば使わない
                continue
            if a.ids:
                out[a.name] = a
    if not out:
        sections: dict[str, list[str]] = {}
        for i in sorted(titles):
            sections.setdefault(i.split("-")[0], []).append(i)
        for sec, ids in sections.items():
            out[sec] = Assignment(sec, ids, {i: titles[i] for i in ids})
    return out


def _section_of(name: str) -> str | None:
    m = _SECTION.search(name)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def identify(path: Path, nb, assignments: dict[str, Assignment], forced: str | None = None) -> Assignment | None:
    """提出物がどの演習ノートブックか: --notebook、ファイル名・フォルダ名、中身の順に決める。"""
    if forced:
        return assignments.get(forced) or next((a for a in assignments.values()
                                                if _section_of(a.name) == _section_of(forced)), None)
    for text in [path.name] + [p.name for p in path.parents][:3]:
        hits = [a for n, a in assignments.items() if n in text]
        if hits:
            return max(hits, key=lambda a: len(a.name))
    for text in [path.name] + [p.name for p in path.parents][:3]:
        sec = _section_of(text)
        hits = [a for a in assignments.values() if sec and (a.name == sec or _section_of(a.name) == sec)]
        if len(hits) == 1:
            return hits[0]
    if nb is None:
        return None
    # 中身: チェックの番号、次にセルの一致の多さ
    code = "\n".join(c.source for c in nb.cells if c.get("cell_type") == "code")
    found = {m.group(1) for m in _CHECK_CALL.finditer(code)}
    best = max(assignments.values(), key=lambda a: len(found & set(a.ids)), default=None)
    if best is not None and found & set(best.ids):
        return best
    sources = {c.source.strip() for c in nb.cells if c.source.strip()}
    scored = [(len(sources & {c.source.strip() for c in a.reference.cells if c.source.strip()}), a.name)
              for a in assignments.values() if a.reference is not None]
    if scored and max(scored)[0] >= 3:
        return assignments[max(scored)[1]]
    return None


def learner_name(path: Path, notebook: str | None) -> str:
    """ファイル名から学習者名: 演習ノートブック名と区切りを除く。残らなければフォルダ名。"""
    stem = path.stem
    if notebook:
        stem = stem.replace(notebook, " ")
    # Colab・Drive のコピー: "Copy of 6_1_vmap"、"6_1_vmap のコピー"、"6_1_vmap (1)"
    stem = re.sub(r"\(\d+\)|\bcopy\s+of\b|\bcopy\b|の\s*コピー", " ", stem, flags=re.I)
    name = re.sub(r"[\s_\-.()]+", " ", stem).strip().replace(" ", "_")
    return name or path.parent.name or path.stem


# ------------------------------------------------------------------------------ 読み込みと構造の比較

def read_submission(path: Path) -> tuple[nbformat.NotebookNode | None, str | None]:
    """(ノートブック, None) か (None, 読めない理由)。"""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return None, f"ファイルを読めません（{type(exc).__name__}）。"
    if not data.strip():
        return None, "空のファイルです（ノートブックを保存してから提出してください）。"
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None, "ノートブックではありません（.ipynb の JSON ではないファイルです）。"
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        if not text.lstrip().startswith("{"):
            return None, "ノートブックではありません（.ipynb の JSON ではないファイルです）。"
        return None, f"ファイルが壊れていて読めません（JSON の {exc.lineno} 行目 {exc.colno} 文字目で解析エラー）。"
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list):
        return None, "ノートブックの形式ではありません（JSON ですが cells がありません）。"
    log = logging.getLogger("traitlets")  # nbformat の検証メッセージ（長い）は表に出さない
    level = log.level
    try:
        log.setLevel(logging.CRITICAL)
        nb = nbformat.reads(text, as_version=4)
        for cell in nb.cells:
            if cell.cell_type not in ("code", "markdown", "raw") or not isinstance(cell.source, str):
                raise ValueError(cell.cell_type)
            cell.setdefault("metadata", nbformat.NotebookNode())
            if cell.cell_type == "code":
                cell.setdefault("outputs", [])
                cell.setdefault("execution_count", None)
    except Exception as exc:
        return None, f"ノートブックの形式が正しくありません（{type(exc).__name__}）。"
    finally:
        log.setLevel(level)
    return nb, None


def _cell_keys(cell) -> set[str]:
    """内容が変わっても同じセルと分かる手がかり: 関数名の def とチェックの番号。"""
    keys = set()
    if cell.cell_type == "code":
        keys |= {f"def:{m}" for m in re.findall(r"^\s*def\s+([A-Za-z_]\w*)", cell.source, re.M)}
        keys |= {f"check:{m.group(1)}" for m in _CHECK_CALL.finditer(cell.source)}
    return keys


def _snippet(cell, limit: int = 24) -> str:
    first = next((ln.strip().lstrip("#").strip() for ln in cell.source.splitlines() if ln.strip()), "")
    return first if len(first) <= limit else first[: limit - 1] + "…"


def _longest_increasing(seq: list[int]) -> set[int]:
    """seq の最長増加部分列に入る位置の集合（並べ替えの検出用）。"""
    import bisect

    tails, tails_idx, prev = [], [], [-1] * len(seq)
    for i, v in enumerate(seq):
        k = bisect.bisect_left(tails, v)
        if k == len(tails):
            tails.append(v)
            tails_idx.append(i)
        else:
            tails[k], tails_idx[k] = v, i
        prev[i] = tails_idx[k - 1] if k else -1
    keep, i = set(), tails_idx[-1] if tails_idx else -1
    while i >= 0:
        keep.add(i)
        i = prev[i]
    return keep


def structure_notes(nb, assignment: Assignment) -> list[str]:
    """参照ノートブックと比べた備考: セルの削除・並べ替え、チェック呼び出しの変更、ch6 の差し替え。"""
    notes: list[str] = []
    ref = assignment.reference
    if ref is not None:
        sub = nb.cells
        by_id = {c.get("id"): j for j, c in enumerate(sub) if c.get("id")}
        by_src: dict[tuple[str, str], list[int]] = {}
        for j, c in enumerate(sub):
            by_src.setdefault((c.cell_type, c.source.strip()), []).append(j)
        used: set[int] = set()
        pairs, missing = [], []
        for i, rc in enumerate(ref.cells):
            if not rc.source.strip():
                continue
            j = by_id.get(rc.get("id"))
            if j is None or j in used or sub[j].cell_type != rc.cell_type:
                j = next((k for k in by_src.get((rc.cell_type, rc.source.strip()), []) if k not in used), None)
            if j is None and _cell_keys(rc):
                j = next((k for k, c in enumerate(sub) if k not in used and _cell_keys(rc) & _cell_keys(c)), None)
            if j is None:
                missing.append(i)
            else:
                used.add(j)
                pairs.append((i, j))
        if missing:
            first = ref.cells[missing[0]]
            more = f" ほか {len(missing) - 1} 個" if len(missing) > 1 else ""
            notes.append(f"演習ノートブックのセルが {len(missing)} 個見つかりません（削除?）: "
                         f"{missing[0] + 1} 番目「{_snippet(first)}」{more}。")
        order = [j for _, j in pairs]
        keep = _longest_increasing(order)
        moved = [pairs[k][0] for k in range(len(pairs)) if k not in keep]
        if moved:
            notes.append(f"セルの順番が演習ノートブックと違います（{len(moved)} 個が移動: "
                         f"演習ノートブックの {moved[0] + 1} 番目「{_snippet(ref.cells[moved[0]])}」など）。")
    if assignment.check_lines:
        present = {_norm_line(m.group(0)) for c in nb.cells if c.cell_type == "code"
                   for ln in _code_lines(c.source) for m in _CHECK_CALL.finditer(ln)}
        changed = [i for i in assignment.ids if assignment.check_lines.get(i) not in present]
        if changed:
            notes.append(f"チェックの呼び出しが書き換えられたか消されています（{', '.join(changed)}）。"
                         "採点は講座のチェックで行いました。")
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    if re.search(r"^\s*(ch6(\.\w+)*\s*=[^=]|(ch6\.)?(check|run_check)\s*=[^=]|def\s+(check|run_check)\b|"
                 r"import\s+[\w.]+\s+as\s+ch6\b|setattr\(\s*ch6\b)|sys\.modules\[\s*['\"]ch6",
                 code, re.M):
        notes.append("ch6 のチェックを置き換えるコードがあります（採点には影響しません）。")
    touched = [name for name, pattern in _TAMPER if re.search(pattern, code, re.M)]
    if touched:
        notes.append(f"採点に使う仕組み（{', '.join(touched)}）に触れるコードがあります。"
                     "採点は改ざんを検出するだけで防げないので、結果とコードを確かめてください。")
    return notes


# 学習者のコードは採点と同じカーネルで動く: これらに触れるコードは備考に書く（改ざんの証拠として）
_TAMPER = [
    ("IPython.display", r"\bIPython\.(core\.)?display\b|\bdisplay_pub\b"),
    ("sys.meta_path", r"\b(meta_path|path_hooks)\b"),
    ("builtins", r"\bbuiltins\b|__builtins__"),
    ("input_transformers", r"\binput_transformers"),
    ("events.register", r"\bevents\.register\b"),
    ("importlib", r"\bimportlib\b"),
    ("__ch6_grader__", r"__ch6_"),
]


# ------------------------------------------------------------------------------ カーネルでの実行

GRADER_PRELUDE = r'''
def __ch6_prelude(nonce, root, mime, user_ns):
    # 学習者のセルより先に実行する。表示の関数と nonce をここで閉じ込めるので、学習者のコードが
    # IPython.display.display や importlib を差し替えても、採点結果の表示には使われない
    import importlib
    import sys
    from IPython.display import display

    import_module, invalidate_caches, modules, path = (importlib.import_module, importlib.invalidate_caches,
                                                       sys.modules, sys.path)

    def emit(payload):
        display({mime: dict(payload, nonce=nonce)}, raw=True)

    def make_grader():
        # 学習者のセルのあとで: ch6 を差し替えられていても、インストール先から読み込み直す
        for name in [m for m in list(modules) if m == "ch6" or m.startswith("ch6.")]:
            del modules[name]
        path.insert(0, root)
        invalidate_caches()
        return import_module("ch6.grade").kernel_grader(emit, user_ns)

    return make_grader


__ch6_grader__ = __ch6_prelude(%(nonce)r, %(root)r, %(mime)r, globals())
del __ch6_prelude
'''

GRADER_SETUP = "__ch6_grader__ = __ch6_grader__()"


def kernel_grader(emit, user_ns: dict):
    """（採点用カーネルの中で）演習番号を受け取って採点し、結果を表示データで返す関数を作る。
    emit は学習者のセルより先に作った表示の関数（GRADER_PRELUDE）。"""
    from . import _core

    broken = load_checks()

    def grade(exercise_id: str) -> None:
        entry = _core.registry().get(exercise_id)
        if entry is None:
            why = broken.get(_check_module(exercise_id))
            message = (f"チェックを読み込めませんでした（{_check_module(exercise_id)}.py: {why}）。" if why
                       else _core.run_check(exercise_id, None).message)
            emit(dict(id=exercise_id, title="?", status="internal", message=message))
        elif entry.title not in user_ns:
            emit(dict(id=exercise_id, title=entry.title, status="missing", message=""))
        else:
            res = _core.run_check(exercise_id, user_ns[entry.title])
            emit(dict(id=exercise_id, title=entry.title, status=res.status, message=res.message))

    emit(dict(kind="setup", origin=_core.__file__))
    return grade


TIMEOUT_ENAME = "CH6GradeTimeout"


def _client_class():
    from nbclient import NotebookClient

    class GradeClient(NotebookClient):
        """学習者セルの出力は捨てる（エラーの名前だけ残す）。採点セルの出力は残す。"""

        n_learner = 0

        def output(self, outs, msg, display_id, cell_index):
            if cell_index < self.n_learner:
                if msg["msg_type"] != "error":
                    return None  # 学習者セルの出力は採点に使わない（大量の print でも膨らまない）
                msg["content"]["traceback"] = []
            return super().output(outs, msg, display_id, cell_index)

    return GradeClient


class _KernelLost(Exception):
    """カーネルが落ちた、または中断しても応答しない。"""


class _Run:
    """1 冊を 1 つのカーネルで実行する。"""

    def __init__(self, nb, n_learner: int, cwd: str, cfg: Config):
        self.cfg = cfg
        self.errors: dict[int, dict] = {}
        cls = _client_class()
        self.client = cls(
            nb, timeout=int(cfg.timeout), kernel_name="python3", allow_errors=True,
            interrupt_on_timeout=True, record_timing=False, startup_timeout=120,
            error_on_timeout={"ename": TIMEOUT_ENAME, "evalue": "", "traceback": []},
            resources={"metadata": {"path": cwd}}, on_cell_error=self._on_error,
        )
        self.client.n_learner = n_learner
        self.cwd = cwd

    def _on_error(self, cell, cell_index, execute_reply):
        content = execute_reply.get("content", {})
        self.errors[cell_index] = {"ename": content.get("ename", "Error"), "evalue": content.get("evalue", "")}

    async def start(self) -> None:
        c = self.client
        c.km = c.create_kernel_manager()
        # カーネル自身の警告（TCP の暗号化など）は表に関係ないので捨てる
        env = nbrun.kernel_env(self.cfg.devices)
        env["CH6_GRADING"] = "1"  # 学習者セルの ch6.check は何もしない（採点は採点セルでまとめて）
        await c.async_start_new_kernel(env=env, cwd=self.cwd,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        await c.async_start_new_kernel_client()

    async def stop(self) -> None:
        c = self.client
        try:
            if c.kc is not None:
                c.kc.stop_channels()
            if c.km is not None:
                if await c.km.is_alive():
                    await c.km.shutdown_kernel(now=True)
                res = c.km.cleanup_resources()
                if asyncio.iscoroutine(res):
                    await res
        except Exception:
            pass
        c.kc = c.km = None

    async def cell(self, index: int, timeout: float) -> str:
        """セルを 1 つ実行: "ok" / "error" / "timeout"（中断できた）。落ちた・固まったら _KernelLost。"""
        from nbclient.exceptions import DeadKernelError

        c = self.client
        c.timeout = max(1, math.ceil(timeout))
        self.errors.pop(index, None)
        try:
            await c.async_execute_cell(c.nb.cells[index], index, store_history=index < c.n_learner)
        except DeadKernelError:
            raise _KernelLost("dead") from None
        err = self.errors.get(index)
        if err and err["ename"] == TIMEOUT_ENAME:
            if not await self._responsive():
                raise _KernelLost("hung")
            return "timeout"
        return "error" if err else "ok"

    async def prelude(self, code: str, timeout: float) -> bool:
        """ノートブックのセルにせず（セルの番号を変えずに）コードを実行する。正常に終われば True。"""
        from nbclient.exceptions import DeadKernelError

        c = self.client
        c.timeout = max(1, math.ceil(timeout))
        c.shell_timeout_interval = 1
        try:
            msg_id = c.kc.execute(code, silent=True, store_history=False)
            reply = await c.async_wait_for_reply(msg_id)
        except DeadKernelError:
            raise _KernelLost("dead") from None
        return reply is not None and reply["content"].get("status") == "ok"

    async def _responsive(self) -> bool:
        """中断のあと、短いコードに応答するか。"""
        from nbclient.exceptions import DeadKernelError

        c = self.client
        c.timeout = max(1, math.ceil(self.cfg.grace))
        c.shell_timeout_interval = 1
        try:
            msg_id = c.kc.execute("pass", silent=True, store_history=False)
            return await c.async_wait_for_reply(msg_id) is not None
        except DeadKernelError:
            return False


def _payloads(cell, nonce: str) -> list[dict]:
    out = []
    for o in cell.get("outputs", []):
        data = o.get("data", {}).get(MIME) if o.get("output_type") == "display_data" else None
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except ValueError:
                data = None
        if isinstance(data, dict) and data.get("nonce") == nonce:
            out.append(data)
    return out


def _first_error(cell) -> str:
    for o in cell.get("outputs", []):
        if o.get("output_type") == "error":
            return f"{o.get('ename', 'Error')}: {o.get('evalue', '')}".strip(": ")
    return ""


def _one_line(text: str, limit: int = 80) -> str:
    from ._core import _one_line as one_line

    # SyntaxError の "(3730423741.py, line 2)" はカーネルが付けた一時ファイル名: 行番号だけ残す
    text = re.sub(r"\s*\((?:[^()]*[/\\])?\d+\.py, line (\d+)\)", r"（\1 行目）", str(text))
    return one_line(text, limit)


def _why_missing(nb, learner_cells, title, cell_errors, skip, stop_at, overran=None) -> str:
    """関数が見つからない理由を、def のあるセルの様子から推し量る。
    stop_at: 時間切れでこのセルから先は実行していない。overran: 実行中に制限時間を超えたセル。"""
    pattern = re.compile(rf"^\s*def\s+{re.escape(title)}\s*\(", re.M)
    cells = [i for i in learner_cells if pattern.search(nb.cells[i].source)]
    if not cells:
        return "そのセルを消したか、関数名を変えましたか？"
    j = cells[-1]
    if j in cell_errors:
        e = cell_errors[j]
        return f"上から {j + 1} 番目のそのセルでエラー: {_one_line(e['ename'] + ': ' + e['evalue'])}"
    if overran is not None and j == overran:
        return f"上から {j + 1} 番目のそのセルが制限時間を超えました（無限ループ?）"
    if stop_at is not None and j >= stop_at:
        return "制限時間内にそのセルまで実行されませんでした"
    if j in skip:
        return "そのセルでカーネルが停止しました"
    return f"上から {j + 1} 番目のセルで定義したあと、消したか上書きしていませんか？"


async def execute_and_check(nb, assignment: Assignment, cfg: Config, cwd: str) -> tuple[dict[str, ExerciseResult], list[str]]:
    """学習者のセルを実行し、採点セルで全演習をチェックする。(結果, 備考) を返す。"""
    nonce = secrets.token_hex(8)
    work = copy.deepcopy(nb)
    n_learner = len(work.cells)
    prelude = GRADER_PRELUDE % {"nonce": nonce, "root": str(PACKAGE_DIR.parent), "mime": MIME}
    work.cells.append(nbformat.v4.new_code_cell(GRADER_SETUP))
    for eid in assignment.ids:
        work.cells.append(nbformat.v4.new_code_cell(f"__ch6_grader__({eid!r})"))
    for cell in work.cells:
        cell.pop("id", None)
    learner_cells = [i for i in range(n_learner)
                     if work.cells[i].cell_type == "code" and work.cells[i].source.strip()]

    results: dict[str, ExerciseResult] = {}
    notes: list[str] = []
    skip: set[int] = set()
    stop_at: int | None = None  # 時間切れ: このセルから先は実行しない
    timed_out_cell: int | None = None
    overran: int | None = None  # 実行中に制限時間を超えたセル（def がそこにあれば「そのセルが時間切れ」）
    hung = False  # 中断しても応答せず、カーネルを替えた
    cell_errors: dict[int, dict] = {}
    not_graded_why: str | None = None  # 採点できなかった演習の理由（既定: カーネルが何度も停止した）

    # カーネルが落ちる・固まるたびに、原因のセルを飛ばして新しいカーネルでやり直す
    for _attempt in range(MAX_KERNELS):
        run = _Run(work, n_learner, cwd, cfg)
        current = None
        try:
            try:
                await run.start()
            except Exception as exc:
                notes.append(f"カーネルを起動できませんでした（{type(exc).__name__}）。")
                not_graded_why = "カーネルを起動できなかったため"
                break
            # 0. 学習者のセルより先に、表示の関数と nonce を閉じ込める（ノートブックの外で実行）
            current = n_learner
            await run.prelude(prelude, cfg.check_timeout)
            current = None
            # 1. 学習者のセルを上から（全体で cfg.timeout 秒まで）
            deadline = time.monotonic() + cfg.timeout
            cell_errors = {}
            for i in learner_cells:
                if i in skip:
                    continue
                if stop_at is not None and i >= stop_at:
                    break
                current = i
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    stop_at = timed_out_cell = i
                    break
                state = await run.cell(i, remaining)
                if state == "timeout":
                    stop_at = timed_out_cell = overran = i
                    break
                if state == "error":
                    tags = work.cells[i].metadata.get("tags", [])
                    if "raises-exception" not in tags:
                        cell_errors[i] = run.errors[i]
            # 2. 採点の準備: インストール先の ch6 を読み込み直す
            current = n_learner
            await run.cell(n_learner, cfg.check_timeout)
            current = None
            setup_out = _payloads(work.cells[n_learner], nonce)
            origin = next((p.get("origin") for p in setup_out if p.get("kind") == "setup"), None)
            if origin is None or not Path(origin).resolve().is_relative_to(PACKAGE_DIR):
                why = _first_error(work.cells[n_learner]) or f"読み込み先 {origin}"
                for eid in assignment.ids:
                    results.setdefault(eid, ExerciseResult(
                        eid, assignment.titles.get(eid, "?"), "internal",
                        f"採点用の ch6 を読み込めませんでした（{_one_line(why)}）。"))
                break
            # 3. 演習ごとに講座のチェック（1 つ cfg.check_timeout 秒まで）
            for k, eid in enumerate(assignment.ids):
                if eid in results:
                    continue
                index = n_learner + 1 + k
                title = assignment.titles.get(eid, "?")
                current = index
                state = await run.cell(index, cfg.check_timeout)
                current = None
                # 採点セルが最後まで実行されたときだけ（学習者の関数が途中で何か表示してから
                # 止まっても、それは結果にしない）
                got = ([p for p in _payloads(work.cells[index], nonce) if p.get("id") == eid]
                       if state == "ok" else [])
                if got:
                    p = got[-1]
                    results[eid] = ExerciseResult(eid, p.get("title", title), p.get("status", "internal"),
                                                  p.get("message", ""))
                elif state == "timeout":
                    results[eid] = ExerciseResult(eid, title, "timeout", (
                        f"{title}: チェックが {cfg.check_timeout:g} 秒以内に終わりませんでした"
                        "（関数が無限ループしていませんか？）。"))
                else:
                    why = _first_error(work.cells[index]) or "結果が返りませんでした"
                    results[eid] = ExerciseResult(eid, title, "internal",
                                                  f"{title}: 採点できませんでした（{_one_line(why)}）。")
            break
        except _KernelLost as lost:
            where = current
            if where is None:
                not_graded_why = "カーネルが停止したため"
                break
            if where >= n_learner:  # チェックの最中
                k = where - n_learner - 1
                if 0 <= k < len(assignment.ids):
                    eid = assignment.ids[k]
                    title = assignment.titles.get(eid, "?")
                    what = ("カーネルが停止しました（関数の中で os._exit やメモリ不足?）" if str(lost) == "dead"
                            else f"チェックが {cfg.check_timeout:g} 秒以内に終わらず、中断もできませんでした")
                    results[eid] = ExerciseResult(eid, title, "crash" if str(lost) == "dead" else "timeout",
                                                  f"{title}: {what}。")
                else:
                    if str(lost) == "dead":
                        notes.append("採点の準備中にカーネルが停止しました。")
                        not_graded_why = "採点の準備中にカーネルが停止したため"
                    else:
                        notes.append("採点の準備が制限時間内に終わらず、中断もできませんでした。")
                        not_graded_why = "採点の準備中にカーネルが応答しなくなったため"
                    break
            elif str(lost) == "dead":
                skip.add(where)
                notes.append(f"上から {where + 1} 番目のセルでカーネルが停止しました（os._exit やメモリ不足など）。"
                             "新しいカーネルでそのセルを飛ばして採点しました。")
            else:
                stop_at = timed_out_cell = overran = where
                hung = True
                notes.append(f"上から {where + 1} 番目のセルが制限時間を超え、中断もできませんでした。"
                             "新しいカーネルでそのセルの手前までを実行して採点しました。")
        finally:
            await run.stop()

    if timed_out_cell is not None and not hung:
        notes.insert(0, f"上から {timed_out_cell + 1} 番目のセルで制限時間 {cfg.timeout:g} 秒を超えました"
                        "（無限ループ?）。そのセル以降は実行せずに採点しました。")
    if cell_errors:
        first = min(cell_errors)
        e = cell_errors[first]
        more = f"（ほか {len(cell_errors) - 1} セルでも）" if len(cell_errors) > 1 else ""
        notes.append(f"上から {first + 1} 番目のセルでエラー: {_one_line(e['ename'] + ': ' + e['evalue'])}{more}")

    for eid in assignment.ids:
        title = assignment.titles.get(eid, "?")
        r = results.get(eid)
        if r is None:
            why = not_graded_why or "カーネルが何度も停止したため"  # やり直しを使い切った
            results[eid] = ExerciseResult(eid, title, "not_graded", f"{title}: {why}採点できませんでした。")
        elif r.status == "missing":
            why = _why_missing(work, learner_cells, title, cell_errors, skip, stop_at, overran)
            r.message = f"{title}: 関数 {title} が定義されていません（{why}）。"
    return {eid: results[eid] for eid in assignment.ids}, notes


# ------------------------------------------------------------------------------ 採点の全体

def collect(paths: list[str | Path]) -> list[Path]:
    """ファイルはそのまま、フォルダは中の *.ipynb（隠しファイルとチェックポイントを除く）。"""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(q for q in p.rglob("*.ipynb") if q.is_file() and not any(
                part.startswith(".") for part in q.relative_to(p).parts))
        else:
            out.append(p)
    seen, uniq = set(), []
    for p in out:
        if p.resolve() not in seen:
            seen.add(p.resolve())
            uniq.append(p)
    return uniq


async def grade_one(path: Path, assignments: dict[str, Assignment], cfg: Config,
                    forced: str | None = None) -> Row:
    start = time.monotonic()
    nb, problem = read_submission(path)
    assignment = identify(path, nb, assignments, forced)
    row = Row(learner_name(path, assignment.name if assignment else None), str(path),
              assignment.name if assignment else None)
    try:
        if assignment is None:
            row.notes.append(problem or "どの演習ノートブックか判別できません（--notebook で指定してください）。")
        elif problem:
            row.notes.append(problem)
            row.exercises = {i: ExerciseResult(i, assignment.titles.get(i, "?"), "not_graded", problem)
                             for i in assignment.ids}
        else:
            notes = structure_notes(nb, assignment)
            with tempfile.TemporaryDirectory(prefix="ch6-grade-") as cwd:
                row.exercises, run_notes = await execute_and_check(nb, assignment, cfg, cwd)
            row.notes = run_notes + notes
    except Exception as exc:  # 採点ツール自身の不具合でも、ほかの提出物は採点を続ける
        row.notes.append(f"採点ツール内部のエラー: {type(exc).__name__}: {_one_line(exc)}")
        if assignment is not None:
            for i in assignment.ids:
                row.exercises.setdefault(i, ExerciseResult(i, assignment.titles.get(i, "?"), "not_graded",
                                                           "採点ツール内部のエラーで採点できませんでした。"))
    row.seconds = time.monotonic() - start
    return row


async def grade_all(paths: list[Path], assignments: dict[str, Assignment], cfg: Config,
                    forced: str | None = None, progress=None) -> list[Row]:
    sem = asyncio.Semaphore(max(1, cfg.jobs))
    done = 0

    async def one(p: Path) -> Row:
        nonlocal done
        async with sem:
            row = await grade_one(p, assignments, cfg, forced)
        done += 1
        if progress:
            progress(f"[{done}/{len(paths)}] {row.notebook or '?'} {row.learner}: "
                     f"{row.score}/{row.max_score} ({row.seconds:.1f} s)")
        return row

    rows = await asyncio.gather(*(one(p) for p in paths))
    _disambiguate(rows)
    return sorted(rows, key=lambda r: (r.notebook or "~", r.learner, r.file))


def _disambiguate(rows: list[Row]) -> None:
    """同じ名前が重なったら、フォルダ名で区別する（例: nbgrader の submitted/学生/課題/X.ipynb）。"""
    seen: dict[tuple, list[Row]] = {}
    for r in rows:
        seen.setdefault((r.notebook, r.learner), []).append(r)
    for group in seen.values():
        if len(group) < 2:
            continue
        folders = [list(reversed(Path(r.file).resolve().parent.parts)) for r in group]
        for depth in range(max(map(len, folders))):
            names = [f[depth] if depth < len(f) else "" for f in folders]
            if len(set(names)) == len(names) and all(names):
                for r, n in zip(group, names):
                    r.learner = n if r.learner == Path(r.file).parent.name else f"{r.learner} ({n})"
                break
        else:
            for r in group:
                r.learner = f"{r.learner} ({r.file})"


# ------------------------------------------------------------------------------ 表示と書き出し

def _groups(rows: list[Row]) -> dict[str | None, list[Row]]:
    out: dict[str | None, list[Row]] = {}
    for r in rows:
        out.setdefault(r.notebook, []).append(r)
    return out


def _console(console=None):
    import os

    from rich.console import Console

    if console is not None:
        return console
    # 端末でないとき（ファイルへのリダイレクトなど）は 80 桁に詰めず、広めに書く
    wide = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    return Console(width=160) if wide else Console()


def _plain(mark: str) -> str:
    return mark.replace("\ufe0f", "")


def render(rows: list[Row], assignments: dict[str, Assignment], console=None, details: bool = False) -> None:
    from rich.table import Table

    console = _console(console)
    for name, group in _groups(rows).items():
        if name is None:
            console.print("[bold]採点できなかったファイル / not graded[/bold]")
            for r in group:
                console.print(f"⚠️ {r.file}: {' '.join(r.notes)}", markup=False, highlight=False)
            console.print()
            continue
        a = assignments[name]
        table = Table(title=f"{name}（{len(group)} 件）", title_justify="left")
        table.add_column("学習者 / learner", no_wrap=True)
        for eid in a.ids:
            table.add_column(eid, justify="center", no_wrap=True)
        table.add_column("合計 / total", justify="right", no_wrap=True)
        table.add_column("備考 / notes", overflow="fold", ratio=1)
        for r in group:
            # ⚠️ の異体字セレクタ（U+FE0F）は端末によって幅が変わり、列がずれるので表では外す
            marks = [_plain(r.exercises[e].mark) if e in r.exercises else "" for e in a.ids]
            table.add_row(r.learner, *marks, f"{r.score}/{r.max_score}", "\n".join(r.notes))
        console.print(table)
        passed = [sum(e in r.exercises and r.exercises[e].status == "pass" for r in group) for e in a.ids]
        console.print("演習 / exercises: " + ", ".join(f"{e} {a.titles.get(e, '?')}（正解 {n}/{len(group)}）"
                                                   for e, n in zip(a.ids, passed)), highlight=False)
        console.print("✅ 正解  ❌ 不正解・エラー・時間切れ  ⏳ 未解答  ⚠ 採点できない（備考を参照）\n")
        if details:
            for r in group:
                bad = [x for x in r.exercises.values() if x.status != "pass"]
                if bad:
                    console.print(r.learner, style="bold", markup=False, highlight=False)
                    if all(x.status == "not_graded" and x.message == bad[0].message for x in bad):
                        bad = bad[:1]  # 読めないファイル: 理由は 1 つ
                        console.print(f"  ⚠️ {bad[0].message}", markup=False, highlight=False)
                        continue
                    for x in bad:
                        console.print("  " + x.line(), markup=False, highlight=False)
            console.print()


def render_self_check(row: Row, console=None) -> None:
    console = _console(console)
    console.print(f"{row.file}（{row.notebook or '?'}）", markup=False, highlight=False)
    results = list(row.exercises.values())
    if results and all(x.status == "not_graded" and x.message == results[0].message for x in results):
        results = []  # 読めないファイル: 理由は備考に 1 回だけ
    for x in results:
        console.print(x.line(), markup=False, highlight=False)
    for n in row.notes:
        console.print(f"備考: {n}", markup=False, highlight=False)
    console.print(f"合計 / total: {row.score}/{row.max_score}", highlight=False)


def to_json(rows: list[Row]) -> dict[str, Any]:
    return {"rows": [r.to_dict() for r in rows]}


def write_csv(rows: list[Row], path: Path) -> None:
    """表と同じ中身: 演習の列は印と状態（例 "✅ pass"）、見出しは日本語と英語。"""
    ids: list[str] = []
    for r in rows:
        ids += [i for i in r.exercises if i not in ids]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["学習者 / learner", "ファイル / file", "ノートブック / notebook", "得点 / score",
                "満点 / max_score"]
               + [c for i in ids for c in (i, f"{i} メッセージ / message")] + ["備考 / notes"])
    for r in rows:
        cells = []
        for i in ids:
            x = r.exercises.get(i)
            cells += [f"{x.mark} {x.status}", x.message] if x else ["", ""]
        w.writerow([r.learner, r.file, r.notebook or "", r.score, r.max_score] + cells + [" ".join(r.notes)])
    # Excel でも文字化けしないよう BOM 付き UTF-8
    path.write_text(buf.getvalue(), encoding="utf-8-sig")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ch6-grade", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", help="提出されたノートブック、またはそれを入れたフォルダ")
    ap.add_argument("--csv", type=Path, help="結果を CSV に書き出す")
    ap.add_argument("--json", type=Path, help="結果を JSON に書き出す")
    ap.add_argument("--timeout", type=float, default=Config.timeout,
                    help="1 冊の学習者セル全体の制限時間（秒、既定 %(default)g）")
    ap.add_argument("--check-timeout", type=float, default=Config.check_timeout,
                    help="チェック 1 つの制限時間（秒、既定 %(default)g）")
    ap.add_argument("--jobs", type=int, default=Config.jobs, help="同時に動かすカーネルの数（既定 %(default)d）")
    ap.add_argument("--devices", type=int, default=nbrun.DEFAULT_DEVICES,
                    help="カーネルの模擬 CPU デバイス数（既定 %(default)d）")
    ap.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE,
                    help="配った演習ノートブックのフォルダ（既定: リポジトリの exercises/）")
    ap.add_argument("--notebook", help="すべての提出物をこの演習ノートブック（例 6_1_vmap）として採点する")
    ap.add_argument("--details", action="store_true", help="表のあとに、正解でなかった演習のメッセージを並べる")
    ap.add_argument("--quiet", action="store_true", help="進み具合を表示しない")
    args = ap.parse_args(argv)

    missing = [p for p in args.paths if not Path(p).exists()]
    if missing:
        print(f"見つかりません / not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    for option, out in (("--csv", args.csv), ("--json", args.json)):  # 長い採点のあとで書けないと困る
        if out is not None and not out.resolve().parent.is_dir():
            print(f"{option} {out}: 書き出し先のフォルダがありません / output folder does not exist: "
                  f"{out.parent}", file=sys.stderr)
            return 2
    paths = collect(args.paths)
    if not paths:
        print("採点するノートブックが見つかりません / no notebooks found", file=sys.stderr)
        return 2
    titles = _registry_titles()
    for mod, why in load_checks().items():
        print(f"警告: ch6/checks/{mod}.py を読み込めません（{why}）。この節の演習は採点できません。", file=sys.stderr)
    assignments = load_assignments(args.reference, titles)
    if args.notebook and args.notebook not in assignments and not any(
            _section_of(n) == _section_of(args.notebook) for n in assignments):
        print(f"--notebook {args.notebook}: 知らない演習ノートブックです（あるのは {', '.join(assignments)}）",
              file=sys.stderr)
        return 2
    cfg = Config(timeout=args.timeout, check_timeout=args.check_timeout, devices=args.devices, jobs=args.jobs)
    progress = None if args.quiet or len(paths) == 1 else (lambda s: print(s, file=sys.stderr, flush=True))
    start = time.monotonic()
    try:
        rows = asyncio.run(grade_all(paths, assignments, cfg, args.notebook, progress))
    except KeyboardInterrupt:  # カーネルは各タスクの finally で止めてある
        print("中断しました / interrupted", file=sys.stderr)
        return 130
    if len(paths) == 1 and rows[0].notebook is not None:
        render_self_check(rows[0])
    else:
        render(rows, assignments, details=args.details)
    if not args.quiet and len(paths) > 1:
        print(f"{len(rows)} 件を {time.monotonic() - start:.1f} 秒で採点しました（--jobs {cfg.jobs}）",
              file=sys.stderr)
    if args.csv:
        write_csv(rows, args.csv)
    if args.json:
        args.json.write_text(json.dumps(to_json(rows), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
