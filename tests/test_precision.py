"""ch6.precision: バックエンドの float32 の精度に合わせた比較。"""
from __future__ import annotations

import numpy as np
import pytest

from ch6 import precision


def test_on_the_cpu_matmuls_keep_float32_and_nothing_widens():
    assert precision.matmul_rounds_inputs() is False
    assert precision.rtol_floor() == 0.0
    assert precision.widened(1e-5, 1e-6, 100.0) == (1e-5, 1e-6)
    assert precision.describe() == "CPU では、float32 の行列積は float32 のまま計算されます。"


def test_assert_close_is_assert_allclose_on_the_cpu():
    precision.assert_close(np.float32([1.0, 2.0]), [1.0, 2.0 + 1e-7], rtol=1e-6)
    with pytest.raises(AssertionError):
        precision.assert_close(np.float32([1.0, 2.0]), [1.0, 2.001], rtol=1e-5)


@pytest.fixture
def reduced(monkeypatch):
    """TPU の既定の精度のふり（float32 の行列積の入力が bf16 に丸められる）。"""
    monkeypatch.setattr(precision, "rtol_floor", lambda: precision.REDUCED_RTOL)


def test_a_reduced_backend_accepts_bf16_rounding_and_still_rejects_wrong_values(reduced):
    want = np.array([50.0, -3.0, 1e-4])
    precision.assert_close(want * (1 + 3e-3), want, rtol=1e-5)  # bf16 の丸め程度
    precision.assert_close(want + [0, 0, 0.9], want, rtol=1e-5)  # 打ち消し合った要素: 誤差は値の大きさ（50）で決まる
    with pytest.raises(AssertionError):
        precision.assert_close(want * 1.1, want, rtol=1e-5)  # 1 割の違いは誤り
    with pytest.raises(AssertionError):
        precision.assert_close(want[:2], want, rtol=1e-5)  # 形の違いも


def _as_accelerator(monkeypatch):
    """full() が見るバックエンドを TPU と見せかける（このマシンには CPU しかない）。"""
    import jax

    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")


def test_full_precision_is_highest_inside_and_restored_after(monkeypatch):
    import jax

    before = jax.config.jax_default_matmul_precision
    with precision.full():  # CPU: float32 のままなので何も変えない（jit のキャッシュを作り直させない）
        assert jax.config.jax_default_matmul_precision == before
    _as_accelerator(monkeypatch)
    with precision.full():
        assert jax.config.jax_default_matmul_precision == "highest"
    assert jax.config.jax_default_matmul_precision == before


def test_checks_run_at_full_precision(monkeypatch):
    import jax

    _as_accelerator(monkeypatch)

    import ch6
    from ch6.checking import Entry

    seen = []
    entry = Entry("probe", lambda answer: seen.append(jax.config.jax_default_matmul_precision) or "")
    monkeypatch.setattr("ch6._core.registry", lambda: {"9.9-1": entry})
    assert ch6.run_check("9.9-1", lambda: None).status.name == "PASS"
    assert seen == ["highest"]
