"""ch6.setup() と JAX の版の確認。"""
from __future__ import annotations

import subprocess
import sys

import pytest

from ch6 import env


def test_version_tuple():
    assert env.version_tuple("0.12.0.1") == (0, 12, 0, 1)
    assert env.version_tuple("0.10.2") < env.version_tuple("0.12.0.1")
    assert env.version_tuple("0.13.0rc1") == (0, 13, 0)
    assert env.version_tuple("0.12.0.dev20260101+abc") == (0, 12, 0)


def test_supported_versions_say_nothing():
    assert env.version_notes(env.TESTED_JAX) == []
    assert env.version_notes(env.MIN_JAX) == []


def test_too_old_says_what_breaks_and_how_to_install():
    (line,) = env.version_notes("0.4.30")
    assert "0.4.30" in line and env.MIN_JAX in line
    assert env.INSTALL_HINT in line and "再起動" in line


def test_newer_than_tested_says_so():
    (line,) = env.version_notes("99.0")
    assert env.TESTED_JAX in line and "新しい" in line


def _run(code: str, **extra) -> str:
    import os

    e = {k: v for k, v in os.environ.items() if k not in ("JAX_NUM_CPU_DEVICES",)}
    e.update(extra)
    out = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_setup_sets_the_device_count_before_jax_is_imported():
    out = _run("import ch6; n = ch6.setup(); print('N', n)", JAX_PLATFORMS="cpu")
    assert "N 8" in out and "デバイス数: 8" in out


@pytest.mark.parametrize("n", [1, 3])
def test_setup_keeps_a_count_chosen_by_the_learner(n):
    out = _run("import ch6; print('N', ch6.setup())", JAX_PLATFORMS="cpu", JAX_NUM_CPU_DEVICES=str(n))
    assert f"N {n}" in out


def test_setup_after_jax_was_imported_says_to_restart():
    out = _run("import jax; jax.devices(); import ch6; print('N', ch6.setup())", JAX_PLATFORMS="cpu")
    assert "N 1" in out and "再起動" in out


_FAKE_CHIP = """
import types, ch6.env as env
chip = types.SimpleNamespace(platform="tpu", device_kind="TPU v5 lite", id=0)
env.accelerators = lambda: [chip] * {count}
import ch6
n = ch6.setup({args})
import jax
print("N", n, "BACKEND", jax.default_backend(), "NAME", jax.config.values.get("jax_platform_name") or "-")
print("MEASURE", env.device_label(env.measure_device()))
"""


def test_a_lone_chip_keeps_meshes_on_cpu_devices_and_measures_on_the_chip():
    out = _run(_FAKE_CHIP.format(count=1, args=""))
    assert "N 8 BACKEND cpu NAME cpu" in out
    assert "MEASURE TPU（TPU v5 lite）" in out
    assert "CPU の模擬デバイス 8 個を使います" in out and "ch6.setup(accelerator=True)" in out


@pytest.mark.parametrize("count, why", [(1, "が 1 個あります。1 個では分割や集団通信が見えないため"),
                                        (4, "TPU が 4 個で、この講座が前提にする 8 個より少ないため")])
def test_the_reason_for_cpu_meshes_fits_the_chip_count(count, why):
    out = _run(_FAKE_CHIP.format(count=count, args=""))
    assert f"{why}、配列とメッシュには CPU の模擬デバイス 8 個を使います" in out
    assert "ch6.env.measure_device() を使う測定のセルだけ" in out


@pytest.mark.parametrize("n, these", [(1, "すべてをこのデバイスで実行し"), (4, "すべてをこの 4 個のデバイスで実行し")])
def test_accelerator_mode_says_which_cells_measure_on_the_chip(monkeypatch, capsys, n, these):
    import jax

    monkeypatch.setattr(jax, "device_count", lambda: n)
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    assert env.show_devices() == n
    out = capsys.readouterr().out
    assert these in out and "配列とメッシュには CPU の模擬デバイスを使います" in out
    assert "TPU で測るのは ch6.env.measure_device() を使う測定のセルだけで、ほかの時間の測定は CPU で行います" in out
    assert "測定だけをこのデバイスで" not in out


@pytest.mark.parametrize("how", [dict(args="accelerator=True"), dict(args="", CH6_DEVICES="accelerator")])
def test_accelerator_mode_leaves_the_default_backend_alone(how):
    args = how.pop("args")
    out = _run(_FAKE_CHIP.format(count=1, args=args), **how)
    assert "NAME -" in out  # 既定のバックエンドは JAX が選んだまま（ここでは本物のチップがないので CPU）


def test_enough_chips_are_used_as_they_are():
    out = _run(_FAKE_CHIP.format(count=8, args=""))
    assert "NAME -" in out


def test_ch6_devices_cpu_is_cpu_true():
    out = _run("import ch6, os; ch6.setup(); print('P', os.environ['JAX_PLATFORMS'])", CH6_DEVICES="cpu")
    assert "P cpu" in out


def test_without_an_accelerator_measurements_use_this_cpu():
    out = _run("import ch6, ch6.env as env; ch6.setup(); print('L', env.device_label(), env.accelerators())",
               JAX_PLATFORMS="cpu")
    assert "L この CPU []" in out
