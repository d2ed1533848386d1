"""提出物を隔離して実行する（ch6-grade と nbgrader 版で共通）。

**隔離（既定）。** 提出物のカーネルは bubblewrap（``bwrap``、Linux の名前空間を特権なしで使う）の中で動きます:
ファイルシステム全体は読み取り専用、ホーム・``/tmp``・提出物のフォルダ・採点を始めたフォルダ・講座のチェックアウトは
空の一時フォルダで隠し、カーネルに要るもの（Python、パッケージ、インストールした ``ch6``、カーネルの接続ファイル、
監視のソケット）だけを読み取り専用で戻します。書けるのはその提出物の作業フォルダ（採点ごとの一時フォルダ、
nbgrader なら ``autograded/学生/課題/``）だけです。ほかのプロセスは見えません（PID の名前空間）。

**隔離できないとき。** クラスの採点は始めません。先生が ``--unisolated``（環境変数 ``CH6_UNISOLATED=1``）で
頼んだときだけ隔離なしで実行し、1 冊ごとに :class:`Watch` で確かめます: インストールした ``ch6`` のファイル
（採点のしくみ）とほかの提出物・成績簿を実行の前に写しておき、実行の後に比べ、変わっていれば元に戻して
その提出物を ⚠️ tampered（0 点）にします（書き換えがどの提出物のものか分かるように、1 冊ずつ順に採点します）。
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # インストール先の ch6/
ENV_UNISOLATED = "CH6_UNISOLATED"  # "1": 先生が隔離なしを頼んだ
ENV_PROTECT = "CH6_PROTECT"        # 確かめるファイル・フォルダを足す（os.pathsep 区切り。ほかのコースの成績簿など）
ENV_GUARD_PROTECT = "CH6_GUARD_PROTECT"  # カーネルの監視へ: 書き換えようとしたら指摘にする場所（ch6 のほかに）
BUBBLEWRAP = "bubblewrap"
UNISOLATED = "unisolated"
OUTSIDE = "outside"  # 指摘の種類（execute の st.flags）
# 隠すフォルダ（あれば）。ほかに採点を始めたフォルダ、講座のチェックアウト、提出物のフォルダ、確かめる場所
HIDE = ("/home", "/root", "/tmp", "/var/tmp", "/mnt", "/media", "/srv", "/run/user")
MAX_BACKUP = 512 << 20  # 写しておく量の上限（バイト）

REFUSE = ("提出物を隔離して実行できません（bubblewrap の bwrap が見つからないか、この環境では名前空間を使えません）。"
          "知らない人のコードが、ほかの学習者の提出物・成績簿・採点のしくみを書き換えられるので、クラスの採点は始めません。"
          "Debian・Ubuntu なら sudo apt install bubblewrap で入ります。macOS・Windows では、Linux の仮想マシンかコンテナの中で採点してください。"
          "隔離なしで採点するなら --unisolated（nbgrader では環境変数 CH6_UNISOLATED=1）を付けてください。"
          "そのときは 1 冊ごとに採点のしくみと成績簿を確かめ、書き換えた提出物を 0 点にして元に戻します。")


class Refused(RuntimeError):
    """隔離できず、隔離なしも頼まれていない。"""


@functools.cache
def bubblewrap_works() -> bool:
    """bwrap があり、特権なしの名前空間でコマンドを動かせるか（1 プロセスにつき 1 回だけ試す）。"""
    exe = shutil.which("bwrap")
    if exe is None:
        return False
    try:
        return subprocess.run([exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-user",
                               "--unshare-pid", "--die-with-parent", "true"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def mode() -> str | None:
    """この採点で使うもの: BUBBLEWRAP、UNISOLATED（頼まれたとき）、または None（隔離できず、頼まれてもいない）。"""
    if os.environ.get(ENV_UNISOLATED) == "1":
        return UNISOLATED
    return BUBBLEWRAP if bubblewrap_works() else None


def describe(how: str | None) -> str:
    """採点する人への 1 行（どの隔離を使ったか）。"""
    if how == BUBBLEWRAP:
        return ("隔離: bubblewrap（Linux の名前空間。提出物が書けるのはその作業フォルダだけで、"
                "ほかの提出物・成績簿・採点のしくみは見えないか読み取り専用です）")
    return ("隔離: なし（--unisolated）。1 冊ごとに採点のしくみ（ch6）と提出物・成績簿を確かめ、"
            "書き換えがあれば元に戻してその提出物を 0 点にします。--jobs は 1 にします")


def protected_from_env() -> list[Path]:
    return [Path(p) for p in os.environ.get(ENV_PROTECT, "").split(os.pathsep) if p]


def _checkout() -> Path | None:
    """ch6 が講座のチェックアウトから入っていれば（pip install -e .）、そのフォルダ（solutions/ がある）。"""
    root = PACKAGE_DIR.parent
    return root if (root / "pyproject.toml").exists() else None


def _exists(paths: Iterable[str | Path]) -> list[str]:
    out = []
    for p in paths:
        p = os.path.realpath(p)
        if os.path.exists(p) and p not in out:
            out.append(p)
    return out


def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def bwrap_argv(cmd: list[str], cwd: str, readable: Iterable[str | Path] = (),
               hide: Iterable[str | Path] = ()) -> list[str]:
    """カーネルのコマンド cmd を bubblewrap で包む。書けるのは cwd だけ。readable は読めるように戻すもの。"""
    cwd = os.path.realpath(cwd)
    hidden = _exists([*HIDE, Path.home(), os.getcwd(), *filter(None, [_checkout()]), *hide])
    hidden = sorted({h for h in hidden if os.path.isdir(h) and h != "/"}, key=lambda h: (h.count("/"), h))
    hidden = [h for h in hidden if not any(_inside(h, o) for o in hidden if o != h)]  # 隠した中はもとから見えない
    needed = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(cmd[0])), PACKAGE_DIR]
    for entry in sys.path:  # パッケージのフォルダ（講座のチェックアウトそのものは戻さない: solutions/ がある）
        real = os.path.realpath(entry) if entry else ""
        if real and os.path.isdir(real) and not _inside(str(PACKAGE_DIR), real) and real != os.getcwd():
            needed.append(real)
    argv = ["bwrap", "--die-with-parent", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--ro-bind", "/", "/", "--dev", "/dev", "--tmpfs", "/dev/shm", "--proc", "/proc"]
    for h in hidden:
        argv += ["--tmpfs", h]
    bound: list[str] = []
    for p in sorted(_exists([*needed, *readable]), key=len):
        if any(_inside(p, h) for h in hidden) and not _inside(p, cwd) and not any(_inside(p, b) for b in bound):
            argv += ["--ro-bind", p, p]
            bound.append(p)
    # ipykernel は JPY_PARENT_PID の親がいなくなると終わる（PID の名前空間の中では親の番号が違う）。
    # 親が終われば --die-with-parent で終わる
    argv += ["--bind", cwd, cwd, "--chdir", cwd, "--setenv", "HOME", _home(hidden), "--unsetenv", "JPY_PARENT_PID",
             "--"]
    return argv + list(cmd)


def _home(hidden: list[str]) -> str:
    home = os.path.realpath(Path.home())
    return home if any(_inside(home, h) for h in hidden) else "/tmp"  # 隠したホームは空の書ける一時フォルダ


def kernel_manager_class():
    """カーネルを mode() のとおりに起動する KernelManager（nbclient の kernel_manager_class に渡す）。"""
    from jupyter_client.manager import AsyncKernelManager

    class IsolatedKernelManager(AsyncKernelManager):
        ch6_mode: str | None = None   # BUBBLEWRAP・UNISOLATED（None: mode()）
        ch6_readable: list[str] = []  # 読めるように戻すもの（監視のソケットのフォルダ）
        ch6_hide: list[str] = []      # 隠すもの（提出物のフォルダ、成績簿）

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            how = self.ch6_mode or mode()
            if how is None:
                raise Refused(REFUSE)
            # 監視（ch6.grading.guard）は、ここを書き換えようとしただけで指摘にする（隔離で書けなくても）。
            # .pyc は書かない（採点のしくみのフォルダへの書き込みは、学習者のものだけになる）
            protect = [str(p) for p in [*self.ch6_hide, *protected_from_env()]]
            kw["env"] = {**(kw.get("env") or os.environ), "PYTHONDONTWRITEBYTECODE": "1",
                         ENV_GUARD_PROTECT: os.pathsep.join(dict.fromkeys(protect))}
            if how == BUBBLEWRAP:
                cwd = kw.get("cwd") or os.getcwd()
                kernel_cmd = bwrap_argv(kernel_cmd, cwd, [self.connection_file, *self.ch6_readable],
                                        [*self.ch6_hide, *protected_from_env()])
                # 中断はメッセージで（SIGINT をプロセスグループに送ると、カーネルより先に外の bwrap が終わってしまう）
                self.kernel_spec.interrupt_mode = "message"
            return await super()._async_launch_kernel(kernel_cmd, **kw)

    return IsolatedKernelManager


class Watch:
    """採点のしくみ（インストールした ch6）と守る場所（ほかの提出物・成績簿）を写しておき、後で比べて元に戻す。

    ``skip`` はその提出物の作業フォルダ（書いてよい）。``__pycache__`` の変化は元に戻すだけで、書き換えに数えません
    （採点する側の Python も書くため）。"""

    def __init__(self, protect: Iterable[str | Path] = (), skip: Iterable[str | Path] = ()):
        self.roots = _exists([PACKAGE_DIR, *protect, *protected_from_env()])
        self.skip = _exists(skip)
        self.saved: dict[str, bytes] = {}
        self.too_big = False
        total = 0
        for f in self._files():
            try:
                data = Path(f).read_bytes()
            except OSError:
                continue
            total += len(data)
            if total > MAX_BACKUP:
                self.too_big = True
                break
            self.saved[f] = data

    def _files(self) -> list[str]:
        out: list[str] = []
        for root in self.roots:
            if os.path.isfile(root):
                out.append(root)
                continue
            for here, dirs, files in os.walk(root):
                dirs[:] = [d for d in dirs if not any(_inside(os.path.join(here, d), s) for s in self.skip)]
                out += [os.path.join(here, f) for f in files if not os.path.islink(os.path.join(here, f))]
        return out

    def verify(self) -> list[str]:
        """変わった・消された・足されたファイルを元に戻し、その名前を返す（__pycache__ のものは返さない）。"""
        changed = []
        now = set(self._files())
        for f, data in self.saved.items():
            try:
                same = Path(f).read_bytes() == data
            except OSError:
                same = False
            if not same:
                _restore(f, data)
                changed.append(f)
        for f in sorted(now - set(self.saved)):
            if not self.too_big:
                Path(f).unlink(missing_ok=True)
                changed.append(f)
        return [f for f in changed if "__pycache__" not in Path(f).parts]


def _restore(path: str, data: bytes) -> None:
    p = Path(path)
    try:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        elif p.is_symlink():
            p.unlink()
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    except OSError:
        pass


def outside_note(changed: list[str]) -> str:
    """書き換えの指摘の 1 文（execute の st.flags に (OUTSIDE, これ) を足す）。"""
    shown = "、".join(_short(f) for f in changed[:3]) + (f" ほか {len(changed) - 3} 件" if len(changed) > 3 else "")
    return f"採点の外のファイルが書き換えられました（{shown}。元に戻しました）"


def _short(path: str) -> str:
    p = Path(path)
    try:
        return "ch6/" + p.relative_to(PACKAGE_DIR).as_posix()
    except ValueError:
        return "/".join(p.parts[-3:])


def course_paths(db_url: str) -> list[Path]:
    """nbgrader のコースで守る場所: 成績簿（gradebook.db）と、提出物・採点・配布のフォルダ。"""
    if not db_url.startswith("sqlite:///"):
        return []
    db = Path(db_url[len("sqlite:///"):])
    names = ("submitted", "autograded", "feedback", "source", "release", "nbgrader_config.py")
    return [db, *(db.parent / n for n in names)]


def _execute_class():
    """nbgrader の autograde の実行（nbgrader.preprocessors.Execute）を隔離し、実行の後に確かめる。"""
    from nbgrader.preprocessors import Execute as NbgraderExecute

    from .cells import test_exercise
    from .gradecells import error_output

    class Execute(NbgraderExecute):
        def preprocess(self, nb, resources):
            how = mode()
            if how is None:
                raise Refused(REFUSE)
            info = resources.get("nbgrader", {})
            cwd = (resources.get("metadata") or {}).get("path") or os.getcwd()
            protect = course_paths(str(info.get("db_url", "")))
            # 続く GuardGrades の採点し直し（ch6.grading.execute）でも、同じ場所を隠して確かめる
            os.environ[ENV_PROTECT] = os.pathsep.join(dict.fromkeys([*map(str, protected_from_env()),
                                                                      *map(str, protect)]))
            manager = kernel_manager_class()
            manager.ch6_mode, manager.ch6_hide = how, [str(p) for p in protect]
            self.kernel_manager_class = manager
            self.log.info("ch6: %s", describe(how))
            watch = Watch(protect, skip=[cwd]) if how == UNISOLATED else None
            try:
                nb, resources = super().preprocess(nb, resources)
            finally:
                changed = watch.verify() if watch else []
            if changed:  # 書き換えは元に戻し、この提出物の採点のセルをすべて 0 点に
                note = outside_note(changed) + "。全演習を 0 点（tampered）にしました"
                self.log.warning("ch6: %s/%s: %s", info.get("student"), info.get("assignment"), note)
                for cell in nb.cells:
                    eid = test_exercise(cell)
                    if eid:
                        cell.setdefault("outputs", []).append(error_output(eid, note + "。"))
            return nb, resources

    return Execute


def __getattr__(name: str):  # nbgrader の設定が文字列で指す（"ch6.grading.isolate.Execute"）
    if name == "Execute":
        globals()[name] = cls = _execute_class()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
