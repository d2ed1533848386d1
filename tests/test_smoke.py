"""授業の前の動作確認 python -m ch6.smoke（ch6/smoke.py）。"""
import subprocess
import sys

from ch6 import smoke


def test_every_step_passes_here_and_says_what_it_checked():
    lines = []
    assert smoke.run(out=lines.append)
    assert [ln.split(":")[0] for ln in lines[:-1]] == [f"✅ {name}" for name, _ in smoke.STEPS]
    assert "psum" in lines[3] and "⏳" in lines[4] and lines[-1].startswith("✅ 準備ができています")


def test_an_old_jax_is_named_with_the_fix_and_the_run_fails(monkeypatch):
    monkeypatch.setattr(smoke, "MIN_JAX", "99.0.0")
    lines = []
    assert not smoke.run(out=lines.append)
    bad = [ln for ln in lines if ln.startswith("❌ JAX")]
    assert len(bad) == 1 and "99.0.0 以上" in bad[0] and "make setup" in bad[0], lines
    assert lines[-1].startswith("❌ 直すところがあります")


def test_a_failing_step_does_not_stop_the_others_or_show_a_traceback(monkeypatch):
    def broken():
        raise ImportError("No module named 'matplotlib_fontja'")

    monkeypatch.setattr(smoke, "STEPS", [("図", broken), ("Python", smoke._python)])
    lines = []
    assert not smoke.run(out=lines.append)
    assert lines[0] == "❌ 図: ImportError: No module named 'matplotlib_fontja'" and lines[1].startswith("✅ Python")


def test_the_module_runs_as_a_command_with_exit_code_zero():
    p = subprocess.run([sys.executable, "-m", "ch6.smoke"], capture_output=True, text=True, timeout=300,
                       env={"JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": "2", "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "デバイス 2 個" in p.stdout and "Traceback" not in p.stdout + p.stderr
