"""採点の監視: 学習者のコードが採点に手を出したことを、書き方によらず実行時に見つける（ch6-grade と nbgrader 版で共通）。

**なぜ同じカーネルで、監視つきか。** チェックは学習者の関数を呼ぶので、学習者のコードはどこで採点しても採点と
同じプロセスで動きます。関数を値で別のプロセスへ送っても（cloudpickle）、その関数の本体はチェックの最中にそこで動き、
ノートブックの変数・メッシュ・学習者の名前空間を見るチェック（6.6-3）も 73 問すべてで同じに保つのは難しくなります。
そこで採点は今までどおり学習者のセルのあとに同じカーネルで、インストール先から読み込み直したチェックで行い、
その周りを、学習者のコードが外せない・届かない仕組みで監視ます。

1. **監査フック**（``sys.addaudithook``）を、学習者のセルより先に入れます。フックは外せません。学習者のコードからの
   ``ch6.checks`` の読み込みとファイルの読み出し（参照の答え）、``gc`` で他人のオブジェクトを探すこと、
   ``sys._current_frames``・``settrace``・``setprofile``・``addaudithook``・``ctypes``、関数の ``__code__`` の
   書き換え、チェックの最中のフレームの覗き見とスレッドの開始を、名前の書き方（文字列の組み立て、``getattr``）に
   よらず、起きたそのときに記録します。学習者のコードかどうかは、呼び出し元のコードのファイル
   （ライブラリのフォルダの外）で決めます。
2. **記録はすぐにカーネルの外へ。** フックと採点の結果は、採点する側（ホスト）が持つ UNIX ソケットへ 1 行ずつ
   書きます。書いたものは消せません。行には、ホストが接続のあとにソケットで渡した nonce を付けます（nonce は
   ソースにも表示にも出ません）。nonce のない行・壊れた行は偽造として扱います。採点を始める合図もソケットで送るので、
   学習者のコードが採点の関数を呼び出したり差し替えたりはできません（採点の関数はフックの中にだけあります）。
   結果が届かなければ（ソケットを閉じた、採点を止めた）、それ自体を改ざんとして扱います。
3. **採点の前と各チェックの後の突き合わせ。** 学習者のセルより前に読み込まれていたモジュール（JAX、NumPy、
   ``builtins``、``importlib`` など）の関数・クラスが別のものに替わっていないか、``sys.meta_path`` と
   ``sys.path_hooks`` が替わっていないか、学習者のセルの間に読み込まれた ``ch6`` のモジュール（``ch6._core``、
   ``ch6.grading.nbgrader`` など）の関数のコードが、ディスクから読み込み直したものと同じか。採点のあとは、
   読み込み直した ``ch6`` の関数とクラスが替わっていないか。
4. **スレッド。** 採点の準備と各チェックの前後に、学習者のコードを実行中か学習者の関数を target にしたスレッドが
   生きていれば記録します。

見つけたものは「採点のしくみへの干渉」として、その冊の全演習を ⚠️ ``tampered``（0 点）にし、何が見つかったかを
備考に 1 行で書きます（ch6-grade の表・CSV、nbgrader の採点のセル）。ただし、配ったままのセル（6.3a の
``from ch6.checks.s6_3a import gated_mlp`` など）からの読み込みは数えません。

**監視では防げないこと（先生へ）。** 学習者のコードは採点する人の権限で同じプロセスにいます。フックに触れない
ところ（フックの記録より前にファイル番号を当て推量で閉じる、``__globals__`` を辿る、1 回のチェックの中で差し替えて
元に戻す、ライブラリのクラスの属性の書き換え）は見つけられないことがあります。知らない人の提出物は、コンテナなど
隔離した環境で採点してください。
"""
from __future__ import annotations

import ast
import asyncio
import json
import os
import secrets
import shutil
import socket
import tempfile

FILE = "<ch6-guard>"  # 監視のコードのファイル名（学習者のコードと区別する）
AUDIT_EVENT = "ch6.grade"  # 採点を始める合図（ホストがソケットで命令を送ってから、この監査イベントを起こす）
POKE = f'__import__("sys").audit("{AUDIT_EVENT}")'

# 監視が送る指摘の種類 -> 備考・メッセージに書く 1 文の型（{} に中身）
FLAGS = {
    "reference": "参照の答え（{}）を学習者のコードが読み込みました",
    "introspect": "学習者のコードが採点のしくみを覗く・書き換える操作（{}）をしました",
    "frames": "チェックの最中に、学習者の関数がチェックのフレームを覗きました（{}）",
    "replaced": "採点に使うオブジェクトが差し替えられています（{}）",
    "imports": "読み込みのしくみが書き換えられています（{}）",
    "thread": "学習者のコードがスレッドを動かしていました（{}）",
    "forged": "採点の通信に、監視以外から書き込まれた行がありました（{}）",
    "silent": "採点のしくみから結果が届きませんでした（{}）",
}

