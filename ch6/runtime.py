"""実行環境（Colab・Kaggle・手元のマシン、TPU・GPU・CPU）を見分け、JAX が古ければ合う版を入れる。

``ch6.setup()`` が ``import jax`` の前に :func:`prepare` を呼びます。ここでは JAX も NumPy も読み込みません
（読み込んだ後に入れ直しても、動いているカーネルには効かないため）。

- Colab / Kaggle: 環境変数（``COLAB_RELEASE_TAG`` など / ``KAGGLE_KERNEL_RUN_TYPE`` など）
- TPU: ``TPU_*`` の環境変数、``/dev/accel<番号>``（v2〜v4）、``/dev/vfio/<番号>``（v5e 以降）、PCI の装置番号
- GPU: ``nvidia-smi`` が動くこと、``/dev/nvidia<番号>``。ドライバが対応する CUDA の版は ``nvidia-smi`` の表示から
- 入っている版: ``importlib.metadata``（``import jax`` はしない）

JAX が ``MIN_JAX`` より古い（または入っていない、または TPU / GPU 用の部品がない）とき、Colab と Kaggle では
``pip install -U "jax[tpu]>=MIN_JAX"``（GPU は ``jax[cuda12]`` か ``jax[cuda13]``、CPU は ``jax``）をこのセルで実行します。
``jax[tpu]`` は JAX と組になる ``libtpu`` を、``jax[cudaNN]`` は CUDA 用のプラグインを同じ版で入れます
（素の ``pip install -U jax`` は jaxlib だけを上げ、古い libtpu やプラグインが残って TPU / GPU が使えなくなります）。
手元のマシンでは何も入れず、そのマシンに合うコマンドを表示するだけです。

判定と文言は環境を引数で受け取る関数（:func:`detect`、:func:`plan`、:func:`status_line`、:func:`start_text`、
:func:`end_text`）に分けてあり、偽の環境で試験できます（``tests/test_runtime.py``）。
"""
from __future__ import annotations

import dataclasses
import glob
import importlib
import importlib.metadata
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping

COLAB_VARS = ("COLAB_RELEASE_TAG", "COLAB_BACKEND_VERSION", "COLAB_GPU")  # COLAB_GPU は CPU ランタイムでも "0" で入る
KAGGLE_VARS = ("KAGGLE_KERNEL_RUN_TYPE", "KAGGLE_URL_BASE")
TPU_VARS = ("TPU_ACCELERATOR_TYPE", "TPU_NAME", "TPU_WORKER_ID", "COLAB_TPU_ADDR")
# PCI の装置番号（Google のベンダー番号 0x1ae0 のうち TPU のもの。JAX 自身の判定 jax/_src/hardware_utils.py と同じ表。
# 同じベンダー番号の gVNIC（ネットワーク装置）は含めない）
GOOGLE_PCI_VENDOR = "0x1ae0"
TPU_PCI_DEVICES = frozenset({"0x0027", "0x0056", "0x005e", "0x0062", "0x0063", "0x006f", "0x0076", "0x007c", "0x0083"})
# 版を読む配布物（import せずに importlib.metadata で）
DISTS = ("jax", "jaxlib", "libtpu", "libtpu-nightly", "jax-cuda12-plugin", "jax-cuda13-plugin", "numpy", "scipy",
         "ml_dtypes")
# 配布物と、それを読み込んだときの sys.modules の名前（入れ直した後に再起動が要るかを見るため）
MODULES = {"jax": "jax", "jaxlib": "jaxlib", "numpy": "numpy", "scipy": "scipy", "ml_dtypes": "ml_dtypes",
           "libtpu": "libtpu", "jax-cuda12-plugin": "jax_cuda12_plugin", "jax-cuda13-plugin": "jax_cuda13_plugin"}

