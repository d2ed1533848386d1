"""節ごとのチェック。ここに置いた節のパッケージ（``s6_*``、演習ごとに 1 モジュール）は自動で読み込まれます。

2 つの節が使う道具は節の外に 1 つだけ置きます（``clipping``: 6.1-4 と 6.4-2 の DP-SGD の参照と誤りの値、``sgd_update``: 6.2-2 と 6.3c-1 の SGD の更新の誤りの見分け、``chips``: 6.7 と 6.8b の隠しチップの行）。

節のパッケージの ``__init__.py`` は、モジュールを名前で並べません。docstring のあとに次の 2 行だけを書きます::

    from .. import load_section
    __all__ = load_section(__name__, globals())

:func:`load_section` がその節のモジュールをすべて読み込み（読み込むと ``@exercise`` が演習を登録します）、
各モジュールが自分で定義した公開名（``def`` / ``class`` / 代入、``_`` で始まらないもの）を節の名前にします。
ですから新しい演習はモジュールを 1 つ置くだけで登録され、``ch6.checks.s6_N.check_…`` でも呼べます。
2 つのモジュールが同じ公開名を定義したとき（``reference``、``cases`` など）は、どちらとも決められないので
節の名前にはせず、``ch6.checks.s6_N.モジュール名.名前`` で使います。
"""
from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

__all__ = ["load_section", "defined_names"]


def defined_names(module: ModuleType) -> list[str]:
    """module のソースが最上位で定義する公開名（def、class、代入の左辺。import した名前は含めない）。"""
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names.extend(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return [n for n in dict.fromkeys(names) if not n.startswith("_")]


def load_section(package: str, namespace: dict) -> list[str]:
    """節のパッケージ ``package`` のモジュールをすべて（名前の順に）読み込み、その公開名を namespace に入れる。

    返すのは ``__all__``: モジュール名と、ただ 1 つのモジュールが定義した公開名（名前の順）。
    """
    path = namespace["__path__"]
    modules = [importlib.import_module(f"{package}.{m.name}")
               for m in sorted(pkgutil.iter_modules(path), key=lambda m: m.name) if not m.name.startswith("_")]
    owners: dict[str, list[ModuleType]] = {}
    for mod in modules:
        for name in defined_names(mod):
            owners.setdefault(name, []).append(mod)
    exported = [mod.__name__.rsplit(".", 1)[1] for mod in modules]
    for mod in modules:
        namespace[mod.__name__.rsplit(".", 1)[1]] = mod
    for name, (mod, *others) in sorted(owners.items()):
        if not others and name not in exported:
            namespace[name] = getattr(mod, name)
            exported.append(name)
    return sorted(exported)
