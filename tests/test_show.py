"""ch6.show: ノートブックとチェックが共有する表示の部品。

- ch6.show の value_text / before_after（デバイスごとの値の表）。
- ch6.show.sharding_text: visualize_array_sharding の図を色コードなしの文字列で。
- ch6.show.median_time と ch6.show.figure（6.1・6.4・6.5 が使う表示と計測の部品）。
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import nbformat
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from ch6 import nbrun, show


def test_expect_error_prints_type_and_message_and_lets_the_cell_finish(capsys):
    with show.expect_error(ValueError) as caught:
        raise ValueError("bad axis at 0x7f00deadbeef\nsecond line")
    out = capsys.readouterr().out
    assert out.startswith(show.INTENTIONAL + " ValueError: bad axis at 0xADDR")
    assert "second line" in out
    assert caught.type_name == "ValueError" and "0xADDR" in caught.message


def test_expect_error_fails_loudly_when_nothing_goes_wrong():
    with pytest.raises(show.NoErrorRaised, match="TypeError"):
        with show.expect_error(TypeError):
            pass


def test_expect_error_lets_another_type_through():
    with pytest.raises(KeyError):
        with show.expect_error(ValueError):
            raise KeyError("x")


def test_expect_error_match():
    with pytest.raises(show.NoErrorRaised):
        with show.expect_error(ValueError, match="size"):
            raise ValueError("other")


def test_expect_error_keeps_long_messages_short(capsys):
    with show.expect_error():
        raise RuntimeError("\n".join(f"line {i}" for i in range(20)))
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 5 and out[-1] == "…"


def test_collectives_line():
    assert show.collectives_line({}) == show.NO_COLLECTIVES
    assert show.collectives_line({"all-reduce": 2, "all-gather": 1, "all-to-all": 0}) == "all-gather ×1, all-reduce ×2"


def test_table_aligns_wide_characters_and_has_no_colour():
    t = show.table([["デバイス", 1], ["x", 10]], header=["名前", "値"])
    lines = t.splitlines()
    assert "\x1b" not in t
    assert lines[2].endswith(" 1") and lines[3].endswith("10")
    assert show._width(lines[2]) == show._width(lines[3])


def test_rounded_normalises_negative_zero():
    a = show.rounded(np.array([-1e-9, -0.0, 0.12345]), 3)
    assert str(a) == str(np.array([0.0, 0.0, 0.123]))
    assert show.num(-0.00001) == "0.000"


@pytest.mark.parametrize("n,shape", [(1, (1, 1)), (2, (1, 2)), (3, (3, 1)), (4, (2, 2)), (5, (5, 1)),
                                     (6, (3, 2)), (7, (7, 1)), (8, (4, 2))])
def test_mesh_2d_shape_exists_for_every_count(n, shape):
    from ch6 import meshes

    assert meshes.mesh_2d_shape(n) == shape


def test_multiple_of():
    from ch6 import meshes

    assert meshes.multiple_of(3, 1024) == 1026 and meshes.multiple_of(8, 1024) == 1024


def test_value_text_scalars_vectors_matrices():
    assert show.value_text(np.float32(36.0)) == "36"
    assert show.value_text(4.5) == "4.5"
    assert show.value_text(np.int32(7)) == "7"
    assert show.value_text(np.float32(-0.00001)) == "0"  # -0 はそろえる
    assert show.value_text(np.float32(0.354312), digits=3) == "0.354"
    assert show.value_text(np.array([1.0, 4.0, 7.0])) == "[1 4 7]"
    assert show.value_text(np.arange(4).reshape(2, 2)) == "[0 1] | [2 3]"


def test_value_text_hides_last_digits():
    a = np.float32(0.1) * 3  # 0.3 に近いが末尾の桁は計算の順で変わりうる
    assert show.value_text(a) == show.value_text(np.nextafter(a, np.float32(1))) == "0.3"


def test_before_after_is_plain_and_aligned():
    out = show.before_after("psum", np.array([1.0, 4.0, 17.0]), np.full(3, 22.0))
    lines = out.splitlines()
    assert lines[0] == "psum"
    assert lines[1].split() == ["デバイス", "前", "後"]
    assert [ln.split() for ln in lines[3:]] == [["0", "1", "22"], ["1", "4", "22"], ["2", "17", "22"]]
    assert len({show._width(ln) for ln in lines[1:]}) == 1  # 右寄せで幅がそろう
    assert "\x1b" not in out
    assert show.before_after(None, [[1, 2]], [[3, 4]]).splitlines()[0].startswith("デバイス")


def test_before_after_lengths_must_match():
    with pytest.raises(ValueError):
        show.before_after("x", [1, 2], [1])


N = jax.device_count()


def test_sharding_text_rows_plain():
    mesh = jax.make_mesh((N,), ("data",))
    x = jax.device_put(jnp.zeros((2 * N, 3)), NamedSharding(mesh, P("data", None)))
    text = show.sharding_text(x)
    assert "\x1b" not in text
    for i in range(N):
        assert f"CPU {i}" in text
    assert text.splitlines()[0].startswith("┌")
    assert text == show.sharding_text(x)  # 何度でも同じ


def test_sharding_text_replicated_lists_every_device():
    mesh = jax.make_mesh((N,), ("data",))
    text = show.sharding_text(jax.device_put(jnp.zeros((4, 4)), NamedSharding(mesh, P())))
    assert "CPU " + ",".join(str(i) for i in range(N)) in text
    assert "\x1b" not in text


@pytest.mark.skipif(N < 2, reason="needs 2 or more devices")
def test_sharding_text_in_a_kernel_is_one_plain_stream():
    """Jupyter では rich が表示（display）として色つきで出すが、文字列だけが stdout に残る。"""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import jax, jax.numpy as jnp\n"
        "from jax.sharding import NamedSharding, PartitionSpec as P\n"
        "from ch6 import show\n"
        "mesh = jax.make_mesh((2,), ('data',))\n"
        "x = jax.device_put(jnp.zeros((4, 4)), NamedSharding(mesh, P('data', None)))\n"
        "print(show.sharding_text(x))")]
    nb, _ = nbrun.execute(nb, cwd=".", devices=2)
    outs = nb.cells[0].outputs
    assert [o.output_type for o in outs] == ["stream"]
    text = outs[0].text
    assert "\x1b" not in text and text.startswith("┌") and text.endswith("┘\n")
    assert [ln.strip("│ ") for ln in text.splitlines() if "CPU" in ln] == ["CPU 0", "CPU 1"]


def test_median_time_separates_the_first_call_and_takes_the_median():
    calls = []

    def f(x):
        calls.append(1)
        return x * 2

    t = show.median_time(f, jnp.ones(3), repeat=5)
    first, median, best = t  # タプルとして分けて受け取れる
    assert len(calls) == 6  # 1 回目 + 5 回
    assert t.first == first >= 0 and t.median == median >= 0
    assert 0 <= t.best == best <= t.median  # 最も速い回は中央値以下


def test_median_time_best_is_the_fastest_run_and_median_the_middle(monkeypatch):
    clock = iter([0.0, 9.0,  # 1 回目（コンパイル）: 9 秒
                  10.0, 10.5, 20.0, 20.1, 30.0, 33.0])  # 3 回: 0.5、0.1、3.0 秒
    monkeypatch.setattr("time.perf_counter", lambda: next(clock))
    t = show.median_time(lambda: 1, repeat=3)
    assert (t.first, t.median) == (9.0, 0.5)
    assert abs(t.best - 0.1) < 1e-9


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