TPU_PIN = "jax[tpu]:libtpu"  # versions の中で、入っている jax が jax[tpu] に求める libtpu（例 "libtpu==0.0.50.*"）
HOST_NAMES = {"colab": "Colab", "kaggle": "Kaggle", "local": "このマシン"}
RESTART = {
    "colab": "メニューの「ランタイム → セッションを再起動」",
    "kaggle": "メニューの「Run → Restart & clear cell outputs」",
    "local": "カーネルの再起動（JupyterLab ではメニューの「カーネル → カーネルを再起動」）",
}


def version_tuple(text: str) -> tuple[int, ...]:
    """"0.12.0.1" -> (0, 12, 0, 1)。数字でない部分（rc や dev）は無視する。"""
    parts = []
    for piece in text.split("+")[0].split("."):
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group()))
        if m.group() != piece:  # "0rc1" などの後ろは比べない
            break
    return tuple(parts)


@dataclasses.dataclass(frozen=True)
class Machine:
    """どこで（host: colab / kaggle / local）、何の上で（accel: tpu / gpu / cpu）動いているか。"""

    host: str
    accel: str
    cuda: tuple[int, ...] | None = None  # GPU のドライバが対応する CUDA の版（nvidia-smi の表示）

    @property
    def hosted(self) -> bool:
        return self.host != "local"

    @property
    def where(self) -> str:
        """例: 「Colab の TPU ランタイム」「このマシン（GPU、CUDA 12.4）」"""
        accel = {"tpu": "TPU", "gpu": "GPU", "cpu": "CPU"}[self.accel]
        if self.hosted:
            return f"{HOST_NAMES[self.host]} の {accel} ランタイム"
        if self.accel == "gpu" and self.cuda:
            accel += f"、CUDA {'.'.join(map(str, self.cuda))}"
        return f"{HOST_NAMES[self.host]}（{accel}）"


def detect_host(environ: Mapping[str, str]) -> str:
    if any(k in environ for k in COLAB_VARS):
        return "colab"
    if any(k in environ for k in KAGGLE_VARS):
        return "kaggle"
    return "local"


