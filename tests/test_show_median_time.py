"""ch6.show.median_time と ch6.show.figure（6.1・6.4・6.5 が使う表示と計測の部品）。"""
from __future__ import annotations

import jax.numpy as jnp
import pytest

from ch6 import show


def test_median_time_separates_the_first_call_and_takes_the_median():
    calls = []

    def f(x):
        calls.append(1)
        return x * 2

    t = show.median_time(f, jnp.ones(3), repeat=5)
    first, median = t  # タプルとして分けて受け取れる
    assert len(calls) == 6  # 1 回目 + 5 回
    assert t.first == first >= 0 and t.median == median >= 0


def test_median_time_waits_for_the_result(monkeypatch):
    waited = []
    monkeypatch.setattr("jax.block_until_ready", lambda x: waited.append(x) or x)
    show.median_time(lambda: 1, repeat=3)
    assert waited == [1] * 4


def test_median_time_needs_at_least_one_run():
    with pytest.raises(ValueError, match="repeat"):
        show.median_time(lambda: 1, repeat=0)


def test_figure_shows_one_png_and_closes_the_figure(monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    assert show.figure(fig) is None
    assert len(shown) == 1 and shown[0].format == "png" and shown[0].data[:8] == b"\x89PNG\r\n\x1a\n"
    assert not plt.fignum_exists(fig.number)
