"""ch6.hardware: each row's derived link figures agree with the published values they come from.

Published values (each with its source):
- How to Scale Your Model, ch. 2 "How to Think About TPUs" (https://jax-ml.github.io/scaling-book/tpus/), table
  "ICI BW/link (one-way / bidi)": v5e 4.5e10 / 9e10, v5p and v6e 9e10 / 1.8e11; DCN per TPU about 6.25e9 bytes/s
  (1.25e10 for v6e, 3.125e9 for v5e).
- ch. 1 "All About Rooflines": the v5e ridge is about 240 FLOP/byte.
- ch. 5 "How to Parallelize a Transformer for Training": C / W_dcn for v5p is about 75,000.
- Google Cloud TPU documentation (cloud.google.com/tpu/docs/v5e, v6e, v5p): bidirectional ICI per chip 400 GB/s with
  4 ports (v5e), 800 GB/s with 4 ports (v6e), 1200 GB/s (v5p, 3D torus: 6 links); DCN: per-host NICs 2 x 100 Gbps (v5e)
  and 4 x 200 Gbps (v6e), 50 Gbps per chip (v5p).
- NVIDIA data sheets: NVLink 900 GB/s (H100, H200) and 1.8 TB/s (B200), both directions together.
"""
from __future__ import annotations

import dataclasses

import pytest

from ch6 import hardware
from ch6.hardware import CHIPS, GB, Chip, chip

BOOK_ICI_ONEWAY = {"TPU v5e": 4.5e10, "TPU v6e": 9e10, "TPU v5p": 9e10}
BOOK_ICI_BIDI = {"TPU v5e": 9e10, "TPU v6e": 1.8e11, "TPU v5p": 1.8e11}
DATASHEET_ICI_BIDI_GBYTES = {"TPU v5e": 400, "TPU v6e": 800, "TPU v5p": 1200}   # GB/s per chip, both directions
DATASHEET_ICI_LINKS = {"TPU v5e": 4, "TPU v6e": 4, "TPU v5p": 6}
DATASHEET_DCN_GBITS_PER_HOST = {"TPU v5e": 2 * 100, "TPU v6e": 4 * 200, "TPU v5p": 4 * 50}
DATASHEET_NVLINK_BOTH_WAYS = {"H100 SXM": 900 * GB, "H200 SXM": 900 * GB, "B200 (HGX)": 1800 * GB}
TORUS_AXES = {"TPU v5e": 2, "TPU v6e": 2, "TPU v5p": 3}


def test_every_row_names_its_sources():
    for c in CHIPS:
        assert c.source and c.url.startswith("https://")
        assert c.link_source and c.link_url.startswith("https://")
    with pytest.raises(KeyError):
        chip("TPU v9")


def test_tpu_axis_bandwidth_is_the_books_bidirectional_w_ici():
    for name, bidi in BOOK_ICI_BIDI.items():
        c = chip(name)
        assert c.link_oneway == pytest.approx(BOOK_ICI_ONEWAY[name])
        assert c.axis_bw == pytest.approx(bidi)
        assert c.torus_axes == TORUS_AXES[name]
        assert c.all_axes_bw == pytest.approx(TORUS_AXES[name] * bidi)


def test_tpu_links_are_nine_tenths_of_the_data_sheet_per_port():
    # The data sheet gives the bidirectional total per chip and the number of ICI ports (2 per torus axis); one link's
    # one-way figure is total / ports / 2. The book's figure is 0.9 of it; the rows use the book's (its worked numbers
    # come from it).
    for name, bidi in DATASHEET_ICI_BIDI_GBYTES.items():
        c = chip(name)
        assert DATASHEET_ICI_LINKS[name] == 2 * c.torus_axes
        per_link_oneway = bidi * GB / DATASHEET_ICI_LINKS[name] / 2
        assert c.link_oneway / per_link_oneway == pytest.approx(0.9)