def cuda_version(nvidia_smi: str | None) -> tuple[int, ...] | None:
    """nvidia-smi の見出し「CUDA Version: 12.4」から (12, 4)。"""
    m = re.search(r"CUDA Version:\s*(\d+)\.(\d+)", nvidia_smi or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def detect(environ: Mapping[str, str], dev: Iterable[str] = (), nvidia_smi: str | None = None,
           tpu_chips: int = 0) -> Machine:
    """環境変数、/dev の下の名前（"accel0"、"vfio/0"、"nvidia0" など）、nvidia-smi の出力（動かなければ None）、
    PCI で見えた TPU チップの数から、実行環境を決める。"""
    host = detect_host(environ)
    dev = set(dev)
    has = lambda pattern: any(re.fullmatch(pattern, d) for d in dev)  # noqa: E731
    if any(environ.get(k) for k in TPU_VARS) or has(r"accel\d+") or tpu_chips > 0:
        return Machine(host, "tpu")
    if nvidia_smi is not None or has(r"nvidia\d+"):
        return Machine(host, "gpu", cuda_version(nvidia_smi))
    # /dev/vfio/<番号> は TPU v5e 以降の見え方。手元のマシンでは仮想マシンへの装置の受け渡しでも現れるので、
    # Colab・Kaggle のときだけ TPU とみなす（手元の TPU VM は上の PCI の番号で分かる）
    if host != "local" and has(r"vfio/\d+"):
        return Machine(host, "tpu")
    return Machine(host, "cpu")


def jax_extra(machine: Machine) -> str:
    """pip の extra: TPU は tpu、GPU はドライバの CUDA が 13 以上なら cuda13、それ以外は cuda12、CPU はなし。"""
    if machine.accel == "tpu":
        return "tpu"
    if machine.accel == "gpu":
        return "cuda13" if machine.cuda and machine.cuda >= (13,) else "cuda12"
    return ""


def requirement(machine: Machine, min_jax: str) -> str:
    extra = jax_extra(machine)
    return f"jax[{extra}]>={min_jax}" if extra else f"jax>={min_jax}"


def command(machine: Machine, min_jax: str) -> str:
    """学習者に見せるコマンド（ターミナル用。ノートブックのセルでは先頭に ! を付ける）。"""
    return f'pip install -U "{requirement(machine, min_jax)}"'


def pip_args(machine: Machine, min_jax: str) -> list[str]:
    return ["-m", "pip", "install", "-q", "-U", requirement(machine, min_jax)]


def accel_build(machine: Machine, versions: Mapping[str, str | None]) -> str | None:
    """TPU / GPU を使うための部品の名前と版（例「libtpu 0.0.50」）。CPU なら「CPU 用」。部品がなければ None。"""
    if machine.accel == "tpu":
        # jax[tpu] は組になる libtpu の版を決めている（例 libtpu==0.0.50.*）。違う版の libtpu では TPU が使えない
        wanted = versions.get(TPU_PIN) or ""
        for name in ("libtpu", "libtpu-nightly"):
            have = versions.get(name)
            if have and (not wanted.startswith(name + "==") or pin_matches(have, wanted.split("==", 1)[1])):
                return f"{name} {have}"
        return None
    if machine.accel == "gpu":
        jaxlib = versions.get("jaxlib") or ""
        if "+cuda" in jaxlib:  # 古い形: CUDA 入りの jaxlib
            return f"jaxlib {jaxlib}"
        for name in ("jax-cuda13-plugin", "jax-cuda12-plugin"):
            # プラグインは jaxlib と同じ版でないと JAX に使われない
            if versions.get(name) and version_tuple(versions[name]) == version_tuple(jaxlib):
                return f"{name} {versions[name]}"
        return None
    return "CPU 用"


def pin_matches(version: str, pin: str) -> bool:
    """"0.0.50" は "0.0.50.*" に合う。"*" がなければ同じ版だけ。"""
    if pin.endswith(".*"):
        return (version + ".").startswith(pin[:-1])
    return version == pin


@dataclasses.dataclass(frozen=True)
class Plan:
    """このセルで何をするか。reason: ok / missing（JAX がない）/ old（MIN_JAX より古い）/ no_build（TPU・GPU 用の部品がない）"""

    machine: Machine
    found: str | None
    reason: str
    command: str
    install: bool
    min_jax: str


def plan(machine: Machine, versions: Mapping[str, str | None], min_jax: str, *, cpu_only: bool = False,
         grading: bool = False) -> Plan:
    """入っている版（versions: 配布物の名前 → 版、なければ None）から、入れ直すかどうかを決める。

    cpu_only（JAX_PLATFORMS=cpu）のときは TPU / GPU 用の部品がなくても困らない。grading（採点中）は何も入れない。"""
    found = versions.get("jax")
    if not found:
        reason = "missing"
    elif version_tuple(found) < version_tuple(min_jax):
        reason = "old"
    elif machine.accel != "cpu" and not cpu_only and accel_build(machine, versions) is None:
        reason = "no_build"
    else:
        reason = "ok"
    install = reason != "ok" and machine.hosted and not grading
    return Plan(machine, found, reason, command(machine, min_jax), install, min_jax)


def _build_name(machine: Machine) -> str:
    return {"tpu": "TPU 用", "gpu": "GPU 用", "cpu": "CPU 用"}[machine.accel]


def _parts(machine: Machine) -> str:
    return "libtpu" if machine.accel == "tpu" else f"jax-{jax_extra(machine)}-plugin"


def _mismatch(p: Plan, versions: Mapping[str, str | None]) -> str:
    """部品はあるが版が合わないときはそう言う（pip が jax と jaxlib だけを上げたあとなど）。"""
    if p.machine.accel == "tpu":
        have = [f"{n} {versions[n]}" for n in ("libtpu", "libtpu-nightly") if versions.get(n)]
        if have:
            return f"が JAX と組になる版ではありません（{have[0]}、要るのは {versions.get(TPU_PIN)}）"
    else:
        plugin = _parts(p.machine)
        have = versions.get(plugin)
        if have:
            return f"が jaxlib と同じ版ではないので使われません（{plugin} {have}、jaxlib {versions.get('jaxlib')}）"
    return "がありません"


def found_text(p: Plan, versions: Mapping[str, str | None]) -> str:
    """見つかったもの（文の形、句点なし）。"""
    if p.reason == "missing":
        return "JAX が入っていません"
    if p.reason == "old":
        return f"JAX {p.found} が入っています（この講座には JAX {p.min_jax} 以上が要ります）"
    if p.reason == "no_build":
        return f"JAX {p.found} が入っていますが、{p.machine.accel.upper()} を使う部品（{_parts(p.machine)}）{_mismatch(p, versions)}"
    return f"JAX {p.found}（{accel_build(p.machine, versions)}）が入っています"


def too_old_line(found: str, min_jax: str, cmd: str, where: str | None = None) -> str:
    """手元のマシンで JAX が古いときの 1 行（env.version_notes も使う）。"""
    fit = f"{where}に合う" if where else ""
    return (f"⚠️ JAX {found} は古すぎます。この講座は JAX {min_jax} 以上で動作を確かめているので、"
            "エラーになるセルやチェックがあるかもしれません。"
            f"{fit}次のコマンドで更新し、ランタイム（カーネル）を再起動してください: {cmd}")


def status_line(p: Plan, versions: Mapping[str, str | None]) -> str | None:
    """このセルで何も入れないときの 1 行。手元のマシンで問題がなければ None（保存した出力を変えないため）。"""
    m = p.machine
    if p.reason == "ok":
        if m.hosted:
            return f"✅ {m.where}です。{found_text(p, versions)}。入れ直さずにそのまま使います。"
        return None
    if m.hosted:  # 採点中の Colab・Kaggle
        return f"⚠️ {m.where}です。{found_text(p, versions)}。採点中は入れ直しません。次のコマンドで更新してください: {p.command}"
    if p.reason == "old":
        return too_old_line(p.found or "", p.min_jax, p.command, m.where)
    if p.reason == "missing":
        return f"⚠️ JAX が入っていません。{m.where}に合う次のコマンドで入れてから、{RESTART['local']}をしてください: {p.command}"
    return (f"ℹ️ {m.where}です。{found_text(p, versions)}。いまは CPU で動きます。"
            f"{m.accel.upper()} を使うには、次のコマンドで入れてから{RESTART['local']}をしてください: {p.command}")


def start_text(p: Plan, versions: Mapping[str, str | None]) -> str:
    """入れ直す前に表示する前半（同じ行に end_text が続く）。"""
    return f"🔧 {p.machine.where}です。{found_text(p, versions)}。{p.command} で入れます…"


def restart_needed(before: Mapping[str, str | None], after: Mapping[str, str | None],
                   loaded: Iterable[str]) -> list[str]:
    """版が変わった配布物のうち、このカーネルですでに読み込まれていたもの（再起動しないと新しい版が使われない）。"""
    return [d for d in loaded if before.get(d) != after.get(d)]


def end_text(p: Plan, after: Mapping[str, str | None], returncode: int, stale: Iterable[str] = (),
             pip_error: str = "") -> str:
    """入れ直した後に表示する後半: 何を入れたか、再起動が要るか、失敗したならどうするか。"""
    m = p.machine
    restart = RESTART[m.host]
    if returncode != 0 or plan(m, after, p.min_jax).reason in ("missing", "old"):
        last = f"（{pip_error}）" if pip_error else ""
        net = "右のパネルの「Internet」をオンにしてから、" if m.host == "kaggle" else ""
        return (f" ⚠️ 入れられませんでした（pip の終了コード {returncode}{last}）。{net}{restart}を選んでこのセルを実行し直すか、"
                f"新しいセルで次を実行してから再起動してください: !{p.command}")
    build = accel_build(m, after)
    built = f"{_build_name(m)}、{build}" if build and m.accel != "cpu" else _build_name(m)
    text = f" JAX {after.get('jax')}（{built}）を入れました。"
    stale = list(stale)
    if stale:
        text += (f"{', '.join(stale)} がこのセルより前に読み込まれていたため、新しい版は再起動の後に使われます。"
                 f"{restart}を選び、このセルから実行し直してください。")
    return text


# ---- ここから下は本物の環境を読む（試験では上の関数に偽の環境を渡す） ----


def probe_dev(root: str = "/dev") -> set[str]:
    names: set[str] = set()
    for pattern, prefix in ((os.path.join(root, "*"), ""), (os.path.join(root, "vfio", "*"), "vfio/")):
        names.update(prefix + os.path.basename(p) for p in glob.glob(pattern))
    return names


def probe_nvidia_smi() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def probe_tpu_chips(root: str = "/sys/bus/pci/devices") -> int:
    chips = 0
    for vendor in glob.glob(os.path.join(root, "*", "vendor")):
        try:
            folder = os.path.dirname(vendor)
            with open(vendor) as f, open(os.path.join(folder, "device")) as g:
                if f.read().strip() == GOOGLE_PCI_VENDOR and g.read().strip() in TPU_PCI_DEVICES:
                    chips += 1
        except OSError:
            continue
    return chips


def probe(environ: Mapping[str, str] | None = None) -> Machine:
    environ = os.environ if environ is None else environ
    return detect(environ, probe_dev(), probe_nvidia_smi(), probe_tpu_chips())


def installed_versions(names: Iterable[str] = DISTS) -> dict[str, str | None]:
    importlib.invalidate_caches()
    found: dict[str, str | None] = {}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    found[TPU_PIN] = tpu_pin(_requires("jax")) if found.get("jax") else None
    return found


def _requires(name: str) -> list[str]:
    try:
        return importlib.metadata.requires(name) or []
    except importlib.metadata.PackageNotFoundError:
        return []


def tpu_pin(requires: Iterable[str]) -> str | None:
    """jax の Requires-Dist から、extra "tpu" の libtpu の指定（"libtpu==0.0.50.*"）。"""
    for req in requires:
        m = re.match(r"\s*(libtpu(?:-nightly)?)\s*==\s*([^\s;,]+)\s*;.*extra\s*==\s*[\"']tpu[\"']", req)
        if m:
            return f"{m.group(1)}=={m.group(2)}"
    return None


def run_pip(args: list[str]) -> tuple[int, str]:
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True)
    lines = [ln.strip() for ln in (out.stderr or out.stdout or "").splitlines() if ln.strip().startswith("ERROR")]
    return out.returncode, (lines[-1][:200] if lines else "")


def prepare(min_jax: str, *, cpu_only: bool = False, environ: Mapping[str, str] | None = None) -> Plan:
    """``import jax`` の前に呼ぶ。必要なら合う JAX を入れ、何が見つかり何を入れたかを 1 行で表示する。"""
    environ = os.environ if environ is None else environ
    machine = probe(environ)
    before = installed_versions()
    p = plan(machine, before, min_jax, cpu_only=cpu_only, grading=bool(environ.get("CH6_GRADING")))
    if not p.install:
        line = status_line(p, before)
        if line:
            print(line)
        return p
    loaded = [d for d, mod in MODULES.items() if mod in sys.modules]
    print(start_text(p, before), end="", flush=True)
    returncode, error = run_pip(pip_args(machine, min_jax))
    after = installed_versions()
    print(end_text(p, after, returncode, restart_needed(before, after, loaded), error), flush=True)
    return dataclasses.replace(p, found=after.get("jax"))
