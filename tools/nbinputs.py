"""ノートブックの出力を決める ch6 のファイル（入力）と、最後に実行したときの入力の台帳。

tools/recipe.py（make notebook / make exercise / make depends）と tools/twins.py（実行したときに台帳を書く）の
両方が使います（この 2 つは互いを読み込まず、どちらもここを読み込みます）。

入力の数え方（:func:`inputs`）:

- ノートブックのセルが読み込む ch6 のモジュール（``import ch6.x``・``from ch6 import x``・``ch6.x`` という属性の
  使い方: ``ch6.__getattr__`` が初めて使われたときに読み込む）と、どのノートブックにも効くモジュール（``ALWAYS``）;
- それらが読み込むモジュール。絶対の import も相対の import（``from . import x``、``from ..checking import y``、
  ``from ... import serving``）も、関数の中の import も。``ch6.a.b`` を読み込めば ``ch6/a/__init__.py`` も。
  ``load_section`` を呼ぶパッケージ（チェックの節）は、そのフォルダのすべてのモジュール;
- モジュールが読むデータのファイル（拡張子によらない）: ファイルを読むモジュール（``importlib.resources`` か
  ``__file__`` を使うもの）のコードにある文字列のうち、``.`` か ``/`` を含み、そのモジュールのフォルダ（なければ
  ``ch6/``）にあるファイルかフォルダを指すもの（``"nbval_sanitize.cfg"``、``"data/traces"`` の下のすべて、
  ``"corpus.txt"``、``"worker.py"``）と、``python -m`` で起動するモジュールの名前（``"ch6.multihost.train"``）;
- 解答なら、その節のチェック（``ch6/checks/s6_N/`` とそれが読み込むもの）と ``ch6/checking.py``。
"""
from __future__ import annotations

import ast
import fcntl
import hashlib
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# どのノートブックの出力にも効くモジュール（最初のセルの ch6.setup()、表示、チェックの実行）
ALWAYS = ("ch6/__init__.py", "ch6/env.py", "ch6/runtime.py", "ch6/show.py", "ch6/_core.py")
# ノートブックを最後に実行したとき、その出力を決める ch6 のファイルがどうだったか（twins.execute が書く）。
# make quick の tests/tools/test_fresh_outputs.py が今のファイルと比べ、古い出力（数値・図）を名指しする
LEDGER = ROOT / "tools" / "executed_inputs.json"


def section_of(name: str) -> str:
    """"6_3a_sharding" -> "s6_3a"（ch6/checks と tests/checks のフォルダ名）。"""
    m = re.match(r"^(\d+)_(\d+[a-z]?)_", name)
    if not m:
        raise SystemExit(f"{name}: a notebook name looks like 6_2_pmap")
    return f"s{m.group(1)}_{m.group(2)}"


def cell_sources(text: str) -> list:
    nb = json.loads(text)
    return [(c["cell_type"], "".join(c["source"]) if isinstance(c["source"], list) else c["source"],
             c.get("metadata", {}).get("tags", [])) for c in nb["cells"]]


# ------------------------------------------------------------------ モジュールの名前とファイル

def module_file(name: str) -> Path | None:
    """"ch6.a.b" → ch6/a/b.py か ch6/a/b/__init__.py（なければ None）。"""
    if name != "ch6" and not name.startswith("ch6."):
        return None
    base = ROOT.joinpath(*name.split("."))
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return base.with_suffix(".py") if base.with_suffix(".py").is_file() else None


def _with_parents(name: str) -> list[Path]:
    """ch6.a.b を読み込むと実行されるファイル: ch6/__init__.py、ch6/a/__init__.py、ch6/a/b.py。"""
    parts = name.split(".")
    found = (module_file(".".join(parts[:k])) for k in range(1, len(parts) + 1))
    return [f for f in found if f is not None]


def _package_of(path: Path) -> str:
    """ch6/a/b.py → "ch6.a"、ch6/a/__init__.py → "ch6.a"。"""
    return ".".join(path.parent.relative_to(ROOT).parts)


