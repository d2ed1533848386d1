"""この ``ch6`` がどの版か（先生・作者の完全版か、学習者版か）と、学習者版でチェックを学習者のコードから隠す見張り。

学習者版は ``make learner-edition``（``tools/learner_edition.py``）が作る配布物で、その wheel には
``ch6/edition.json``（``{"edition": "learner", ...}``）が入ります。このリポジトリ・Colab が入れるパッケージ
（完全版）にはありません。完全版では、このモジュールは何もしません。

**なぜ同じプロセスの見張りか。** チェック（``ch6.checks``）は、隠し入力での期待値を参照の実装で計算します。
つまり参照の答えを含みます。一方で ``ch6.check`` は学習者のカーネルの中で、学習者の関数をそのまま呼びます。
チェックを別のプロセスへ移すと、学習者の関数を値で送る必要があります。ノートブックの変数を閉じ込めた関数、
メッシュやデバイス、学習者の名前空間を見るチェック（6.6-3）を、73 問すべてで同じ判定に保つのは難しくなります。
TPU ではチップを持てるプロセスも 1 つだけです。そこで判定は今のまま同じプロセスで行い、学習者のコードからの
**読み込み** だけを止めます。

学習者版で ``import ch6`` のときに :func:`install` が ``sys.meta_path`` の先頭に見張りを入れます。見張りは、ch6 の外の
コード（ノートブックのセル、学習者のモジュール、``runpy`` など）が ``ch6.checks…`` を読み込もうとすると、日本語
1 行の :class:`ChecksHidden`（ImportError）で止めます。``import``・``from … import``・``from ch6 import checks``・
``ch6.checks``・``importlib.import_module``・``importlib.util.find_spec`` のどれでも同じです。見張りが働くのは、
そのモジュールが ``sys.modules`` にないときです。そこで、チェックを読み込んだ後は :func:`checks_open` の出口で
``ch6.checks…`` のモジュールを ``sys.modules`` と ``ch6`` の属性から外し、ここに預けます。ch6 の中のコード
（``ch6._core``、``ch6.grading``、チェック自身）が読み込むときだけ、見張りは預けたモジュールを返します。
``ch6.check``・``ch6.run_check``・``ch6.registry`` は :func:`checks_open` の中で動くので、判定は完全版と同じです。
``builtins.__import__`` は差し替えません（採点が差し替えを改ざんとして調べるので）。

演習がそのまま使うモデル（6.3a の ``gated_mlp``）は答えを含まない ``ch6.models`` にあり、ノートブックはそこから
読み込みます。

**防がないこと。** 学習者は自分のディスクのファイルを読めます（``.venv`` の中の ``ch6/checks/`` や wheel）。
同じプロセスにある以上、``ch6.registry()`` の関数の ``__globals__``、``gc``、見張りそのものを外すコードなど、
意図して掘り出す道は残ります。これは読み込みではなく改ざんで、先生の採点（``ch6-grade``）が見つけて知らせる側です。
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["PROTECTED", "MARKER", "ChecksHidden", "info", "edition", "is_learner", "install",
           "active", "checks_open"]

PROTECTED = "ch6.checks"
MARKER = Path(__file__).with_name("edition.json")  # 学習者版の wheel だけにある
_GUARD = "_ch6_learner_guard"  # 見張りの部品につける印（読み込み直した ch6 が前の見張りを外せるように）

_active = False
_stash: dict[str, ModuleType] = {}


class ChecksHidden(ImportError):
    """学習者版で、学習者のコードがチェック（参照の答え）を読み込もうとした。"""


def info() -> dict:
    """版の情報。学習者版なら edition.json の中身、完全版なら ``{"edition": "full"}``。"""
    if MARKER.is_file():
        return json.loads(MARKER.read_text(encoding="utf-8"))
    return {"edition": "full"}


def edition() -> str:
    """"learner"（学習者版）か "full"（完全版）。"""
    return str(info().get("edition", "full"))


def is_learner() -> bool:
    return edition() == "learner"


def active() -> bool:
    """このプロセスで見張りが動いているか。"""
    return _active


def _protected(name: str) -> bool:
    return name == PROTECTED or name.startswith(PROTECTED + ".")


def _inside(module_name: str) -> bool:
    return module_name == "ch6" or module_name.startswith("ch6.")


def _importer(frame) -> str:
    """読み込みを頼んだコードのモジュール名。import の仕組み（importlib）、この見張り、ch6 の遅延読み込み
    （``ch6.__getattr__``）の枠は飛ばします（``from ch6 import checks`` も ``ch6.checks`` も、頼んだのはその先）。"""
    while frame is not None:
        name = frame.f_globals.get("__name__") or ""
        if not (name.startswith("importlib") or name == __name__
                or (name == "ch6" and frame.f_code.co_name == "__getattr__")):
            return name
        frame = frame.f_back
    return ""


def _refuse(name: str) -> None:
    raise ChecksHidden(
        f"学習者版の ch6 では、演習のチェック（参照の答えを含む ch6.checks）はノートブックから読み込めません（{name} の"
        "読み込みを止めました）。答え合わせは ch6.check(\"6.1-1\", 関数) のように行います。", name=name)


class _Stashed:
    """預けてあったモジュールをそのまま返すローダ（ch6 の中のコードが、checks_open の外で読み込んだとき）。"""

    def __init__(self, module: ModuleType):
        self.module, self.spec = module, module.__spec__

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        module.__spec__ = self.spec  # 読み込みの仕組みが付けた仮の spec を元に戻す


class _Finder:
    """sys.meta_path の先頭: ch6 の外から ch6.checks… を探す読み込みを止める。"""

    def find_spec(self, fullname, path=None, target=None):
        if not _protected(fullname):
            return None
        if not _inside(_importer(sys._getframe(1))):
            _refuse(fullname)
        if fullname in _stash:
            return importlib.util.spec_from_loader(fullname, _Stashed(_stash.pop(fullname)))
        return None

    def invalidate_caches(self):
        pass


setattr(_Finder, _GUARD, True)


def install() -> bool:
    """学習者版なら見張りを入れる（何度呼んでもよい。読み込み直した ch6 は、前の ch6 の見張りと入れ替える）。"""
    global _active
    if not is_learner():
        return False
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, _GUARD, False)]
    sys.meta_path.insert(0, _Finder())
    _active = True
    _hide()
    return True


def _hide() -> None:
    """読み込んだチェックを sys.modules と ch6 の属性から外して預ける。"""
    for name in [n for n in sys.modules if _protected(n)]:
        _stash[name] = sys.modules.pop(name)
    pkg = sys.modules.get("ch6")
    if pkg is not None and PROTECTED in _stash and vars(pkg).get("checks") is _stash[PROTECTED]:
        delattr(pkg, "checks")


@contextlib.contextmanager
def checks_open():
    """チェックを読み込み・実行する間。出口で、その間に読み込まれた ch6.checks… をまた預けます
    （入れ子の出口でも。学習者の関数を呼ぶ間にチェックのモジュールを sys.modules に残さないように）。
    完全版では何もしません。"""
    try:
        yield
    finally:
        if _active:
            _hide()
