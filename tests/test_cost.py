"""ch6.cost: the collective times, the step-time bounds and the thresholds reproduce the scaling book's worked
numbers (How to Scale Your Model, https://jax-ml.github.io/scaling-book/), chapter named at each test."""
from __future__ import annotations

import itertools

import pytest

from ch6 import cost
from ch6.hardware import chip

V5E, V5P, H100 = chip("TPU v5e"), chip("TPU v5p"), chip("H100 SXM")
LLAMA3_70B_FFN = 28_672


def test_ring_collectives_divide_the_bytes_each_device_sends_by_the_ring_bandwidth():
    assert cost.all_gather_time(8e6, 1, 1e9) == 0.0
    assert cost.all_gather_time(8e6, 4, 1e9) == pytest.approx(6e6 / 1e9)
    assert cost.reduce_scatter_time(8e6, 4, 1e9) == cost.all_gather_time(8e6, 4, 1e9)
    assert cost.all_reduce_time(8e6, 4, 1e9) == pytest.approx(2 * 6e6 / 1e9)
    assert cost.ppermute_time(1e6, V5P.link_oneway) == pytest.approx(1e6 / 9e10)
    with pytest.raises(ValueError):
        cost.all_gather_time(1.0, 0, 1e9)
    with pytest.raises(ValueError):
        cost.all_gather_time(1.0, 2, 0.0)


def test_book_ch3_all_gather_over_one_v5e_axis():
    # ch. 3 "Sharded Matrices", worked problem: an AllGather of 34 MB over one axis takes 34e6 / 9e10 = 377 us
    # (large-n form, the book omits (n - 1)/n).
    big_n = 10**6
    assert cost.all_gather_time(34e6, big_n, V5E.axis_bw) == pytest.approx(377e-6, rel=0.01)


def _torus_all_to_all_load(n: int) -> float:
    """Brute force: chunks of 1/n of a device's bytes routed the short way round a ring; a chunk exactly opposite
    is split half each way. Returns the largest number of chunks crossing one link in one direction."""
    load = {}
    for src, dst in itertools.product(range(n), range(n)):
        d = (dst - src) % n
        if d == 0:
            continue
        if d != n - d:
            ways = [(+1, d, 1.0)] if d < n - d else [(-1, n - d, 1.0)]
        else:
            ways = [(+1, d, 0.5), (-1, d, 0.5)]
        for step, hops, share in ways:
            for h in range(hops):
                link = ((src + step * h) % n, step)
                load[link] = load.get(link, 0.0) + share
    return max(load.values())


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8, 16])
def test_all_to_all_on_a_torus_matches_routing_every_chunk(n):
    nbytes, bw = 1e6, 2e9  # bw is both directions of the axis; one direction carries bw / 2
    want = nbytes / n * _torus_all_to_all_load(n) / (bw / 2)
    assert cost.all_to_all_time(nbytes, n, bw, "torus") == pytest.approx(want)


def test_book_ch3_all_to_all_is_a_quarter_of_an_all_gather_on_a_torus():
    # ch. 3: "AllGather / 4 for a bidirectional ring" (the same array: per device nbytes, gathered n * nbytes).
    n, nbytes = 64, 1e6
    ratio = cost.all_to_all_time(nbytes, n, V5P.axis_bw) / cost.all_gather_time(n * nbytes, n, V5P.axis_bw)
    assert ratio == pytest.approx(0.25, rel=0.05)
    # On a switch each device sends (n - 1)/n of its bytes through its one egress.
    assert cost.all_to_all_time(nbytes, 8, H100.axis_bw, "switch") == pytest.approx(nbytes * 7 / 8 / 450e9)
    with pytest.raises(ValueError, match="network"):
        cost.all_to_all_time(nbytes, 8, 1.0, "mesh")


def test_step_time_gives_the_serial_bound_and_the_overlapped_estimate():
    t = cost.step_time(3.0, 1.0)
    assert (t.serial, t.overlapped, t.bound) == (4.0, 3.0, "compute")
    assert cost.step_time(1.0, 2.0).bound == "communication"
    assert cost.step_time(1.0, 1.0).bound == "compute"
    with pytest.raises(ValueError):
        cost.step_time(-1.0, 0.0)


def test_book_ch1_v5e_ridge_and_roofline():
    assert V5E.ridge == pytest.approx(240, rel=0.01)
    assert cost.roofline(V5E, 10.0) == pytest.approx(10 * V5E.hbm_bw)
    assert cost.roofline(V5E, 1e4) == V5E.flops