def _resolve(node: ast.ImportFrom, package: str) -> str | None:
    if not node.level:
        return node.module
    parts = package.split(".") if package else []
    if node.level - 1 > len(parts) or (node.level - 1 == len(parts) and not node.module):
        return None
    base = parts[:len(parts) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _attribute_chain(node: ast.Attribute) -> str | None:
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(names)]) if isinstance(node, ast.Name) and node.id == "ch6" else None


def _deepest_module(dotted: str) -> str | None:
    parts = dotted.split(".")
    for k in range(len(parts), 1, -1):
        if module_file(".".join(parts[:k])):
            return ".".join(parts[:k])
    return None


_LINE_MAGIC = re.compile(r"^([ \t]*)[%!]", re.M)


def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(_LINE_MAGIC.sub(r"\1pass  #", source))
    except SyntaxError:
        return None


def _edges(tree: ast.AST, package: str) -> tuple[set[str], set[str]]:
    """(読み込むモジュールの名前, コードにある文字列)。"""
    modules: set[str] = set()
    strings: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, package)
            if base:
                modules.add(base)
                modules |= {f"{base}.{a.name}" for a in node.names if a.name != "*"}
        elif isinstance(node, ast.Attribute):
            chain = _attribute_chain(node)
            if chain:
                modules.add(chain)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 200:
            strings.add(node.value)
    return modules, strings


_READS_FILES = re.compile(r"\bresources\b|__file__")
_PATHLIKE = re.compile(r"^[\w.-]+(/[\w.-]+)*/?$")
_CACHE: dict[tuple, tuple[set[Path], set[Path]]] = {}


