"""ch6.show: ノートブックとチェックが共有する表示の部品。"""
from __future__ import annotations

import numpy as np
import pytest

from ch6 import show


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
