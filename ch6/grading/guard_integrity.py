"""採点の監視のうち、学習者のカーネルの中で動く部分（2/2）: 採点が頼るものの突き合わせ。

:mod:`ch6.grading.guard_kernel` と同じく、読み込まずにホストが中身を読んでカーネルで実行します。
:func:`integrity_tools` が、監視（``install``）と共有するもの（``g``）から、次を確かめる関数を作ります。

- 学習者のセルより前に読み込まれていたモジュール（NumPy、``jax.numpy``、``builtins``、``importlib`` など、
  採点のコードが読み込むライブラリはすべて先に読み込みます）: モジュールの呼び出せる名前すべて（関数、クラス、
  ufunc の ``np.abs``、``np.allclose`` のようなディスパッチャ、``jnp.*`` の jit された関数）と、そこで定義された
  クラスのメソッド（``jax.Array`` の演算子など）が、同じオブジェクトのままか。
- 学習者のセルの間に読み込まれたライブラリのモジュールに、学習者の関数が入っていないか。
- 読み込みのしくみ: ``sys.meta_path``・``sys.path_hooks``・``sys.path_importer_cache`` に学習者の探し方（finder）が
  ないか、キャッシュのファイルの探し方が別のフォルダを指していないか。採点の準備では、学習者の探し方を外し、
  キャッシュを空にし、``ch6`` をディスクのソースから（``__pycache__`` を使わずに）読み込みます。
- 読み込み直した ``ch6`` のモジュール: ファイルが ch6 のフォルダのもので、中身がホストの読んだもの（SHA-256）と同じか。
- 学習者のコードのスレッドと、ほかから呼ばれる登録（``gc.callbacks``、トレース、プロファイル）。
"""