def _data_files(target: Path) -> set[Path]:
    if target.is_file():
        return {target}
    return {p for p in target.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def file_edges(path: Path) -> tuple[set[Path], set[Path]]:
    """path（ch6 の .py）が読み込むモジュールのファイルと、読むデータのファイル（ノートブックなら
    :func:`source_edges`）。中身のハッシュごとに覚えておく。"""
    text = path.read_text(encoding="utf-8")
    key = (str(path), hashlib.sha256(text.encode()).hexdigest())
    if key not in _CACHE:
        _CACHE[key] = _source_edges(text, _package_of(path), path.parent, reads_files=bool(_READS_FILES.search(text)))
    return _CACHE[key]


def _source_edges(text: str, package: str, folder: Path | None, reads_files: bool) -> tuple[set[Path], set[Path]]:
    tree = _parse(text)
    if tree is None:  # 読めないソース: 絶対の import だけを行で拾う
        names = set(re.findall(r"^[ \t]*(?:from|import)[ \t]+(ch6(?:\.\w+)*)", text, re.M))
        strings: set[str] = set()
    else:
        names, strings = _edges(tree, package)
    mods: set[Path] = set()
    for name in names:
        deepest = _deepest_module(name) if name.startswith("ch6.") else ("ch6" if name == "ch6" else None)
        if deepest:
            mods.update(_with_parents(deepest))
    data: set[Path] = set()
    for s in strings:
        if re.fullmatch(r"ch6(\.\w+)+", s):  # python -m や import_module で読み込むモジュール（パッケージでなく）
            f = module_file(s)
            if f is not None and f.name != "__init__.py":
                mods.update(_with_parents(s))
        elif reads_files and folder is not None and ("." in s or "/" in s) and _PATHLIKE.match(s) \
                and s.strip("./") and ".." not in s:
            for base in (folder, ROOT / "ch6"):
                target = base / s
                if target.exists() and target.resolve().is_relative_to(ROOT / "ch6"):
                    data |= _data_files(target)
                    break
    return mods, data


_LOADS_SECTION = re.compile(r"^__all__ = load_section\(__name__", re.M)


def _sections_modules(init: Path) -> set[Path]:
    """load_section を呼ぶパッケージ（チェックの節）は、フォルダのすべてのモジュールを読み込む。"""
    if init.name == "__init__.py" and _LOADS_SECTION.search(init.read_text(encoding="utf-8")):
        return set(init.parent.glob("*.py"))
    return set()


def closure(start: set[Path]) -> set[Path]:
    """start のファイルと、それらが（間接にも）読み込むモジュール・読むデータのファイル。"""
    seen: set[Path] = set()
    todo = list(start)
    while todo:
        f = todo.pop()
        if f in seen or not f.exists():
            continue
        seen.add(f)
        if f.suffix == ".py":
            mods, data = file_edges(f)
            todo += [*mods, *data, *_sections_modules(f)]
    return seen


def library_inputs(cells: list[str]) -> set[Path]:
    """ノートブックのコードセルが（直接または間接に）読み込む ch6 のファイル。変わると出力が変わりうる。"""
    mods: set[Path] = set()
    for source in cells:  # セルごとに（1 つのセルが読めなくても、ほかのセルの import は拾う）
        key = (str(ROOT), hashlib.sha256(source.encode()).hexdigest())
        if key not in _CACHE:
            _CACHE[key] = _source_edges(source, "", None, reads_files=False)
        mods |= _CACHE[key][0]
    return closure(mods | {ROOT / p for p in ALWAYS})


def inputs(nb: Path) -> list[Path]:
    """nb の出力を決めるファイル: ノートブックが読み込む ch6 のモジュール（間接のもの、読むデータも）。
    解答なら、その節のチェックとそれが読み込むもの、ch6/checking.py も（チェックの言葉が出力に出る）。"""
    text = nb.read_text(encoding="utf-8") if nb.exists() else ""
    code = [src for kind, src, _ in cell_sources(text) if kind == "code"] if text else []
    out = library_inputs(code)
    if nb.parent.name == "solutions":
        checks = ROOT / "ch6" / "checks" / section_of(nb.stem)
        out |= closure(set(checks.glob("*.py")) | {ROOT / "ch6" / "checking.py"})
    return sorted(out)


# ------------------------------------------------------------------ 台帳

# 台帳の行に、どの数え方で入力を数えたかを書く（ファイルの名前とぶつからないキー）。この印のない行は、
# 相対の import・データのファイルを数える前の数え方（legacy_inputs）で書かれた行です
RESOLVER_KEY, RESOLVER = "#inputs", "2"


def input_hashes(nb: Path, files=None) -> dict[str, str]:
    """nb の出力を決める ch6 のファイル（inputs）ごとの短いハッシュ。"""
    return {p.relative_to(ROOT).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()[:12]
            for p in (inputs(nb) if files is None else files) if p.exists()}


def ledger_entry(nb: Path) -> dict[str, str]:
    """台帳に書く nb の行: 数え方の印と、入力ごとのハッシュ。"""
    return {RESOLVER_KEY: RESOLVER, **input_hashes(nb)}


def ledger_key(nb: Path) -> str:
    return nb.resolve().relative_to(ROOT).with_suffix(".ipynb").as_posix()


def read_ledger() -> dict:
    return json.loads(LEDGER.read_text(encoding="utf-8")) if LEDGER.exists() else {}


def update_ledger(entries: dict[str, dict[str, str]]) -> None:
    """台帳の行を書き換える（同時に実行するプロセスがあっても、ほかの行は消さない）。"""
    with open(LEDGER.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ledger = read_ledger()
        ledger.update(entries)
        LEDGER.write_text(json.dumps(dict(sorted(ledger.items())), indent=1, ensure_ascii=False) + "\n",
                          encoding="utf-8")


def record_inputs(nb: Path) -> None:
    """実行したばかりの nb の入力を台帳に書く。"""
    update_ledger({ledger_key(nb): ledger_entry(nb)})


def _compare(now: dict[str, str], then: dict[str, str]) -> dict[str, str]:
    out = {f: "changed" for f in now if f in then and now[f] != then[f]}
    out |= {f: "new" for f in now if f not in then}
    out |= {f: "gone" for f in then if f not in now}
    return out


def stale_inputs(nb: Path) -> dict[str, str]:
    """最後の実行のあとで変わった（増えた・消えた）入力: {ファイル: "changed" | "new" | "gone" | "never"}。

    印のない（古い数え方で書いた）行は、古い数え方の入力と比べます: その数え方が見なかった入力（相対の import
    でだけ読み込むモジュール、データのファイル）は「まだ記録していない」（:func:`unrecorded_inputs`）で、
    古いとは数えません。次に実行したときに、すべての入力が記録されます。"""
    then = read_ledger().get(ledger_key(nb))
    if then is None:
        return {ledger_key(nb): "never"}
    then = dict(then)
    if then.pop(RESOLVER_KEY, None) == RESOLVER:
        return _compare(input_hashes(nb), then)
    return _compare(input_hashes(nb, legacy_inputs(nb)), then)


def unrecorded_inputs(nb: Path) -> list[str]:
    """台帳の nb の行が古い数え方で書かれていて、まだハッシュを持たない入力（次の実行で記録される）。"""
    then = read_ledger().get(ledger_key(nb))
    if then is None or then.get(RESOLVER_KEY) == RESOLVER:
        return []
    return sorted(set(input_hashes(nb)) - set(then) - set(input_hashes(nb, legacy_inputs(nb))))


# ------------------------------------------------------------------ 古い数え方（印のない行を読むためだけ）
# 絶対の ``ch6.`` の import だけをたどり、ch6 の下のパッケージはフォルダごと、データは .txt/.json/.toml だけ。
# 台帳のどの行にも印が付いたら（すべてのノートブックを一度実行し直したら）、この節と上の分かれ道は消せます

_LEGACY_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(ch6(?:\.\w+)*)[ \t]+import[ \t]+(\([^)]*\)|[\w \t,]+)"
                            r"|import[ \t]+(ch6(?:\.\w+)*))", re.M)


