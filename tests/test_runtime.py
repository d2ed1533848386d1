"""ch6.runtime: 実行環境の見分け方、入れるコマンドの選び方、表示する 1 行（偽の環境で）。"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ch6 import env, runtime

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
MIN = env.MIN_JAX
NEW = env.TESTED_JAX

SMI_T4 = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|   0  Tesla T4                       Off |   00000000:00:04.0 Off |                    0 |
"""
SMI_KAGGLE = SMI_T4.replace("550.54.15", "560.35.03").replace("12.4", "12.6")
SMI_CUDA13 = SMI_T4.replace("550.54.15", "580.65.06").replace("12.4", "13.0")

# 6 つの実行環境（環境変数、/dev の下の名前、nvidia-smi の出力）
ENVIRONMENTS = {
    "colab_tpu": ({"COLAB_RELEASE_TAG": "release-colab-external_20260101-060000_RC00", "COLAB_GPU": "0"},
                  {"vfio/0", "vfio/vfio", "null"}, None),
    "colab_gpu": ({"COLAB_RELEASE_TAG": "release-colab-external_20260101-060000_RC00", "COLAB_GPU": "1"},
                  {"nvidia0", "nvidiactl", "null"}, SMI_T4),
    "colab_cpu": ({"COLAB_RELEASE_TAG": "release-colab-external_20260101-060000_RC00", "COLAB_GPU": "0"},
                  {"null", "vfio/vfio"}, None),
    "kaggle_tpu": ({"KAGGLE_KERNEL_RUN_TYPE": "Interactive", "KAGGLE_URL_BASE": "https://www.kaggle.com",
                    "TPU_ACCELERATOR_TYPE": "v3-8"}, {"accel0", "accel1", "accel2", "accel3"}, None),
    "kaggle_gpu": ({"KAGGLE_KERNEL_RUN_TYPE": "Interactive", "KAGGLE_URL_BASE": "https://www.kaggle.com"},
                   {"nvidia0", "nvidia1", "nvidiactl"}, SMI_KAGGLE),
    "laptop": ({"HOME": "/home/hanako", "SHELL": "/bin/zsh"}, {"null", "tty"}, None),
}
EXPECTED = {  # host, accel, extra
    "colab_tpu": ("colab", "tpu", "tpu"),
    "colab_gpu": ("colab", "gpu", "cuda12"),
    "colab_cpu": ("colab", "cpu", ""),
    "kaggle_tpu": ("kaggle", "tpu", "tpu"),
    "kaggle_gpu": ("kaggle", "gpu", "cuda12"),
    "laptop": ("local", "cpu", ""),
}
OLD = "0.8.1"


def machine(name: str) -> runtime.Machine:
    environ, dev, smi = ENVIRONMENTS[name]
    return runtime.detect(environ, dev, smi)


def stale(m: runtime.Machine, jax: str | None = OLD) -> dict[str, str | None]:
    """その実行環境にあらかじめ入っている古い JAX（TPU なら libtpu、GPU ならプラグインも同じ版）。"""
    v = dict.fromkeys(runtime.DISTS)
    v.update(jax=jax, jaxlib=jax, numpy="2.0.2")
    if m.accel == "tpu":
        v["libtpu"], v[runtime.TPU_PIN] = "0.0.27", "libtpu==0.0.27.*"
    if m.accel == "gpu":
        v[f"jax-{runtime.jax_extra(m)}-plugin"] = jax
    return v


def upgraded(m: runtime.Machine) -> dict[str, str | None]:
    v = stale(m, NEW)
    if m.accel == "tpu":
        v["libtpu"], v[runtime.TPU_PIN] = "0.0.50", "libtpu==0.0.50.*"
    return v


@pytest.mark.parametrize("name", ENVIRONMENTS)
def test_detects_each_runtime_and_picks_the_extra(name):
    m = machine(name)
    host, accel, extra = EXPECTED[name]
    assert (m.host, m.accel, runtime.jax_extra(m)) == (host, accel, extra)
    req = f"jax[{extra}]>={MIN}" if extra else f"jax>={MIN}"
    p = runtime.plan(m, stale(m), MIN)
    assert p.reason == "old" and p.command == f'pip install -U "{req}"'
    assert runtime.pip_args(m, MIN) == ["-m", "pip", "install", "-q", "-U", req]
    assert p.install == (host != "local"), "Colab・Kaggle だけで入れ、手元のマシンでは入れない"


@pytest.mark.parametrize("name", [n for n in ENVIRONMENTS if n != "laptop"])
def test_hosted_runtime_prints_one_line_found_and_installed(name):
    m = machine(name)
    p = runtime.plan(m, stale(m), MIN)
    line = runtime.start_text(p, stale(m)) + runtime.end_text(p, upgraded(m), 0)
    assert "\n" not in line
    where = {"colab": "Colab", "kaggle": "Kaggle"}[m.host] + " の " + m.accel.upper() + " ランタイムです。"
    assert line.startswith("🔧 " + where), line
    assert f"JAX {OLD} が入っています（この講座には JAX {MIN} 以上が要ります）" in line
    assert f"{p.command} で入れます…" in line
    build = {"tpu": "TPU 用、libtpu 0.0.50", "gpu": f"GPU 用、jax-cuda12-plugin {NEW}", "cpu": "CPU 用"}[m.accel]
    assert line.endswith(f" JAX {NEW}（{build}）を入れました。"), line
    assert "再起動" not in line


