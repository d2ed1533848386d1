"""採点の監視のうち、学習者のカーネルの中で動く部分（1/2）: ソケット、監査フック、採点の命令。

このファイルは読み込みません。ホスト（:func:`ch6.grading.guard.kernel_source`）が中身を読み、
:mod:`ch6.grading.guard_integrity` と同じ名前空間に、ファイル名 ``<ch6-guard>`` でコンパイルして、学習者の
セルより先にカーネルで実行します。名前はその名前空間の builtins の写しから引くので、学習者のコードが builtins を
書き換えても監視は元のものを使います。仕組みの説明は :mod:`ch6.grading.guard` にあります。
"""


def install(path, root, user_ns, tools, hashes, preload):
    """監視を入れる。path はホストの UNIX ソケット、root は ch6 のあるフォルダ、tools は突き合わせの部品を作る関数
    （guard_integrity の integrity_tools）、hashes は ch6 のファイルの SHA-256（ホストが読んだもの）、preload は
    採点のコードが読み込むライブラリ（学習者のセルより先に読み込み、突き合わせの元にする）。"""
    import _socket
    import _thread
    import gc
    import hashlib
    import importlib
    import importlib.machinery
    import json
    import os
    import sys
    import sysconfig
    import threading
    from types import FunctionType, ModuleType

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    sock.settimeout(120)
    sock.connect(path)
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(256)
        if not chunk:
            raise ConnectionError("ch6 guard: no nonce")
        data += chunk
    sock.settimeout(None)
    first, _, rest = data.partition(b"\n")
    nonce, pending = first.decode().strip(), [rest]
    sendall, recv, loads, DONTWAIT = sock.sendall, sock.recv, json.loads, _socket.MSG_DONTWAIT
    getframe, get_ident = sys._getframe, _thread.get_ident
    import_module, invalidate = importlib.import_module, importlib.invalidate_caches
    realpath, sep, isinstance_, getattr_, fspath = os.path.realpath, os.sep, isinstance, getattr, os.fspath
    pkg = os.path.join(realpath(root), "ch6") + sep
    checks = pkg + "checks" + sep
    here = realpath(os.getcwd()) + sep  # この提出物の作業フォルダ（書いてよい）
    # 書き換えを試みるだけで指摘にする場所: 採点のしくみ（ch6）と、ホストが守る場所（ほかの提出物・成績簿）
    protect = tuple(dict.fromkeys([pkg] + [realpath(p) + sep for p in
                                           os.environ.get("CH6_GUARD_PROTECT", "").split(os.pathsep) if p]))
    paths = sysconfig.get_paths()
    lib = {pkg}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        if paths.get(key):
            lib |= {paths[key] + sep, realpath(paths[key]) + sep}
    lib = tuple(sorted(lib))
    PASS = ("inspect", "ctypes", "importlib", "importlib._bootstrap", "importlib._bootstrap_external", "runpy", "pkgutil")
    INTROSPECT = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames",
                            "sys.settrace", "sys.setprofile", "sys.addaudithook", "sys.monitoring.register_callback"})
    FRAMES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"})
    # ファイルを書き換える監査イベント -> 書き換える先のパスの引数の位置
    WRITES = {"os.remove": (0,), "os.rmdir": (0,), "os.rename": (0, 1), "os.truncate": (0,), "os.chmod": (0,),
              "os.chown": (0,), "os.mkdir": (0,), "os.link": (1,), "os.symlink": (1,), "os.utime": (0,),
              "shutil.rmtree": (0,), "shutil.copyfile": (1,), "shutil.copytree": (1,), "shutil.move": (0, 1),
              "sqlite3.connect": (0,)}  # 成績簿（nbgrader の gradebook.db）
    WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    WATCH = INTROSPECT | set(WRITES) | {"import", "open", "sys._getframe", "object.__getattr__", "object.__setattr__",
                                        "_thread.start_new_thread", "ch6.grade"}
    DEBUG = os.environ.get("CH6_GUARD_DEBUG") == "1"
    busy, state = set(), {"phase": "learner", "grader": None, "fresh": None, "edition": set()}
    sha256 = hashlib.sha256

    def send(k, **kw):
        kw["n"], kw["k"] = nonce, k
        try:
            sendall((repr(kw) + "\n").encode())  # repr は C の実装（json の Python のコードを差し替えられても壊れない）
        except Exception:
            pass

    def flag(code, what):
        send("flag", code=code, what=str(what)[:160], phase=state["phase"])

    def learner(code, globals_=None):
        """学習者のコードか: ライブラリのフォルダの外のファイル（ノートブックのセルなど）。ファイルのないコード
        （exec の "<string>"）は、学習者の名前空間で動いているときだけ（チェック自身の eval と区別する）。"""
        f = code.co_filename
        if f.startswith("<"):
            return f != "<ch6-guard>" and globals_ is user_ns
        return not f.startswith(lib)

    def learner_fn(fn):
        code = getattr_(fn, "__code__", None)
        return code is not None and learner(code, getattr_(fn, "__globals__", None))

    def caller_is_learner(frame):
        """監査イベントを起こしたコード（inspect・ctypes・importlib などの取り次ぎは飛ばす）が学習者のものか。"""
        while frame is not None:
            code = frame.f_code
            if code.co_filename == "<ch6-guard>" and code.co_name == "dispatch":
                return False
            if code.co_filename == "<ch6-guard>" or code.co_filename.startswith("<frozen ") or \
                    frame.f_globals.get("__name__") in PASS:
                frame = frame.f_back
                continue
            return learner(code, frame.f_globals)
        return False

    def learner_above(frame):
        """イベントから採点の入口（dispatch）までのあいだに、学習者のコードの枠があるか。"""
        while frame is not None:
            code = frame.f_code
            if code.co_filename == "<ch6-guard>" and code.co_name == "dispatch":
                return False
            if learner(code, frame.f_globals):
                return True
            frame = frame.f_back
        return False

    def short(p):
        return "ch6/" + p[len(pkg):] if p.startswith(pkg) else "/".join(p.split(sep)[-3:])

    def guarded(target):
        """書き換えようとした先が、守る場所（作業フォルダの外）ならその短い名前。"""
        try:
            p = fspath(target)
            p = realpath(p.decode(errors="replace") if isinstance_(p, bytes) else p)
        except Exception:
            return None
        if (p + sep).startswith(here) or not any((p + sep).startswith(d) for d in protect):
            return None
        return short(p)

    def pyc_write(frame, target):
        """Python 自身が __pycache__ に .pyc を書くところ（importlib の _write_atomic）。"""
        return frame is not None and frame.f_code.co_filename == "<frozen importlib._bootstrap_external>" and \
            isinstance_(target, str) and (sep + "__pycache__" + sep) in target

    def hook(event, args):
        if event not in WATCH and not event.startswith("ctypes."):
            return
        me = get_ident()
        if me in busy:
            return
        busy.add(me)
        try:
            if event == "ch6.grade":
                dispatch()
            else:
                watch(event, args)
        except BaseException:
            if DEBUG:
                import traceback
                traceback.print_exc()
        finally:
            busy.discard(me)

    def watch(event, args):
        frame = getframe(2)  # 2 つ上の枠: イベントを起こしたコード（watch を hook が呼ぶ）
        grading = state["phase"] == "grading"
        if event == "import":
            name = args[0] if args else ""
            if isinstance_(name, str) and (name == "ch6.checks" or name.startswith("ch6.checks.")) \
                    and learner_above(frame):
                flag("reference", name)
        elif event == "open":
            target = args[0] if args else None
            if isinstance_(target, int):
                return
            mode, flags = (args[1] if len(args) > 1 else None), (args[2] if len(args) > 2 else 0)
            writes = any(c in mode for c in "wax+") if isinstance_(mode, str) else bool((flags or 0) & WRITE_FLAGS)
            where = guarded(target) if writes and not pyc_write(frame, target) else None
            if where:
                flag("write", where)
            p = target.decode(errors="replace") if isinstance_(target, bytes) else target
            if isinstance_(p, str) and realpath(p).startswith(checks) and learner_above(frame):
                flag("reference", "ch6/checks/" + realpath(p)[len(checks):])
        elif event in WRITES:
            for k in WRITES[event]:
                where = guarded(args[k]) if len(args) > k else None
                if where:
                    flag("write", where)
        elif event in INTROSPECT or event.startswith("ctypes."):
            if caller_is_learner(frame):
                flag("introspect", event)
        elif event == "object.__setattr__":
            name = args[1] if len(args) > 1 else None
            if name == "__code__" and caller_is_learner(frame):
                flag("introspect", "__code__ の書き換え")
            elif name in ("__defaults__", "__kwdefaults__") and not learner_fn(args[0]) and caller_is_learner(frame):
                fn = args[0]
                flag("replaced", f"{getattr_(fn, '__module__', '?')}.{getattr_(fn, '__qualname__', '?')}.{name}")
        elif grading and event == "sys._getframe":
            if caller_is_learner(frame):
                flag("frames", "sys._getframe")
        elif grading and event == "object.__getattr__":
            if len(args) > 1 and args[1] in FRAMES and caller_is_learner(frame):
                flag("frames", args[1])
        elif event == "_thread.start_new_thread":  # 学習者の関数を動かすスレッド（採点の前に止まっても、差し替えは残りうる）
            target = args[0] if args else None
            target = getattr_(getattr_(target, "__self__", None), "_target", None) or target
            if learner_fn(target):
                flag("thread", getattr_(target, "__name__", "?"))

    g = dict(sys=sys, gc=gc, threading=threading, pkg=pkg, root=root, lib=lib, state=state, flag=flag,
             learner=learner, learner_fn=learner_fn, short=short, sha256=sha256, hashes=hashes,
             import_module=import_module, loader_type=importlib.machinery.SourceFileLoader,
             FunctionType=FunctionType, ModuleType=ModuleType, get_ident=get_ident)
    t = tools(g)

    # ---------------------------------------------------------------- 採点（ホストの命令で）
    def commands():
        data, pending[0] = pending[0], b""
        while True:
            try:
                chunk = recv(65536, DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            if not chunk:
                break
            data += chunk
        out = []
        for line in data.decode(errors="replace").splitlines():
            try:
                out.append(loads(line))
            except ValueError:
                pass
        return out

    def emit(payload):
        send("result", **payload)

    def dispatch():
        for cmd in commands():
            try:
                if cmd.get("cmd") == "setup":
                    setup()
                elif cmd.get("cmd") == "check" and state["grader"] is not None:
                    t["integrity"]()
                    me = get_ident()
                    busy.discard(me)  # チェックの最中（学習者の関数が動く）は見張る
                    try:
                        state["grader"](cmd["id"])
                    finally:
                        busy.add(me)
                    t["integrity"]()
            except BaseException as exc:
                send("error", cmd=cmd.get("cmd"), id=cmd.get("id"), why=f"{type(exc).__name__}: {exc}"[:200])

    def setup():
        state["phase"] = "grading"
        t["integrity"]()
        old = {m: sys.modules[m] for m in list(sys.modules) if m == "ch6" or m.startswith("ch6.")}
        for name in old:
            sys.modules.pop(name, None)
        t["clean_imports"]()  # 学習者の探し方を外し、ch6 はディスクのソースから（__pycache__ を使わずに）読み込む
        invalidate()
        grader = import_module("ch6.grading.inkernel").grader(emit, user_ns)
        for code, found in (("replaced", t["compare_old"](old)), ("files", t["verify_files"]())):
            if found:
                flag(code, "、".join(found))
        state["fresh"] = t["snapshot"]([m for m in list(sys.modules) if m == "ch6" or m.startswith("ch6.")])
        state["grader"] = grader

    # JAX とチェックの使うライブラリの読み込み（静かなマシンでも数秒）は準備の時間に: 学習者のセルの制限時間は
    # 学習者のコードに使う。ここで読み込んだモジュールが、採点の前後の突き合わせの元になる
    for name in preload:
        try:
            import_module(name)
        except BaseException:
            pass
    try:  # 学習者版の監視（ch6.edition）が入れ替えるもの: ディスクの edition.py のコード（学習者のセルより前に読む）
        with open(pkg + "edition.py", encoding="utf-8") as fh:
            todo = [compile(fh.read(), pkg + "edition.py", "exec")]
        while todo:
            c = todo.pop()
            state["edition"].add(c)
            todo += [k for k in c.co_consts if type(k) is type(c)]
    except Exception:
        pass
    t["record_base"]()
    sys.addaudithook(hook)
    send("ready")
