"""採点の監視: 学習者のコードが採点に手を出したことを、書き方によらず実行時に見つける（ch6-grade と nbgrader 版で共通）。

**なぜ同じカーネルで、監視つきか。** チェックは学習者の関数を呼ぶので、学習者のコードはどこで採点しても採点と
同じプロセスで動きます。関数を値で別のプロセスへ送っても（cloudpickle）、その関数の本体はチェックの最中にそこで動き、
ノートブックの変数・メッシュ・学習者の名前空間を見るチェック（6.6-3）も 73 問すべてで同じに保つのは難しくなります。
そこで採点は今までどおり学習者のセルのあとに同じカーネルで、インストール先から読み込み直したチェックで行い、
その周りを、学習者のコードが外せない・届かない仕組みで監視ます。

カーネルで動く部分は 2 つのファイルです（ホストが中身を読んでカーネルで実行し、読み込みはしません）:
:mod:`ch6.grading.guard_kernel`（ソケット・監査フック・採点の命令）と :mod:`ch6.grading.guard_integrity`
（突き合わせ）。このモジュールはホスト側です（カーネルに渡すコード、ソケット、備考の 1 行）。

1. **監査フック**（``sys.addaudithook``）を、学習者のセルより先に入れます。フックは外せません。学習者のコードからの
   ``ch6.checks`` の読み込みとファイルの読み出し（参照の答え）、``gc`` で他人のオブジェクトを探すこと、
   ``sys._current_frames``・``settrace``・``setprofile``・``addaudithook``・``ctypes``、関数の ``__code__`` と
   ライブラリの関数の既定値（``__defaults__``）の書き換え、チェックの最中のフレームの覗き見とスレッドの開始、
   採点のしくみ・ほかの提出物・成績簿を書き換えようとしたこと（隔離で書けなくても）を、名前の書き方（文字列の
   組み立て、``getattr``）によらず、起きたそのときに記録します。学習者のコードかどうかは、呼び出し元のコードの
   ファイル（ライブラリのフォルダの外）で決めます。
2. **記録はすぐにカーネルの外へ。** フックと採点の結果は、採点する側（ホスト）が持つ UNIX ソケットへ 1 行ずつ
   書きます。書いたものは消せません。行には、ホストが接続のあとにソケットで渡した nonce を付けます（nonce は
   ソースにも表示にも出ません）。nonce のない行・壊れた行は偽造として扱います。採点を始める合図もソケットで送るので、
   学習者のコードが採点の関数を呼び出したり差し替えたりはできません（採点の関数はフックの中にだけあります）。
   結果が届かなければ（ソケットを閉じた、採点を止めた）、それ自体を改ざんとして扱います。
3. **採点の前と各チェックの前後の突き合わせ。** 採点のコードが読み込むライブラリ（:func:`grading_imports`）は
   学習者のセルより先に読み込み、そのモジュールの呼び出せる名前すべて（``np.allclose``、ufunc の ``np.abs``、
   ``jnp.*``、``builtins``、``importlib`` など）と、そこで定義されたクラスのメソッドが替わっていないか。
   学習者のセルの間に読み込まれたライブラリに学習者の関数が入っていないか。``sys.meta_path``・``sys.path_hooks``・
   ``sys.path_importer_cache`` に学習者の探し方がないか。学習者のセルの間に読み込まれた ``ch6`` のモジュールの
   関数のコードが、ディスクから読み込み直したものと同じか。採点の準備では学習者の探し方とキャッシュを外して
   ``ch6`` をソースから読み込み直し、そのファイルが採点を始めたときの中身（SHA-256）のままかを確かめます。
   採点のあとは、読み込み直した ``ch6`` の関数とクラスが替わっていないか。
4. **スレッド。** 採点の準備と各チェックの前後に、学習者のコードを実行中か学習者の関数を target にしたスレッドが
   生きていれば記録します。

見つけたものは「採点のしくみへの干渉」として、その冊の全演習を ⚠️ ``tampered``（0 点）にし、何が見つかったかを
備考に 1 行で書きます（ch6-grade の表・CSV、nbgrader の採点のセル）。ただし、配ったままのセル（6.3a の
``from ch6.checks.s6_3a import gated_mlp`` など）からの読み込みは数えません。

**監視では防げないこと（先生へ）。** 学習者のコードは採点する人の権限で同じプロセスにいます。フックに触れない
ところ（フックの記録より前にファイル番号を当て推量で閉じる、``__globals__`` を辿る、1 回のチェックの中で差し替えて
元に戻す、C で書かれたオブジェクトの中身）は見つけられないことがあります。知らない人の提出物は隔離して
（:mod:`ch6.grading.isolate`、既定）採点してください。
"""
from __future__ import annotations

