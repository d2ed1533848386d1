"""ch6.draw.values: 前後の図の決まり（値を送ったデバイスの番号と色、合わせた値は斜線）、題、読める文字の色、白黒でも読めること。"""
import numpy as np

from ch6 import draw
from tests.drawcheck import small_and_deterministic


def test_dark_text_on_light_colours():
    assert draw.ink("#edc948") != "white" and draw.ink("#ff9da7") != "white" and draw.ink("#d9d9d9") != "white"
    assert draw.ink("#4e79a7") == "white"


def test_every_before_after_figure_has_a_title_and_the_colour_legend():
    x = np.arange(4.0)
    d = small_and_deterministic(lambda: draw.device_values(x, np.full(4, 6.0), op="psum"))
    assert "psum の前と後" in d.texts
    assert any("斜線は全デバイスの値を合わせたもの" in t for t in d.texts)
    d = draw.device_values(x, np.roll(x, 1), op="ppermute", origin=np.roll(np.arange(4), 1))
    assert "ppermute の前と後" in d.texts and "右下の D 番号は値を送ったデバイス" in d.texts
    assert "デバイスごとの送信元 3,0,1,2" in d.caption


def test_the_after_panel_is_coloured_by_sender_not_by_receiver():
    x = np.arange(4.0)
    by_sender = draw.device_values(x, np.roll(x, 1), op="ppermute", origin=np.roll(np.arange(4), 1))
    by_row = draw.device_values(x, np.roll(x, 1), op="ppermute", origin=np.arange(4))
    mixed = draw.device_values(x, np.roll(x, 1), op="ppermute")
    assert len({by_sender.png, by_row.png, mixed.png}) == 3


def test_all_gather_caption_names_the_senders_of_one_device():
    x = np.arange(3.0)
    d = draw.device_values_from(x, np.tile(x, (3, 1)), np.tile(np.arange(3), (3, 1)), op="all_gather")
    assert "D0 が受け取ったマスの送信元 0,1,2" in d.caption and "0,0,0" not in d.caption


def test_stages_after_the_first_are_grey_unless_origins_are_given():
    part = np.arange(3.0).reshape(3, 1)
    stages = [np.ones((3, 3)), part, np.tile(part.T, (3, 1))]
    grey = draw.device_stages(stages, ["psum_scatter", "all_gather"])
    coloured = draw.device_stages(stages, ["psum_scatter", "all_gather"],
                                  origins=[None, np.tile(np.arange(3), (3, 1))])
    assert grey.png != coloured.png
    assert "psum_scatter、all_gather の各段階" in grey.texts


def test_a_cell_that_received_nothing_is_white_and_the_legend_says_so():
    x = np.arange(3.0)
    d = draw.device_values(x, np.array([0.0, 0.0, 1.0]), op="ppermute", origin=np.array([-1, 0, 1]))
    assert any("番号のないマスは何も受け取らなかったマス" in t for t in d.texts)
    assert d.png != draw.device_values(x, np.array([0.0, 0.0, 1.0]), op="ppermute", origin=np.array([2, 0, 1])).png
    assert "デバイスごとの送信元 なし,0,1" in d.caption


def _grey_levels(png: bytes) -> int:
    import io

    from PIL import Image
    return len(np.unique(np.asarray(Image.open(io.BytesIO(png)).convert("L"))))


def test_the_sender_is_written_in_each_cell_so_a_grayscale_print_keeps_it():
    # 白黒で印刷すると色は区別できなくなるので、送ったデバイスは各マスの D 番号で読めること
    x = np.arange(4.0)
    d = draw.device_values(x, np.roll(x, 1), op="ppermute", origin=np.roll(np.arange(4), 1))
    for r in range(4):
        assert d.texts.count(f"D{r}") >= 3, r   # 行の名前、前のマス、後のマス
    assert _grey_levels(d.png) > 2


def test_a_combined_value_is_hatched_not_only_grey():
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.add_subplot()
    draw.values._cell(ax, 0, 0, 3.0, None)
    assert any(getattr(p, "get_hatch", lambda: None)() == "///" for p in ax.patches)
    assert [t.get_text() for t in ax.texts] == ["3"]  # 合わせた値には送ったデバイスの番号を書かない