def test_book_ch5_data_parallel_critical_batch():
    # ch. 5 "How to Parallelize a Transformer for Training": v5p needs 2,550 tokens per chip over one axis and
    # 850 over all three.
    assert cost.dp_critical_batch(V5P) == pytest.approx(2550, rel=0.01)
    assert cost.dp_critical_batch(V5P, axes=3) == pytest.approx(850, rel=0.01)
    # The book's GPU chapter: about 2,200 for H100 inside an NVLink domain; more mesh axes do not add egress.
    assert cost.dp_critical_batch(H100) == pytest.approx(2200, rel=0.01)
    assert cost.dp_critical_batch(H100) > cost.dp_critical_batch(V5P, axes=3)
    # The whole-step form compares 6·b·P instead of 4·b·P: 1.5 times smaller.
    assert cost.WHOLE_STEP_FACTOR == 1.5
    assert cost.dp_critical_batch(V5P, form="step") == pytest.approx(2550 / 1.5, rel=0.01)
    with pytest.raises(ValueError, match="トーラスの軸は 3"):
        cost.dp_critical_batch(V5P, axes=4)
    with pytest.raises(ValueError, match="form"):
        cost.dp_critical_batch(V5P, form="other")


def test_book_ch5_tensor_parallel_limit_for_llama3_70b():
    # ch. 5: Y < n_axes · F / 2550, "roughly n_axes * 11" for F = 28,672 (LLaMA-3-70B).
    assert cost.tp_max_ways(V5P, LLAMA3_70B_FFN) == pytest.approx(LLAMA3_70B_FFN / 2550, rel=0.01)
    assert 11 <= cost.tp_max_ways(V5P, LLAMA3_70B_FFN) < 12
    assert cost.tp_max_ways(V5P, LLAMA3_70B_FFN, axes=2) == pytest.approx(2 * LLAMA3_70B_FFN / 2550, rel=0.01)


def test_book_ch6_llama3_70b_fsdp_on_8960_v5p_is_communication_bound():
    # ch. 6 "Training LLaMA 3 on TPUs": 4M tokens over 8960 chips is 468 per chip, below 850 even with 3 axes;
    # with FSDP and tensor parallelism the bound is 2 · 2550² / F = 453, which 468 clears.
    per_chip = 4 * 1024 * 1024 / 8960
    assert per_chip == pytest.approx(468, abs=1)
    assert per_chip < cost.dp_critical_batch(V5P, axes=3)
    assert cost.fsdp_tp_critical_batch(V5P, LLAMA3_70B_FFN) == pytest.approx(453, rel=0.01)
    assert per_chip > cost.fsdp_tp_critical_batch(V5P, LLAMA3_70B_FFN)


def test_book_ch5_fsdp_tp_bound_uses_the_axes_product_of_the_torus():
    # ch. 5: B/N > 4·α² / (M_X·M_Y·F); "M_X·M_Y = 2 (as it must be for a 3D mesh)", about 400 for F = 32,768.
    alpha = V5P.flops / V5P.axis_bw
    assert cost.fsdp_tp_critical_batch(V5P, 32_768) == pytest.approx(2 * alpha**2 / 32_768)
    assert cost.fsdp_tp_critical_batch(V5P, 32_768) == pytest.approx(400, rel=0.02)
    # ch. 5's LLaMA-3 summary: 2 · 2550² / 30,000 = 432.
    assert cost.fsdp_tp_critical_batch(V5P, 30_000) == pytest.approx(432, rel=0.01)
    # A 2-D torus (v5e) gives one axis to each: M_X·M_Y = 1, twice the 3-D bound for the same alpha.
    alpha_e = V5E.flops / V5E.axis_bw
    assert cost.fsdp_tp_critical_batch(V5E, 8192) == pytest.approx(4 * alpha_e**2 / 8192)
    assert cost.fsdp_tp_critical_batch(V5E, 8192, axes_product=2) == pytest.approx(2 * alpha_e**2 / 8192)
    with pytest.raises(ValueError, match="TPU"):
        cost.fsdp_tp_critical_batch(H100, 8192)
    with pytest.raises(ValueError, match="axes_product"):
        cost.fsdp_tp_critical_batch(V5P, 8192, axes_product=0)


def test_book_ch4_block_remat_turns_6nd_into_8nd():
    assert cost.train_flops(10, 7) == 6 * 70
    assert cost.train_flops(10, 7, remat=True) / cost.train_flops(10, 7) == pytest.approx(cost.REMAT_FLOP_FACTOR)
    assert cost.REMAT_FLOP_FACTOR == pytest.approx(4 / 3)


def test_zero_stages_share_dp_traffic_until_stage_3():
    p, n = 1e9, 8
    assert [cost.zero_comm_bytes(p, n, s) for s in range(3)] == [2 * 2 * p * 7 / 8] * 3
    assert cost.zero_comm_bytes(p, n, 3) == pytest.approx(1.5 * cost.zero_comm_bytes(p, n, 0))
    # ZeRO paper (arXiv 1910.02054), mixed-precision Adam: 16 bytes per parameter, 4 + 12/n, 2 + 14/n, 16/n.
    assert cost.zero_memory_bytes(p, n, 0) == 16 * p
    assert cost.zero_memory_bytes(p, n, 1) == pytest.approx((4 + 12 / n) * p)
    assert cost.zero_memory_bytes(p, n, 2) == pytest.approx((2 + 14 / n) * p)
    assert cost.zero_memory_bytes(p, n, 3) == pytest.approx(16 / n * p)
    with pytest.raises(ValueError):
        cost.zero_memory_bytes(p, n, 4)