def test_colab_tpu_line_in_full():
    m = machine("colab_tpu")
    p = runtime.plan(m, stale(m), MIN)
    line = runtime.start_text(p, stale(m)) + runtime.end_text(p, upgraded(m), 0)
    assert line == (f"🔧 Colab の TPU ランタイムです。JAX 0.8.1 が入っています（この講座には JAX {MIN} 以上が要ります）。"
                    f'pip install -U "jax[tpu]>={MIN}" で入れます… JAX {NEW}（TPU 用、libtpu 0.0.50）を入れました。')


def test_laptop_installs_nothing_and_prints_the_command():
    m = machine("laptop")
    p = runtime.plan(m, stale(m), MIN)
    assert not p.install
    line = runtime.status_line(p, stale(m))
    assert line == env.version_notes(OLD)[0].replace("次のコマンド", "このマシン（CPU）に合う次のコマンド")
    assert line.startswith(f"⚠️ JAX {OLD} は古すぎます") and line.endswith(f'pip install -U "jax>={MIN}"')
    assert "再起動" in line and "\n" not in line
    assert runtime.status_line(runtime.plan(m, upgraded(m), MIN), upgraded(m)) is None, "新しければ何も表示しない"


def test_laptop_with_a_cuda13_driver_is_told_the_cuda13_extra():
    m = runtime.detect({}, {"nvidia0"}, SMI_CUDA13)
    assert (m.accel, m.cuda, runtime.jax_extra(m)) == ("gpu", (13, 0), "cuda13")
    p = runtime.plan(m, stale(m), MIN)
    assert not p.install and p.command == f'pip install -U "jax[cuda13]>={MIN}"'
    assert "このマシン（GPU、CUDA 13.0）に合う" in runtime.status_line(p, stale(m))


def test_gpu_without_nvidia_smi_falls_back_to_cuda12():
    m = runtime.detect({"COLAB_GPU": "1"}, {"nvidia0"}, None)
    assert (m.accel, runtime.jax_extra(m)) == ("gpu", "cuda12")


def test_tpu_from_environment_or_pci_alone():
    assert runtime.detect({"TPU_ACCELERATOR_TYPE": "v5litepod-1"}).accel == "tpu"
    assert runtime.detect({}, tpu_chips=4).accel == "tpu"
    assert runtime.detect({}, {"vfio/0"}).accel == "cpu", "手元の vfio は仮想マシンの装置の受け渡しでもある"
    assert runtime.detect({"KAGGLE_KERNEL_RUN_TYPE": "Interactive"}, {"vfio/0"}).accel == "tpu"


def test_up_to_date_hosted_runtime_says_so_and_installs_nothing():
    m = machine("colab_gpu")
    p = runtime.plan(m, upgraded(m), MIN)
    assert (p.reason, p.install) == ("ok", False)
    assert runtime.status_line(p, upgraded(m)) == (
        f"✅ Colab の GPU ランタイムです。JAX {NEW}（jax-cuda12-plugin {NEW}）が入っています。入れ直さずにそのまま使います。")


def test_cpu_only_jax_on_a_gpu_runtime_gets_the_gpu_build():
    m = machine("kaggle_gpu")
    v = stale(m, NEW)
    v["jax-cuda12-plugin"] = None
    p = runtime.plan(m, v, MIN)
    assert (p.reason, p.install) == ("no_build", True)
    assert "GPU を使う部品（jax-cuda12-plugin）がありません" in runtime.start_text(p, v)
    # プラグインが jaxlib と違う版なら JAX に使われないので、ないのと同じ
    v["jax-cuda12-plugin"] = "0.11.2"
    p = runtime.plan(m, v, MIN)
    assert p.reason == "no_build"
    assert f"jax-cuda12-plugin 0.11.2、jaxlib {NEW}" in runtime.start_text(p, v)
    # JAX_PLATFORMS=cpu（ch6.setup(cpu=True)）なら部品は要らない
    assert runtime.plan(m, dict(v, **{"jax-cuda12-plugin": None}), MIN, cpu_only=True).reason == "ok"