# カーネルの中で動く監視（ファイル名 FILE でコンパイルする）。ホストの UNIX ソケット path へつなぎ、nonce を受け取る。
_KERNEL = r'''
def install(path, root, user_ns):
    import _socket, _thread, gc, importlib, json, os, sys, sysconfig, threading
    from types import BuiltinFunctionType, FunctionType, MethodType, ModuleType

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
    getframe, frames_now, threads_now, get_ident = sys._getframe, sys._current_frames, threading.enumerate, _thread.get_ident
    modules, meta_path, path_hooks = sys.modules, sys.meta_path, sys.path_hooks
    gc_callbacks, gettrace, getprofile = gc.callbacks, sys.gettrace, sys.getprofile
    import_module, invalidate = importlib.import_module, importlib.invalidate_caches
    realpath, sep, isinstance_, getattr_, type_, id_ = os.path.realpath, os.sep, isinstance, getattr, type, id
    pkg = os.path.join(realpath(root), "ch6") + sep
    checks = pkg + "checks" + sep
    paths = sysconfig.get_paths()
    lib = {pkg}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        if paths.get(key):
            lib |= {paths[key] + sep, realpath(paths[key]) + sep}
    lib = tuple(sorted(lib))
    PASS = ("inspect", "ctypes", "importlib", "importlib._bootstrap", "importlib._bootstrap_external", "runpy", "pkgutil")
    INTROSPECT = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames",
                            "sys.settrace", "sys.setprofile", "sys.addaudithook", "sys.monitoring.register_callback"})
    # ipykernel が実行のたびに入れ替える（学習者の入力をフロントエンドへ回す・例外の表示）
    REBOUND = {"builtins": {"input", "raw_input"}, "getpass": {"getpass"}, "sys": {"excepthook", "displayhook",
                                                                                     "breakpointhook"}}
    FRAMES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"})
    WATCH = INTROSPECT | {"import", "open", "sys._getframe", "object.__getattr__", "object.__setattr__",
                          "_thread.start_new_thread", "ch6.grade"}
    DEBUG = os.environ.get("CH6_GUARD_DEBUG") == "1"
    busy, state = set(), {"phase": "learner", "grader": None, "fresh": None, "edition": set()}

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
        except BaseException as exc:
            if DEBUG:
                import traceback; traceback.print_exc()
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
            path = args[0] if args else None
            if isinstance_(path, bytes):
                path = path.decode(errors="replace")
            if isinstance_(path, str) and realpath(path).startswith(checks) and learner_above(frame):
                flag("reference", "ch6/checks/" + realpath(path)[len(checks):])
        elif event in INTROSPECT or event.startswith("ctypes."):
            if caller_is_learner(frame):
                flag("introspect", event)
        elif event == "object.__setattr__":
            if len(args) > 1 and args[1] == "__code__" and caller_is_learner(frame):
                flag("introspect", "__code__ の書き換え")
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

    # ---------------------------------------------------------------- 突き合わせ
    def callables(m):
        d = getattr_(m, "__dict__", None)
        if not isinstance_(d, dict):
            return {}
        return {k: v for k, v in list(d.items())
                if isinstance_(v, (FunctionType, BuiltinFunctionType, type, ModuleType, MethodType))}

    def snapshot(names):
        out = {}
        for name in names:
            m = modules.get(name)
            if isinstance_(m, ModuleType):
                out[name] = (m, callables(m), {k: dict(vars(v)) for k, v in callables(m).items()
                                              if isinstance_(v, type) and name.startswith("ch6")})
        return out

    def allowed(value):
        """ch6 自身（学習者版の監視 ch6.edition）が入れ替えたもの。"""
        code = getattr_(value, "__code__", None)
        return code is not None and code in state["edition"]

    def changed(snap, limit=6):
        found = []
        for name, (m, attrs, classes) in list(snap.items()):
            if name in REBOUND and len(found) < limit:  # カーネル（ipykernel）が実行のたびに入れ替える名前は飛ばす
                attrs = {k: v for k, v in attrs.items() if k not in REBOUND[name]}
            now = modules.get(name, m)
            if now is not m:
                found.append(name)
                continue
            d = getattr_(m, "__dict__", {})
            for k, v in attrs.items():
                cur = d.get(k, v)
                if cur is not v and not allowed(cur):
                    found.append(f"{name}.{k}")
            for k, cd in classes.items():
                cur = getattr_(d.get(k), "__dict__", {})
                found += [f"{name}.{k}.{a}" for a, v in cd.items()
                          if cur.get(a, v) is not v and isinstance_(v, (FunctionType, property, classmethod, staticmethod))]
            if len(found) >= limit:
                break
        return found[:limit]

    def same(a, b):
        if a is b:
            return True
        ca, cb = getattr_(a, "__code__", None), getattr_(b, "__code__", None)
        if ca is not None or cb is not None:
            return ca is not None and cb is not None and ca == cb
        if isinstance_(a, type) and isinstance_(b, type):
            da, db = vars(a), vars(b)
            return a.__qualname__ == b.__qualname__ and all(
                same(da[k], db[k]) for k in db if isinstance_(db[k], FunctionType) and k in da)
        if isinstance_(a, ModuleType) or isinstance_(b, ModuleType):
            return getattr_(a, "__name__", 1) == getattr_(b, "__name__", 2)
        return type_(a) is type_(b)

    def compare_old(old):
        """学習者のセルの間にあった ch6 のモジュールを、ディスクから読み込み直したものと比べる。"""
        found = []
        for name, m in old.items():
            if not isinstance_(m, ModuleType) or not realpath(getattr_(m, "__file__", None) or "").startswith(pkg):
                found.append(f"{name}（モジュールごと）")
                continue
            if name.startswith("ch6.checks"):
                continue
            try:
                fresh = modules.get(name) or import_module(name)
            except Exception:
                continue
            fd = vars(fresh)
            for k, v in list(vars(m).items()):
                if k.startswith("__"):
                    continue
                try:  # 遅延読み込みの名前（ch6.run_check など）は、読み込み直した側で引いて比べる
                    fv = fd[k] if k in fd else getattr_(fresh, k)
                except Exception:
                    continue
                if isinstance_(fv, (FunctionType, type)) and not same(v, fv):
                    found.append(f"{name}.{k}")
        return found[:6]

    def import_system():
        def by_learner(obj):  # 学習者のコードで書いた探し方（ライブラリが足したもの、例えば absl の ReloadDetector は除く）
            fns = [obj] + [getattr_(type_(obj), n, None) for n in ("find_spec", "find_module", "__call__")]
            return any(learner_fn(f) for f in fns)
        found = [f"sys.meta_path の {type_(f).__name__}" for f in meta_path
                 if id_(f) not in base["meta"] and by_learner(f)]
        found += [f"sys.path_hooks の {getattr_(h, '__name__', type_(h).__name__)}" for h in path_hooks
                  if id_(h) not in base["hooks"] and by_learner(h)]
        return found

    def threads():
        found, me, frames = [], get_ident(), frames_now()
        for ident, frame in list(frames.items()):
            if ident == me or ident in base["threads"]:
                continue
            f = frame
            while f is not None:
                if learner(f.f_code, f.f_globals):
                    found.append(f.f_code.co_name)
                    break
                f = f.f_back
        for t in threads_now():
            target = getattr_(t, "_target", None) or getattr_(t, "function", None)
            if t.ident not in base["threads"] and learner_fn(target) and t.ident in frames:
                found.append(getattr_(target, "__name__", "?"))
        return sorted(set(found))

    def callbacks():
        """学習者の関数が、ほかのところから呼ばれる登録（gc.callbacks、トレース、プロファイル）。"""
        hooks = list(gc_callbacks) + [gettrace(), getprofile(), getattr_(threading, "_trace_hook", None),
                                      getattr_(threading, "_profile_hook", None)]
        return [getattr_(h, "__name__", "?") for h in hooks if learner_fn(h)]

    def integrity(where):
        for code, found in (("replaced", changed(base["modules"])), ("imports", import_system()),
                            ("thread", threads()), ("introspect", callbacks())):
            if found:
                flag(code, "、".join(found))
        if state["fresh"] is not None:
            found = changed(state["fresh"])
            if found:
                flag("replaced", "、".join(found))

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
                    integrity("チェックの前")
                    me = get_ident()
                    busy.discard(me)  # チェックの最中（学習者の関数が動く）は見張る
                    try:
                        state["grader"](cmd["id"])
                    finally:
                        busy.add(me)
                    integrity("チェックの後")
            except BaseException as exc:
                send("error", cmd=cmd.get("cmd"), id=cmd.get("id"), why=f"{type_(exc).__name__}: {exc}"[:200])

    def setup():
        state["phase"] = "grading"
        integrity("採点の準備の前")
        old = {m: modules[m] for m in list(modules) if m == "ch6" or m.startswith("ch6.")}
        for name in old:
            modules.pop(name, None)
        if root not in sys.path:
            sys.path.insert(0, root)
        invalidate()
        grader = import_module("ch6.grading.inkernel").grader(emit, user_ns)
        found = compare_old(old)
        if found:
            flag("replaced", "、".join(found))
        state["fresh"] = snapshot([m for m in list(modules) if m == "ch6" or m.startswith("ch6.")])
        state["grader"] = grader

    # JAX とチェックの使うライブラリの読み込み（静かなマシンでも数秒）は準備の時間に: 学習者のセルの制限時間は
    # 学習者のコードに使う。ここで読み込んだモジュールが、採点の前後の突き合わせの元になる
    for name in ("jax.numpy", "numpy.testing", "chex"):
        try:
            import_module(name)
        except Exception:
            pass
    try:  # 学習者版の監視（ch6.edition）が入れ替えるもの: ディスクの edition.py のコード（学習者のセルより前に読む）
        with open(pkg + "edition.py", encoding="utf-8") as fh:
            todo = [compile(fh.read(), pkg + "edition.py", "exec")]
        while todo:
            c = todo.pop()
            state["edition"].add(c)
            todo += [k for k in c.co_consts if type_(k) is type_(c)]
    except Exception:
        pass
    base = {"meta": {id_(f) for f in meta_path}, "hooks": {id_(h) for h in path_hooks},
            "threads": set(frames_now()),
            "modules": snapshot([m for m in list(modules) if not (m == "ch6" or m.startswith("ch6.") or m == "__main__")])}
    sys.addaudithook(hook)
    send("ready")
'''