def integrity_tools(g):
    import os
    import weakref
    from functools import partial
    from types import FunctionType, ModuleType

    sys, modules, flag, learner, learner_fn, state = g["sys"], g["sys"].modules, g["flag"], g["learner"], \
        g["learner_fn"], g["state"]
    pkg, lib, short, sha256, hashes = g["pkg"], g["lib"], g["short"], g["sha256"], g["hashes"]
    realpath, sep, isinstance_, getattr_, type_, id_ = os.path.realpath, os.sep, isinstance, getattr, type, id
    frames_now, threads_now, gc_callbacks = sys._current_frames, g["threading"].enumerate, g["gc"].callbacks
    gettrace, getprofile, get_ident, threading = sys.gettrace, sys.getprofile, g["get_ident"], g["threading"]
    loader_type, import_module = g["loader_type"], g["import_module"]
    # ipykernel が実行のたびに入れ替える（学習者の入力をフロントエンドへ回す・例外の表示）
    REBOUND = {"builtins": {"input", "raw_input"}, "getpass": {"getpass"},
               "sys": {"excepthook", "displayhook", "breakpointhook"}}
    # ライブラリ自身が名前を入れ替えるモジュール（pyplot はバックエンドを選ぶと show などを入れ替える）:
    # 学習者のコードで書いたものに替わったときだけ数える
    VOLATILE = ("matplotlib.pyplot",)
    DESCRIPTORS = (property, classmethod, staticmethod)
    base = {}
    type_dict = type.__dict__["__dict__"].__get__  # クラスの __dict__（メタクラスの書き換えを通らずに）
    partial_func = partial.__dict__["func"].__get__

    def items(v, kind):
        """list・dict の中身を、学習者の書いたメソッド（__iter__ など）を呼ばずに写す。"""
        return kind.copy(v) if isinstance_(v, kind) else kind()

    def origin(v, depth=0):
        """学習者のコードで書いたもの（関数、partial、学習者のクラスとそのインスタンス）か。学習者のオブジェクトの
        __getattr__ やプロパティを呼ばないように、関数・partial の中身と、クラスの __dict__ だけを見る。"""
        try:
            if isinstance_(v, FunctionType):
                return learner_fn(v)
            if isinstance_(v, partial):
                return depth < 3 and origin(partial_func(v), depth + 1)
            d = type_dict(v if isinstance_(v, type) else type_(v))
            return any(isinstance_(x, FunctionType) and learner_fn(x) for x in list(d.values()))
        except Exception:
            return False

    def method(x):
        return isinstance_(x, DESCRIPTORS) or (callable(x) and not isinstance_(x, weakref.ref))

    def own_classes(name, d):
        return {k: v for k, v in d.items() if isinstance_(v, type) and getattr_(v, "__module__", None) == name}

    def snapshot(names):
        """モジュールごとに: (モジュール, 呼び出せる名前 -> もの, そこで定義したクラス -> メソッドの写し)。"""
        out = {}
        for name in names:
            m = modules.get(name)
            d = getattr_(m, "__dict__", None)
            if not isinstance_(m, ModuleType) or not isinstance_(d, dict):
                continue
            attrs = {k: v for k, v in list(d.items()) if method(v) and not isinstance_(v, DESCRIPTORS)}
            classes = {k: {a: x for a, x in list(vars(c).items()) if method(x)}
                       for k, c in own_classes(name, attrs).items()}
            out[name] = (m, attrs, classes)
        return out

    def allowed(value):
        """ch6 自身（学習者版の監視 ch6.edition）が入れ替えたもの。"""
        code = getattr_(value, "__code__", None)
        return code is not None and code in state["edition"]

    def changed(snap, limit=6):
        found = []
        for name, (m, attrs, classes) in list(snap.items()):
            if len(found) >= limit:
                break
            skip = REBOUND.get(name, ())
            now = modules.get(name, m)
            if now is not m:
                found.append(name)
                continue
            d = getattr_(m, "__dict__", {})
            volatile = name in VOLATILE
            for k, v in attrs.items():
                cur = d.get(k, v)
                if cur is not v and k not in skip and not allowed(cur) and (not volatile or origin(cur)):
                    found.append(f"{name}.{k}")
            for k, cd in classes.items():
                cls = d.get(k)  # クラスごと替わっていれば、上で見つかっている
                cur = type_dict(cls) if cls is attrs[k] else {}
                found += [f"{name}.{k}.{a}" for a, v in cd.items() if cur.get(a, v) is not v]
        return found[:limit]

    def strays(limit=6):
        """学習者のセルの間に読み込まれたライブラリのモジュール（突き合わせの元がない）に入った、学習者の関数。"""
        found = []
        for name, m in list(modules.items()):
            if name in base["modules"] or name == "__main__" or name == "ch6" or name.startswith("ch6."):
                continue
            f = getattr_(m, "__file__", None)
            d = getattr_(m, "__dict__", None)
            if (isinstance_(f, str) and not f.startswith(lib)) or not isinstance_(d, dict):
                continue  # 学習者自身のモジュール
            found += [f"{name}.{k}" for k, v in list(d.items()) if not k.startswith("__") and callable(v) and origin(v)]
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

    def by_learner(obj):
        """学習者のコードで書いた探し方（ライブラリが足したもの、例えば absl の ReloadDetector は除く）。"""
        return origin(obj)

    def import_system():
        meta, hooks, cache = sys.meta_path, sys.path_hooks, sys.path_importer_cache
        found = [f"sys.{n} そのもの" for n, v, t in (("meta_path", meta, list), ("path_hooks", hooks, list),
                                                    ("path_importer_cache", cache, dict)) if type_(v) is not t]
        found += [f"sys.meta_path の {type_(f).__name__}" for f in items(meta, list)
                  if id_(f) not in base["meta"] and by_learner(f)]
        found += [f"sys.path_hooks の {getattr_(h, '__name__', '?') if isinstance_(h, FunctionType) else type_(h).__name__}"
                  for h in items(hooks, list) if id_(h) not in base["hooks"] and by_learner(h)]
        for key, finder in list(dict.items(items(cache, dict))):
            if finder is None or type_(key) is not str:
                continue
            where = short(realpath(key) + sep).rstrip(sep)
            if by_learner(finder):
                found.append(f"sys.path_importer_cache の {type_(finder).__name__}（{where}）")
            elif isinstance_(getattr_(finder, "path", None), str) and realpath(finder.path) != realpath(key):
                found.append(f"sys.path_importer_cache の {type_(finder).__name__}（{where} → {short(finder.path)}）")
        return found

    def clean_imports():
        """採点の準備: 学習者の探し方を外し、キャッシュを空に、ch6 のフォルダを sys.path の先頭に。
        .pyc は使わない（学習者が __pycache__ に書いたものを読まない）: ソースはあとでハッシュで確かめる。"""
        sys.meta_path = list(base["meta_list"]) + \
            [f for f in items(sys.meta_path, list) if id_(f) not in base["meta"] and not by_learner(f)]
        sys.path_hooks = list(base["hooks_list"])
        sys.path_importer_cache = {}
        path = [p for p in items(sys.path, list) if type_(p) is str]
        sys.path = [g["root"]] + [p for p in path if p != g["root"]]
        sys.dont_write_bytecode, sys.pycache_prefix = True, os.devnull + sep + "ch6-guard"

    def verify_files():
        """読み込み直した ch6 のモジュールが、ch6 のフォルダのファイルから、ホストの読んだ中身のまま読み込まれたか。"""
        found = []
        for name, m in list(modules.items()):
            if not (name == "ch6" or name.startswith("ch6.")) or m is None:
                continue
            f = realpath(getattr_(m, "__file__", None) or "")
            spec = getattr_(m, "__spec__", None)
            loader = getattr_(spec, "loader", None)
            if not f.startswith(pkg) or type_(loader) is not loader_type or set(vars(loader)) - {"name", "path"} \
                    or realpath(getattr_(loader, "path", "")) != f:
                found.append(f"{name}（{short(f) if f else '?'}）")
                continue
            try:
                with open(f, "rb") as fh:
                    digest = sha256(fh.read()).hexdigest()
            except OSError:
                digest = None
            if digest is None or hashes.get(f[len(pkg):].replace(sep, "/")) != digest:
                found.append(short(f))
        return found[:6]

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

    def integrity():
        """採点の準備の前と各チェックの前後に。1 つの確かめ方が（書き換えられたライブラリのせいで）失敗しても、
        ほかのものは確かめて送る。"""
        todo = [("replaced", lambda: changed(base["modules"])), ("replaced", strays), ("imports", import_system),
                ("thread", threads), ("introspect", callbacks)]
        if state["fresh"] is not None:
            todo += [("replaced", lambda: changed(state["fresh"])), ("files", verify_files)]
        for code, check in todo:
            try:
                found = check()
            except Exception:
                found = []
            if found:
                flag(code, "、".join(found))

    def record_base():
        """学習者のセルより前の状態を、突き合わせの元として覚える。"""
        base.update(meta={id_(f) for f in sys.meta_path}, hooks={id_(h) for h in sys.path_hooks},
                    meta_list=list(sys.meta_path), hooks_list=list(sys.path_hooks), threads=set(frames_now()),
                    modules=snapshot([m for m in list(modules)
                                      if not (m == "ch6" or m.startswith("ch6.") or m == "__main__")]))

    return dict(integrity=integrity, clean_imports=clean_imports, compare_old=compare_old, verify_files=verify_files,
                snapshot=snapshot, record_base=record_base, changed=changed)