def test_jax_upgraded_without_its_libtpu_gets_the_tpu_build():
    """pip が jax と jaxlib だけを上げた TPU（古い libtpu が残る）は、入れ直す。"""
    m = machine("kaggle_tpu")
    v = dict(upgraded(m), libtpu="0.0.27")
    p = runtime.plan(m, v, MIN)
    assert (p.reason, p.install) == ("no_build", True)
    assert "libtpu）が JAX と組になる版ではありません（libtpu 0.0.27、要るのは libtpu==0.0.50.*）" in runtime.start_text(p, v)
    assert runtime.plan(m, dict(v, libtpu="0.0.50.1"), MIN).reason == "ok"
    assert runtime.tpu_pin(['jaxlib==0.12.0.1; extra == "tpu"', 'libtpu==0.0.50.*; extra == "tpu"']) == "libtpu==0.0.50.*"
    assert runtime.tpu_pin(["libtpu-nightly==0.1.dev20240729; extra == 'tpu'"]) == "libtpu-nightly==0.1.dev20240729"


def test_grading_never_installs():
    m = machine("colab_cpu")
    p = runtime.plan(m, stale(m), MIN, grading=True)
    assert not p.install and "採点中は入れ直しません" in runtime.status_line(p, stale(m))


@pytest.mark.parametrize("name,menu", [("colab_tpu", "「ランタイム → セッションを再起動」"),
                                       ("kaggle_gpu", "「Run → Restart & clear cell outputs」")])
def test_jax_imported_before_the_cell_says_how_to_restart(name, menu):
    m = machine(name)
    p = runtime.plan(m, stale(m), MIN)
    stale_mods = runtime.restart_needed(stale(m), upgraded(m), ["jax", "jaxlib", "numpy"])
    assert stale_mods == ["jax", "jaxlib"]
    line = runtime.start_text(p, stale(m)) + runtime.end_text(p, upgraded(m), 0, stale_mods)
    assert p.command in line and menu in line and "このセルより前に読み込まれていた" in line and "\n" not in line


def test_failed_pip_says_what_to_run():
    m = machine("kaggle_tpu")
    p = runtime.plan(m, stale(m), MIN)
    tail = runtime.end_text(p, stale(m), 1, pip_error="ERROR: No matching distribution found")
    assert "入れられませんでした" in tail and f"!{p.command}" in tail and "Internet" in tail


def test_prepare_installs_once_and_prints_one_line(monkeypatch, capsys):
    m = machine("colab_tpu")
    versions = iter([stale(m), upgraded(m)])
    calls = []
    monkeypatch.setattr(runtime, "probe", lambda environ=None: m)
    monkeypatch.setattr(runtime, "installed_versions", lambda names=runtime.DISTS: next(versions))
    monkeypatch.setattr(runtime, "run_pip", lambda args: (calls.append(args), (0, ""))[1])
    monkeypatch.setattr(runtime, "MODULES", {"jax": "ch6_test_not_loaded"})
    p = runtime.prepare(MIN, environ={})
    assert calls == [runtime.pip_args(m, MIN)] and p.found == NEW
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("🔧 Colab の TPU ランタイム") and "を入れました。" in out


def test_prepare_on_a_laptop_never_runs_pip(monkeypatch, capsys):
    m = machine("laptop")
    monkeypatch.setattr(runtime, "probe", lambda environ=None: m)
    monkeypatch.setattr(runtime, "installed_versions", lambda names=runtime.DISTS: stale(m))
    monkeypatch.setattr(runtime, "run_pip", lambda args: pytest.fail("pip must not run on a learner's machine"))
    runtime.prepare(MIN, environ={})
    assert f'pip install -U "jax>={MIN}"' in capsys.readouterr().out


def test_real_probe_of_this_machine_runs():
    m = runtime.probe({})
    assert m.host == "local" and m.accel in ("tpu", "gpu", "cpu")
    v = runtime.installed_versions()
    assert v["jax"] == __import__("jax").__version__


def test_import_ch6_loads_neither_jax_nor_numpy():
    code = "import sys, ch6; print(sorted(m for m in ('jax', 'jaxlib', 'numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", "import ch6 must leave JAX unloaded so that ch6.setup() can still upgrade it"


def test_min_jax_is_written_once_and_the_package_does_not_bound_jax():
    assert env.MIN_JAX not in (ROOT / "ch6" / "runtime.py").read_text(encoding="utf-8")
    assert env.INSTALL_HINT == runtime.command(runtime.Machine("local", "cpu"), env.MIN_JAX)
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    (jax,) = [d for d in deps if re.match(r"jax\b(?![-_])", d)]
    # 下限を付けると pip が jaxlib だけを上げ、TPU・GPU の部品が古いまま残る（pyproject.toml の注釈）
    assert jax == "jax", f"pyproject.toml: {jax!r}; keep jax unbounded, ch6.setup() upgrades it with the right extra"


def test_the_stale_runtime_leg_is_part_of_ci():
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"(?m)^ci:.*\btest-stale\b", make) and re.search(r"(?m)^test-stale:", make)
    assert re.search(r"(?m)^leg test-stale make test-stale$", (ROOT / ".ci" / "run").read_text(encoding="utf-8"))
    assert os.access(ROOT / ".ci" / "stale_colab.sh", os.R_OK)