import ast
import asyncio
import functools
import hashlib
import json
import os
import secrets
import shutil
import socket
import tempfile
from pathlib import Path

FILE = "<ch6-guard>"  # 監視のコードのファイル名（学習者のコードと区別する）
AUDIT_EVENT = "ch6.grade"  # 採点を始める合図（ホストがソケットで命令を送ってから、この監査イベントを起こす）
POKE = f'__import__("sys").audit("{AUDIT_EVENT}")'
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # インストール先の ch6/

# 監視が送る指摘の種類 -> 備考・メッセージに書く 1 文の型（{} に中身）
FLAGS = {
    "reference": "参照の答え（{}）を学習者のコードが読み込みました",
    "introspect": "学習者のコードが採点のしくみを覗く・書き換える操作（{}）をしました",
    "frames": "チェックの最中に、学習者の関数がチェックのフレームを覗きました（{}）",
    "replaced": "採点に使うオブジェクトが差し替えられています（{}）",
    "imports": "読み込みのしくみが書き換えられています（{}）",
    "files": "採点のしくみのファイルが、採点を始めたときと違います（{}）",
    "write": "学習者のコードが、採点の外のファイルを書き換えようとしました（{}）",
    "thread": "学習者のコードがスレッドを動かしていました（{}）",
    "forged": "採点の通信に、監視以外から書き込まれた行がありました（{}）",
    "silent": "採点のしくみから結果が届きませんでした（{}）",
}

KERNEL_FILES = ("guard_integrity.py", "guard_kernel.py")  # カーネルで動く監視（この順に 1 つのコードにする）
PRELOAD = ("jax.numpy", "numpy.testing", "chex")  # 採点のコードが必ず使うライブラリ（ほかは grading_imports で探す）


def grading_imports() -> tuple[str, ...]:
    """カーネルでの採点（inkernel → _core → checking と ch6.checks）とそれが読み込む ch6 のモジュールが読み込む、
    ch6 の外のモジュールの名前（``from X import y`` は X と X.y）。監視は学習者のセルより先にこれらを読み込み、
    突き合わせの元にします（学習者が先に読み込んで書き換えたものを、採点が使わないように）。"""
    return _grading_imports(str(PACKAGE_DIR))


@functools.cache
def _grading_imports(package: str) -> tuple[str, ...]:
    pkg = Path(package)
    todo = ["ch6.grading.inkernel", "ch6._core", "ch6.checking"]
    todo += [".".join(("ch6", *f.relative_to(pkg).with_suffix("").parts)) for f in sorted((pkg / "checks").rglob("*.py"))]
    seen: set[str] = set()
    out: dict[str, None] = dict.fromkeys(PRELOAD)
    while todo:
        name = todo.pop().removesuffix(".__init__")
        path = pkg.parent.joinpath(*name.split("."))
        path = path / "__init__.py" if (path / "__init__.py").exists() else path.with_suffix(".py")
        if name in seen or not path.exists():
            continue
        seen.add(name)
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                parts = here.split(".")
                mod = ".".join(parts[:len(parts) - node.level + 1] + [node.module or ""]).strip(".") if node.level \
                    else node.module or ""
                names = [mod] + [f"{mod}.{a.name}" for a in node.names]
            else:
                continue
            for n in names:
                if n == "ch6" or n.startswith("ch6."):
                    todo.append(n)
                elif n and not n.startswith("__future__"):
                    out[n] = None
    return tuple(out)


def file_hashes(root: str | Path) -> dict[str, str]:
    """root/ch6 の .py ファイルそれぞれの SHA-256（ch6 からの相対パス -> 16 進）。採点の準備で、読み込み直した
    ch6 のモジュールがこの中身のまま読み込まれたかをカーネルが確かめます。"""
    pkg = Path(root) / "ch6"
    return {f.relative_to(pkg).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(pkg.rglob("*.py")) if "__pycache__" not in f.parts}


def kernel_source(path: str, root: str) -> str:
    """学習者のセルより先にカーネルで実行するコード（監視を入れる）。path はホストの UNIX ソケット、root は ch6 のあるフォルダ。"""
    here = Path(__file__).resolve().parent
    code = "\n".join((here / name).read_text(encoding="utf-8") for name in KERNEL_FILES)
    # 監視の名前は builtins の写しから引く（学習者のコードが builtins を書き換えても、監視は元のものを使う）
    return (f"exec(compile({code!r}, {FILE!r}, 'exec'), "
            "__ch6_ns := {'__builtins__': dict(vars(__import__('builtins')))})\n"
            f"__ch6_ns['install']({path!r}, {root!r}, globals(), __ch6_ns['integrity_tools'], "
            f"{file_hashes(root)!r}, {grading_imports()!r})\n"
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