def _legacy_module_files(name: str) -> list[Path]:
    base = ROOT.joinpath(*name.split("."))
    if base.is_dir():
        top = base == ROOT / "ch6"
        return sorted(p for p in base.iterdir() if p.is_file() and (
            p.name == "__init__.py" or p.suffix in (".txt", ".json", ".toml") or (p.suffix == ".py" and not top)))
    return [base.with_suffix(".py")] if base.with_suffix(".py").exists() else []


def _legacy_imports(text: str) -> set[str]:
    names = set()
    for m in _LEGACY_IMPORT.finditer(text):
        if m.group(3):
            names.add(m.group(3))
            continue
        names.add(m.group(1))
        for item in m.group(2).replace("(", " ").replace(")", " ").split(","):
            word = item.split(" as ")[0].strip()
            if word:
                names.add(f"{m.group(1)}.{word}")
    return names


def legacy_inputs(nb: Path) -> list[Path]:
    """相対の import もデータのファイルも数えなかったころの :func:`inputs`（印のない台帳の行と比べるため）。"""
    text = nb.read_text(encoding="utf-8") if nb.exists() else ""
    seen: set[Path] = set()
    todo = sorted(_legacy_imports("\n".join(src for _, src, _ in cell_sources(text)) if text else ""))
    todo += [p[:-3].replace("/", ".") for p in ALWAYS]
    while todo:
        for f in _legacy_module_files(todo.pop()):
            if f in seen:
                continue
            seen.add(f)
            if f.suffix == ".py":
                todo.extend(sorted(_legacy_imports(f.read_text(encoding="utf-8"))))
                if f.parent != ROOT / "ch6":
                    todo.append(f.parent.relative_to(ROOT).as_posix().replace("/", "."))
    if nb.parent.name == "solutions":
        checks = ROOT / "ch6" / "checks" / section_of(nb.stem)
        seen |= set(checks.glob("*.py")) | {ROOT / "ch6" / "checking.py"}
    return sorted(seen)
