"""プロファイルを読む（6.11 節）: ``jax.profiler.trace`` が書くトレースから、デバイスの演算の区間を取り出す。

チップ（TPU、GPU）でも CPU の模擬デバイスでも同じ関数で読みます。::

    from ch6 import profile
    prof = profile.capture(lambda: step(state, tokens), runs=3)     # このマシンで測って読む
    prof = profile.recorded("decode_bf16")                           # リポジトリにある実際のチップのトレース
    prof.by_category()                # {"行列積": µs, ...}（1 ステップあたり）
    prof.top(5)                       # 時間の長い演算（名前ごとに合計）
    prof.roofline(chip)               # 演算ごとの、ルーフラインの下限に対する時間の比

- :class:`Op`: デバイスの演算 1 回（HLO の命令の名前、XLA の分類、区間、自分だけの時間、バイト、FLOP）
- :class:`Profile`: 1 つのトレースの演算と、実行したプログラム（XLA のモジュール）の区間
- :func:`read`: ``perfetto_trace.json.gz``（か ``*.trace.json.gz``、JSON の dict）を読む
- :func:`capture`: 関数を数回、``jax.profiler.trace`` の中で動かして読む（コンパイルとウォームアップは外で）
- :func:`category_of`: 演算を ch6.profile の分類（行列積、その他の融合、コピー・レイアウト、集団通信、制御）に分ける
- :func:`recorded` / :func:`recorded_names` / :func:`trim`: リポジトリに入れた、小さく切り詰めたチップのトレース

TPU のトレースでは、プロセス ``/device:TPU:0`` のスレッド ``XLA Ops`` に演算が、``XLA Modules`` に
プログラムの実行が 1 回ずつ並び、演算の ``args`` に ``hlo_category``・``bytes_accessed``・``model_flops``・
HLO の ``long_name`` があります。演算は入れ子になることがあり（``while`` の中の融合）、入れ子の子の時間を
引いた「自分だけの時間」を使うので、合計が 2 重になりません。CPU のトレースには分類もバイトもなく、
演算は ``/host:CPU`` の ``tf_XLAExecute`` スレッドに、名前だけで並びます（分類は名前から推し量ります）。
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import re
from collections import defaultdict
from importlib import resources
from pathlib import Path

__all__ = ["Op", "Profile", "CATEGORIES", "category_of", "read", "capture", "recorded", "recorded_names",
           "trim", "trim_folder", "measurements"]

MATMUL, FUSION, COPY, COLLECTIVE, CONTROL, OTHER = ("行列積", "その他の融合", "コピー・レイアウト", "集団通信",
                                                    "制御", "その他")
CATEGORIES = (MATMUL, FUSION, COPY, COLLECTIVE, CONTROL, OTHER)
IDLE = "空き（演算のない時間）"

_XLA_CATEGORY = {
    "convolution fusion": MATMUL, "convolution": MATMUL, "dot": MATMUL, "dot fusion": MATMUL,
    "loop fusion": FUSION, "input fusion": FUSION, "output fusion": FUSION, "custom fusion": FUSION,
    "non-fusion elementwise": FUSION, "broadcast": FUSION, "reduce": FUSION, "reduce-window": FUSION,
    "iota": FUSION, "select-and-scatter": FUSION, "scatter": FUSION, "gather": FUSION,
    "copy-start": COPY, "copy-done": COPY, "data formatting": COPY, "copy": COPY, "slice": COPY,
    "dynamic-update-slice": COPY, "dynamic-slice": COPY, "async-start": COPY, "async-done": COPY,
    "transpose": COPY, "bitcast": COPY, "concatenate": COPY, "pad": COPY,
    "while": CONTROL, "conditional": CONTROL, "call": CONTROL, "custom-call": OTHER,
}
_COLLECTIVE = re.compile(r"all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute|"
                         r"send|recv|psum|ppermute", re.I)
_CPU_MATMUL = re.compile(r"\b(dot|convolution|ynn_fusion|onednn|matmul|gemm)", re.I)
_CPU_COPY = re.compile(r"^(copy|slice|dynamic-update-slice|dynamic-slice|transpose|bitcast|concatenate|pad)", re.I)
_CPU_SKIP = re.compile(r"^(end: |ThunkExecutor|ThreadpoolListener|SlinkyThreadPool)")
# CPU の XLA の演算が並ぶスレッド（JAX 0.11 以降は tf_XLAExecute、0.10 は PjRt のクライアントと Eigen のスレッド）
_CPU_THREADS = ("tf_XLAExecute", "tf_XLAPjRtCpuClient", "tf_XLAEigen")
_TRACES = "data/traces"
_ROUNDING = 0.002        # µs: 切り詰めたトレースの時刻と長さは 0.001 µs に丸めてある


@dataclasses.dataclass(frozen=True)
class Op:
    """デバイスの演算 1 回。時間の単位はマイクロ秒（µs）、start はトレースの最初のプログラムの開始から。"""

    name: str                 # HLO の命令の名前（fusion.528 など）
    xla_category: str         # XLA の分類（"convolution fusion" など。CPU では ""）
    category: str             # ch6.profile の分類（CATEGORIES）
    start: float
    duration: float           # 区間の長さ
    self_time: float          # 入れ子の子の時間を引いた、この演算だけの時間
    bytes: int | None         # XLA が数えた読み書きのバイト（ないときは None）
    flops: int | None         # XLA が数えた FLOP（ないときは None）
    long_name: str            # HLO の命令の全文（形とレイアウトつき）
    step: int                 # 何回目のプログラムの実行の中か（0 から。外なら -1）

    @property
    def group(self) -> str:
        """名前から通し番号を除いたもの（fusion.528 → fusion）。同じ種類の演算をまとめるのに使う。"""
        return re.sub(r"[.\d]+$", "", self.name) or self.name


def category_of(xla_category: str, name: str = "", long_name: str = "") -> str:
    """XLA の分類（と名前）から ch6.profile の分類。集団通信は名前でも見分ける（非同期の start/done も含む）。"""
    text = f"{name} {long_name.split('(')[0] if long_name else ''}"
    if _COLLECTIVE.search(xla_category) or _COLLECTIVE.search(text):
        return COLLECTIVE
    if xla_category:
        return _XLA_CATEGORY.get(xla_category, OTHER)
    if _CPU_MATMUL.search(name):
        return MATMUL
    if _CPU_COPY.search(name):
        return COPY
    if name.startswith("while") or name.startswith("conditional"):
        return CONTROL
    return FUSION if "fusion" in name else OTHER


@dataclasses.dataclass
class Profile:
    """1 つのトレースの、1 つのデバイスの演算。steps はプログラムの実行の (名前, 開始, 長さ)。"""

    device: str
    ops: list[Op]
    steps: list[tuple[str, float, float]]
    meta: dict = dataclasses.field(default_factory=dict)

    @property
    def n_steps(self) -> int:
        return max(1, len(self.steps))

    def step_time(self) -> float:
        """1 回のプログラムの実行の長さの中央値（µs）。プログラムの区間がないトレースでは演算の区間の全体。"""
        import statistics

        if self.steps:
            return statistics.median(d for _, _, d in self.steps)
        if not self.ops:
            return 0.0
        return max(o.start + o.duration for o in self.ops) - min(o.start for o in self.ops)

    def busy(self) -> float:
        """演算が動いていた時間の合計（自分だけの時間の和、1 回の実行あたり µs）。"""
        return sum(o.self_time for o in self.ops) / self.n_steps

    def by_category(self, idle: bool = True) -> dict[str, float]:
        """ch6.profile の分類ごとの、1 回の実行あたりの時間（µs）。idle なら、プログラムの中で演算のない時間も足す。"""
        out = {c: 0.0 for c in CATEGORIES}
        for o in self.ops:
            out[o.category] += o.self_time / self.n_steps
        if idle and self.steps:
            out[IDLE] = max(0.0, self.step_time() - self.busy())
        return {k: v for k, v in out.items() if v > 0 or k == MATMUL}

    def by_group(self) -> list[dict]:
        """同じ種類の演算（:attr:`Op.group` と XLA の分類が同じもの）ごとの合計。時間の長い順。
        各行: name, xla_category, category, count（1 回の実行あたり）, time（µs、1 回の実行あたり）,
        bytes, flops（1 回の実行あたり。数えていないときは None）、example（HLO の 1 行）。"""
        rows: dict[tuple[str, str], dict] = {}
        for o in self.ops:
            r = rows.setdefault((o.group, o.xla_category), dict(
                name=o.group, xla_category=o.xla_category, category=o.category, count=0, time=0.0,
                bytes=0 if o.bytes is not None else None, flops=0 if o.flops is not None else None,
                example=o.long_name))
            r["count"] += 1
            r["time"] += o.self_time
            if r["bytes"] is not None and o.bytes is not None:
                r["bytes"] += o.bytes
            if r["flops"] is not None and o.flops is not None:
                r["flops"] += o.flops
        for r in rows.values():
            for k in ("count", "time", "bytes", "flops"):
                if r[k] is not None:
                    r[k] = r[k] / self.n_steps
        return sorted(rows.values(), key=lambda r: -r["time"])

    def top(self, n: int = 5) -> list[dict]:
        """時間の長い種類の演算 n 個（:meth:`by_group` の先頭）に、1 回の実行の時間に対する割合 share を足したもの。"""
        step = self.step_time() or 1.0
        return [dict(r, share=r["time"] / step) for r in self.by_group()[:n]]

    def roofline(self, chip, n: int | None = None) -> list[dict]:
        """種類ごとの演算の、ルーフラインの下限 max(FLOP ÷ 最大性能, バイト ÷ HBM の帯域) と、測った時間の比
        （ratio = 時間 ÷ 下限、1 に近いほど限界に近い）。バイトを数えていない演算は入らない。chip は
        ``ch6.hardware`` の行（flops と hbm_bw）。時間の長い順に n 個（None ならすべて）。"""
        out = []
        for r in self.by_group():
            if not r["bytes"] or r["time"] <= 0:
                continue
            bound = max((r["flops"] or 0) / chip.flops, r["bytes"] / chip.hbm_bw) * 1e6
            out.append(dict(r, bound=bound, ratio=r["time"] / bound if bound else float("inf"),
                            bandwidth=r["bytes"] / (r["time"] * 1e-6),
                            flop_rate=(r["flops"] or 0) / (r["time"] * 1e-6)))
        return out[:n] if n else out

    def gaps(self) -> list[tuple[float, float]]:
        """プログラムの実行と実行の間の、デバイスが何もしていない区間 (開始, 長さ)（µs）。"""
        spans = sorted((s, s + d) for _, s, d in self.steps)
        return [(a_end, b_start - a_end) for (_, a_end), (b_start, _) in zip(spans, spans[1:]) if b_start > a_end]

    def step_ops(self, step: int = 0) -> list[Op]:
        """step 回目の実行の中の演算（開始の順）。"""
        return sorted((o for o in self.ops if o.step == step), key=lambda o: o.start)


# ---------------------------------------------------------------- 読む

def _load(source) -> dict | list:
    if isinstance(source, (dict, list)):
        return source
    data = Path(source).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return json.loads(data)


def _names(events) -> tuple[dict, dict]:
    procs, threads = {}, {}
    for e in events:
        if e.get("ph") != "M":
            continue
        if e.get("name") == "process_name":
            procs[e.get("pid")] = e.get("args", {}).get("name", "")
        elif e.get("name") == "thread_name":
            threads[(e.get("pid"), e.get("tid"))] = e.get("args", {}).get("name", "")
    return procs, threads


def _int(x) -> int | None:
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


def read(source, device: str | None = None) -> Profile:
    """トレース（パス、または読み込んだ JSON）から、1 つのデバイスの :class:`Profile` を作る。

    device を省くと、最初の ``/device:…`` のプロセス（チップ）を、なければ CPU の ``tf_XLAExecute`` スレッドを読む。
    """
    data = _load(source)
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    meta = dict(data.get("ch6", {})) if isinstance(data, dict) else {}
    procs, threads = _names(events)
    devices = sorted(name for name in procs.values() if name.startswith("/device:"))
    device = device or (devices[0] if devices else "/host:CPU")
    pids = {pid for pid, name in procs.items() if name == device}
    if device.startswith("/device:"):
        op_threads = {k for k, v in threads.items() if k[0] in pids and v == "XLA Ops"}
        module_threads = {k for k, v in threads.items() if k[0] in pids and v == "XLA Modules"}
    else:
        op_threads = {k for k, v in threads.items() if k[0] in pids and v.startswith(_CPU_THREADS)}
        module_threads = set()
    raw_ops, modules = [], []
    for e in events:
        if e.get("ph") != "X":
            continue
        key = (e.get("pid"), e.get("tid"))
        if key in module_threads:
            modules.append((e.get("name", ""), float(e["ts"]), float(e.get("dur", 0.0))))
        elif key in op_threads and not _CPU_SKIP.match(e.get("name", "")):
            raw_ops.append(e)
    if not device.startswith("/device:"):       # CPU: 1 回の実行 = ThunkExecutor::Execute の区間
        modules = sorted((e.get("name", ""), float(e["ts"]), float(e.get("dur", 0.0))) for e in events
                         if e.get("ph") == "X" and (e.get("pid"), e.get("tid")) in op_threads
                         and e.get("name") == "ThunkExecutor::Execute")
        if not modules:
            modules = _cpu_runs(raw_ops)
    modules.sort(key=lambda m: m[1])
    t0 = min([m[1] for m in modules] + [float(e["ts"]) for e in raw_ops] or [0.0])
    return Profile(device=device, ops=_ops(raw_ops, modules, t0),
                   steps=[(n, s - t0, d) for n, s, d in modules], meta=meta)


def _cpu_runs(raw_ops: list[dict]) -> list[tuple[str, float, float]]:
    """小さなプログラムの CPU のトレースには実行の区間がない: 最初の演算の名前が現れるたびに、新しい実行とする。"""
    ops = sorted(raw_ops, key=lambda e: float(e["ts"]))
    if not ops:
        return []
    starts = [i for i, e in enumerate(ops) if e.get("name") == ops[0].get("name")]
    runs = []
    for a, b in zip(starts, starts[1:] + [len(ops)]):
        begin = float(ops[a]["ts"])
        end = max(float(e["ts"]) + float(e.get("dur", 0.0)) for e in ops[a:b])
        runs.append(("", begin, end - begin))
    return runs


def _ops(raw_ops: list[dict], modules, t0: float) -> list[Op]:
    """入れ子を解いて自分だけの時間を求め、Op にする（同じスレッドの区間は入れ子か、重ならない）。
    記録したトレースの時刻は 0.001 µs に丸めてあるので、次の演算が前の演算の終わりより 0.001 µs 早く始まる
    ことがある。前の演算の中に収まらない区間（終わりが前の演算の終わりより後）は入れ子ではなく、次の演算とする。"""
    raw_ops = sorted(raw_ops, key=lambda e: (e.get("tid"), float(e["ts"]), -float(e.get("dur", 0.0))))
    child = defaultdict(float)
    stack: list[tuple[int, float, object]] = []
    for i, e in enumerate(raw_ops):
        ts, end = float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0))
        while stack and (stack[-1][2] != e.get("tid") or stack[-1][1] <= ts + _ROUNDING
                         or end > stack[-1][1] + _ROUNDING):
            stack.pop()
        if stack:
            child[stack[-1][0]] += end - ts
        stack.append((i, end, e.get("tid")))
    out = []
    for i, e in enumerate(raw_ops):
        a = e.get("args", {})
        ts, dur = float(e["ts"]), float(e.get("dur", 0.0))
        step = next((k for k, (_, s, d) in enumerate(modules) if s - 1e-3 <= ts <= s + d + 1e-3), -1)
        xla = a.get("hlo_category", "")
        long_name = a.get("long_name", "")
        out.append(Op(name=e.get("name", ""), xla_category=xla, category=category_of(xla, e.get("name", ""), long_name),
                      start=ts - t0, duration=dur, self_time=max(0.0, dur - child[i]),
                      bytes=_int(a.get("bytes_accessed")), flops=_int(a.get("model_flops")),
                      long_name=long_name, step=step))
    return sorted(out, key=lambda o: o.start)


def capture(fn, runs: int = 3, logdir=None, device: str | None = None) -> Profile:
    """fn() を runs 回、``jax.profiler.trace`` の中で動かし、トレースを読む。fn は一度外で動かしてから
    （コンパイルとウォームアップ）測る。logdir を省くと一時フォルダに書いて、読んだ後に消す。"""
    import tempfile

    import jax

    jax.block_until_ready(fn())
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(logdir or tmp)
        with jax.profiler.trace(str(folder), create_perfetto_trace=True):
            out = None
            for _ in range(runs):
                out = fn()
            jax.block_until_ready(out)
        trace = max(folder.rglob("perfetto_trace.json.gz"), key=lambda p: p.stat().st_mtime)
        prof = read(trace, device)
    prof.meta.setdefault("backend", jax.default_backend())
    prof.meta.setdefault("device_kind", jax.devices()[0].device_kind)
    prof.meta.setdefault("jax", jax.__version__)
    return prof


# ---------------------------------------------------------------- 記録したトレース

def trim(source, meta: dict, steps: int | None = None, long_name_chars: int = 240) -> dict:
    """トレースを、デバイスの演算とプログラムの実行だけの小さな Chrome トレース（Perfetto でも開ける JSON）に
    切り詰める。steps を与えると最初の steps 回の実行の中だけ。meta（日付、チップ、JAX の版、測った値）は
    キー ``ch6`` に入れる。"""
    data = _load(source)
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    procs, threads = _names(events)
    device = next(name for name in sorted(procs.values()) if name.startswith("/device:"))
    pids = {pid for pid, name in procs.items() if name == device}
    keep_threads = {k for k, v in threads.items() if k[0] in pids and v in ("XLA Ops", "XLA Modules")}
    module_tid = {k for k in keep_threads if threads[k] == "XLA Modules"}
    modules = sorted(float(e["ts"]) for e in events if e.get("ph") == "X" and (e["pid"], e["tid"]) in module_tid)
    last = None
    if steps is not None and len(modules) > steps:
        last = modules[steps]
    out = [e for e in events if e.get("ph") == "M" and e.get("pid") in pids
           and (e.get("tid") is None or (e["pid"], e["tid"]) in keep_threads or e.get("name") == "process_name")]
    for e in events:
        if e.get("ph") != "X" or (e.get("pid"), e.get("tid")) not in keep_threads:
            continue
        if last is not None and float(e["ts"]) >= last:
            continue
        a = e.get("args", {})
        args = {k: a[k] for k in ("hlo_category", "bytes_accessed", "model_flops") if k in a}
        if "long_name" in a:
            args["long_name"] = a["long_name"][:long_name_chars]
        out.append({"ph": "X", "pid": e["pid"], "tid": e["tid"], "ts": round(float(e["ts"]), 3),
                    "dur": round(float(e.get("dur", 0.0)), 3), "name": e.get("name", ""), "args": args})
    return {"displayTimeUnit": "ns", "ch6": meta, "traceEvents": out}


def _traces_dir():
    return resources.files("ch6").joinpath(_TRACES)


def recorded_names() -> list[str]:
    """リポジトリ（パッケージ）に入れたチップのトレースの名前。"""
    return sorted(p.name.removesuffix(".json.gz") for p in _traces_dir().iterdir() if p.name.endswith(".json.gz"))


def recorded(name: str) -> Profile:
    """記録したチップのトレース name（:func:`recorded_names`）を読む。meta に日付、チップ、JAX の版、測った値。"""
    path = _traces_dir().joinpath(f"{name}.json.gz")
    if not path.is_file():
        raise ValueError(f"記録したトレース「{name}」はありません。あるのは {', '.join(recorded_names())} です。")
    return read(json.loads(gzip.decompress(path.read_bytes())))


def measurements() -> dict:
    """記録したトレースと同じ実行で測った値（``tools/chip_traces.py`` の measurements.json）。"""
    return json.loads(_traces_dir().joinpath("measurements.json").read_text())


# 記録するときに、それぞれのトレースから残す実行の回数（デコードは 8 ステップのうち 2、学習は 3 のうち 1）
KEEP_STEPS = {"decode_bf16": 2, "decode_bf16_token": 2, "decode_int8_before": 2, "decode_int8_after": 2,
              "decode_int8_token": 2, "train_step": 1, "train_step_b32": 1, "matmul": None, "stream": None}


def trim_folder(raw: Path, dest: Path) -> list[Path]:
    """``tools/chip_traces.py --out`` のフォルダの生のトレースを切り詰めて dest に書く（measurements.json も）。"""
    raw, dest = Path(raw), Path(dest)
    record = json.loads((raw / "measurements.json").read_text())
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(raw.glob("*.json.gz")):
        name = path.name.removesuffix(".json.gz")
        meta = {k: record[k] for k in ("date", "jax", "backend", "device_kind", "python")}
        meta["scenario"] = name
        small = trim(path, meta, steps=KEEP_STEPS.get(name, 1))
        target = dest / path.name
        target.write_bytes(gzip.compress(json.dumps(small, separators=(",", ":")).encode(), mtime=0))
        written.append(target)
    (dest / "measurements.json").write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    written.append(dest / "measurements.json")
    return written