def kernel_source(path: str, root: str) -> str:
    """学習者のセルより先にカーネルで実行するコード（監視を入れる）。path はホストの UNIX ソケット、root は ch6 のあるフォルダ。"""
    # 監視の名前は builtins の写しから引く（学習者のコードが builtins を書き換えても、監視は元のものを使う）
    return (f"exec(compile({_KERNEL!r}, {FILE!r}, 'exec'), "
            "__ch6_ns := {'__builtins__': dict(vars(__import__('builtins')))})\n"
            f"__ch6_ns['install']({path!r}, {root!r}, globals())\n"
            "del __ch6_ns\n")


class Channel:
    """ホスト側: 監視の UNIX ソケット。接続は 1 つだけ受け付け（受けたらソケットのファイルを消す）、nonce を送る。

    監視の行は :meth:`drain` で読みます（たまっている分だけ、待たずに）。nonce の合わない行・壊れた行は
    ``forged`` の指摘にします。"""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="ch6g-")
        self.path = os.path.join(self.dir, "s")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(1)
        self.listener.setblocking(False)
        self.nonce = secrets.token_hex(16)
        self.conn: socket.socket | None = None
        self.buf = b""
        self.closed = False

    async def accept(self) -> None:
        loop = asyncio.get_running_loop()
        conn, _ = await loop.sock_accept(self.listener)
        self._connected(conn)

    def accept_blocking(self, timeout: float) -> None:
        self.listener.setblocking(True)
        self.listener.settimeout(timeout)
        conn, _ = self.listener.accept()
        self._connected(conn)

    def _connected(self, conn: socket.socket) -> None:
        self.listener.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        conn.setblocking(True)
        conn.sendall((self.nonce + "\n").encode())
        conn.setblocking(False)
        self.conn = conn

    def send(self, **cmd) -> None:
        if self.conn is None:
            return
        try:
            self.conn.setblocking(True)
            self.conn.sendall((json.dumps(cmd) + "\n").encode())
            self.conn.setblocking(False)
        except OSError:
            self.closed = True

    def drain(self) -> list[dict]:
        """届いている行（監視の nonce つきのもの）。偽の行は {"k": "flag", "code": "forged"} にする。"""
        if self.conn is None:
            return []
        while True:
            try:
                chunk = self.conn.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self.closed = True
                break
            if not chunk:
                self.closed = True
                break
            self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")
        out = []
        for raw in lines:
            try:
                msg = ast.literal_eval(raw.decode())
                ok = isinstance(msg, dict) and msg.get("n") == self.nonce
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                ok = False
            out.append(msg if ok else {"k": "flag", "code": "forged", "what": raw[:200].decode(errors="replace")})
        return out

    def close(self) -> None:
        for s in (self.conn, self.listener):
            try:
                if s is not None:
                    s.close()
            except OSError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


def flag_line(code: str, what: str) -> str:
    return FLAGS.get(code, "{}").format(what)


def tamper_note(flags: list[tuple[str, str]]) -> str:
    """指摘（code, what）の並び -> 備考の 1 行（種類ごとに 1 文、中身は重ねない）。"""
    whats: dict[str, list[str]] = {}
    for code, what in flags:
        for w in what.split("、"):
            if w not in whats.setdefault(code, []):
                whats[code].append(w)
    parts = [flag_line(c, "、".join(ws[:4]) + ("など" if len(ws) > 4 else "")) for c, ws in whats.items()]
    more = f"（ほか {len(parts) - 2} 件）" if len(parts) > 2 else ""
    return ("採点のしくみへの干渉が見つかりました: " + "。".join(parts[:2]) + more +
            "。全演習を 0 点（tampered）にしました。コードを確かめてください。")