def test_dcn_per_host_is_the_data_sheet_figure_and_the_books_per_tpu_figure():
    book_per_tpu = {"TPU v5e": 3.125e9, "TPU v6e": 1.25e10, "TPU v5p": 6.25e9}
    for name, gbits in DATASHEET_DCN_GBITS_PER_HOST.items():
        c = chip(name)
        assert c.dcn_bw_per_host == pytest.approx(gbits * 1e9 / 8)
        assert c.scaleout_bw == pytest.approx(book_per_tpu[name])


def test_gpu_axis_bandwidth_is_half_the_nvlink_total():
    for name, both in DATASHEET_NVLINK_BOTH_WAYS.items():
        c = chip(name)
        assert c.axis_bw == pytest.approx(both / 2)
        assert c.all_axes_bw == c.axis_bw  # one egress, however many mesh axes
        assert c.nvlink_domain == 8
        assert c.scaleout_bw == pytest.approx(50 * GB)  # ConnectX-7 400 Gb/s per GPU


def test_ridge_of_v5e_is_the_books_240_from_the_books_inputs():
    assert hardware.book_chip("TPU v5e").ridge == pytest.approx(240, rel=0.01)
    for c in CHIPS:
        assert c.ridge == pytest.approx(c.flops / c.hbm_bw)


def test_book_inputs_are_the_books_and_the_datasheet_rows_stay_near_them():
    """The policy for a datasheet correction (CONTRIBUTING): the book's worked numbers are computed from
    BOOK_INPUTS, never from a datasheet row, so a corrected row (a few per cent) moves no book number; a row more
    than 15 % from the book's input is a unit slip, not a correction."""
    assert hardware.BOOK_INPUTS["TPU v5e"] == dict(flops=1.97e14, hbm_bw=8.2e11, ici_link_oneway=4.5e10)
    for name, inputs in hardware.BOOK_INPUTS.items():
        book, row = hardware.book_chip(name), chip(name)
        assert book.source == hardware.SCALING_BOOK and book.name == row.name
        for field, value in inputs.items():
            assert getattr(book, field) == value
            assert getattr(row, field) == pytest.approx(value, rel=0.15), (name, field)
    corrected = dataclasses.replace(chip("TPU v5e"), hbm_bw=chip("TPU v5e").hbm_bw * 1.05)
    assert corrected.ridge < 230 and hardware.book_chip("TPU v5e").ridge == pytest.approx(240, rel=0.01)
    with pytest.raises(KeyError, match="BOOK_INPUTS"):
        hardware.book_chip("B200 (HGX)")


def test_dcn_per_chip_gives_the_books_75000_for_v5p():
    v5p = chip("TPU v5p")
    assert v5p.scaleout_bw == pytest.approx(2.5e10 / 4)
    assert v5p.flops / v5p.scaleout_bw == pytest.approx(75_000, rel=0.03)


def test_a_row_without_its_link_fields_is_refused():
    row = chip("TPU v5e")
    with pytest.raises(ValueError, match="torus_axes"):
        dataclasses.replace(row, torus_axes=None)
    with pytest.raises(ValueError, match="kind"):
        dataclasses.replace(row, kind="NPU")
    gpu = dataclasses.replace(chip("H100 SXM"), name="hidden", nvlink_oneway=100 * GB)
    assert isinstance(gpu, Chip) and gpu.axis_bw == 100 * GB


def test_device_kind_picks_the_exact_row_and_never_a_similar_name():
    assert hardware.for_device_kind("TPU v5 lite").name == "TPU v5e"
    assert hardware.for_device_kind("TPU v5").name == "TPU v5p"  # 部分一致なら v5e を選んでしまう
    assert hardware.for_device_kind("TPU v6 lite").name == "TPU v6e"
    assert hardware.for_device_kind("NVIDIA H200").name == "H200 SXM"
    assert hardware.for_device_kind("NVIDIA H100 80GB HBM3").name == "H100 SXM"
    assert hardware.for_device_kind("cpu") is None and hardware.for_device_kind("NVIDIA A100-SXM4-40GB") is None
    assert set(hardware.DEVICE_KINDS.values()) <= {c.name for c in hardware.CHIPS}
