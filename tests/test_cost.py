"""ch6.cost: the collective times, the step-time bounds and the thresholds reproduce the scaling book's worked
numbers (How to Scale Your Model, https://jax-ml.github.io/scaling-book/), chapter named at each test."""
from __future__ import annotations

import itertools

import pytest

from ch6 import cost
from ch6.hardware import book_chip

# The book's worked numbers come from the book's own inputs (ch6.hardware.BOOK_INPUTS), so a correction of a
# datasheet row never moves them (CONTRIBUTING, "A datasheet correction").
V5E, V5P, H100 = book_chip("TPU v5e"), book_chip("TPU v5p"), book_chip("H100 SXM")
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


# ---------------------------------------------------------------- 通信と計算の重なり（6.11 節、ch6.overlap の見積もり）


def test_collective_matmul_on_v5e_one_way_and_both_ways():
    # (4096, 8192) @ (8192, 16384) on 4 v5e chips, bf16. A shard of x is 1024 rows:
    #   T_math = 2·1024·8192·4096 / 1.97e14 = 348.8 us; B = 1024·8192·2 = 16.8 MB; T_comm = B / 4.5e10 = 372.8 us.
    t = cost.collective_matmul_times(V5E, 4096, 8192, 16384, 4)
    assert t.math == pytest.approx(348.8e-6, rel=1e-3)
    assert t.comm == pytest.approx(372.8e-6, rel=1e-3)
    assert (t.steps, t.hidden) == (4, False)  # n_out/n = 4096 < 4378 (hiding_width of v5e, one way)
    # overlapped = T_math + 3·max(T_math, T_comm) = 348.8 + 1118.5; serial = 4·348.8 + 3·372.8
    assert t.overlapped == pytest.approx(1467.3e-6, rel=1e-3)
    assert t.serial == pytest.approx(2513.8e-6, rel=1e-3)
    assert t.exposed == pytest.approx(3 * (372.8e-6 - 348.8e-6), rel=1e-2)
    # The serial communication is the one-way ring all-gather of the whole x.
    assert t.serial - 4 * t.math == pytest.approx(cost.all_gather_time(4096 * 8192 * 2, 4, V5E.link_oneway))
    # Both ways: T_comm = B / 9e10 = 186.4 us, hidden. 3 steps: own shard (sent both ways, 372.8 us on each link),
    # 2 shards (697.7 us of math), the opposite shard (348.8 us): 372.8 + 697.7 + 348.8 = 1419.3 us.
    t2 = cost.collective_matmul_times(V5E, 4096, 8192, 16384, 4, direction="two")
    assert t2.comm == pytest.approx(186.4e-6, rel=1e-3)
    assert (t2.steps, t2.hidden) == (3, True)
    assert t2.overlapped == pytest.approx(1419.3e-6, rel=1e-3)
    assert t2.serial == pytest.approx(4 * 348.8e-6 + 2 * 372.8e-6, rel=1e-3)
    assert t2.exposed == pytest.approx(372.8e-6 - 348.8e-6, rel=1e-2)  # only step 0 (one shard, two sends)


@pytest.mark.parametrize("n", [3, 5, 7, 9])
def test_collective_matmul_both_ways_sends_a_bidirectional_all_gather_for_odd_n(n):
    t = cost.collective_matmul_times(V5P, 512 * n, 4096, 1024 * n, n, direction="two")
    assert t.steps == (n - 1) // 2 + 1
    assert t.serial - n * t.math == pytest.approx(cost.all_gather_time(512 * n * 4096 * 2, n, V5P.axis_bw))


def test_collective_matmul_reduce_scatter_form_on_v5p():
    # (4096, 16384) @ (16384, 8192) on 4 v5p chips, x split along K: a partial-sum shard is 1024 rows of 8192.
    #   T_math = 2·1024·4096·8192 / 4.59e14 = 149.7 us; B = 1024·8192·2 = 16.8 MB; T_comm = B / 9e10 = 186.4 us.
    t = cost.collective_matmul_times(V5P, 4096, 16384, 8192, 4, form="reducescatter")
    assert t.math == pytest.approx(149.7e-6, rel=1e-3)
    assert t.comm == pytest.approx(186.4e-6, rel=1e-3)
    assert not t.hidden  # k/n = 4096 < 5100
    assert t.overlapped == pytest.approx(149.7e-6 + 3 * 186.4e-6, rel=1e-3)
    with pytest.raises(ValueError, match="one"):
        cost.collective_matmul_times(V5P, 4096, 16384, 8192, 4, direction="two", form="reducescatter")
    with pytest.raises(ValueError, match="form"):
        cost.collective_matmul_times(V5P, 4096, 16384, 8192, 4, form="allreduce")


def test_collective_matmul_on_one_device_sends_nothing():
    t = cost.collective_matmul_times(V5E, 1024, 1024, 1024, 1, direction="two")
    assert (t.comm, t.steps, t.exposed, t.hidden) == (0.0, 1, 0.0, True)
    assert t.overlapped == t.serial == pytest.approx(2 * 1024**3 / V5E.flops)
    with pytest.raises(ValueError):
        cost.collective_matmul_times(V5E, 1024, 1024, 1024, 0)
    with pytest.raises(ValueError, match="direction"):
        cost.collective_matmul_times(V5E, 1024, 1024, 1024, 4, direction="three")


def test_book_ch5_collective_matmul_hides_the_tensor_parallel_all_gather_up_to_11_ways():
    # Hidden when n_out/n >= b·C / (2·W): W = one link one way, or the axis (both ways). In bf16 both ways this is
    # C / W_ici, ch. 5's tensor-parallel condition F/Y > C/W (2550 on v5p); one way needs twice as much.
    assert cost.hiding_width(V5P, direction="two") == pytest.approx(2550, rel=0.01)
    assert cost.hiding_width(V5P) == pytest.approx(5100, rel=0.01)
    assert cost.hiding_width(V5E) == pytest.approx(1.97e14 / 4.5e10, rel=1e-6)  # 4378
    assert cost.hiding_width(V5E, direction="two") == pytest.approx(2189, rel=1e-3)
    # H100: NVLink has one egress, so both ways do not add bandwidth: 9.89e14 / 4.5e11 = 2198 either way.
    assert cost.hiding_width(H100) == cost.hiding_width(H100, direction="two") == pytest.approx(2198, rel=1e-3)
    # ch. 5, LLaMA-3-70B (F = 28,672): "roughly 11" ways of tensor parallelism on one axis.
    assert cost.max_chunks_hidden(V5P, LLAMA3_70B_FFN, direction="two") == 11
    assert cost.max_chunks_hidden(V5P, LLAMA3_70B_FFN, direction="two") == int(cost.tp_max_ways(V5P, LLAMA3_70B_FFN))
    assert cost.max_chunks_hidden(V5P, LLAMA3_70B_FFN) == 5  # 28,672 / 5100 = 5.6
    assert cost.max_chunks_hidden(V5P, 100) == 1               # one device never sends
    # The condition does not depend on m or k: the hidden flag switches at n_out/n = hiding width.
    for m, k in [(256, 1024), (8192, 8192)]:
        assert cost.collective_matmul_times(V5P, m, k, 8 * 2550 * 1.01, 8, direction="two").hidden
        assert not cost.collective_matmul_times(V5P, m, k, 8 * 2550 * 0.99, 8, direction="two").hidden


def test_book_ch3_chunks_above_45_kb_are_not_latency_bound():
    # ch. 3: an ICI hop costs about 1 us, so on v5e "sending any buffer under 4.5e10 * 1e-6 = 45kB will be latency
    # bound". The collective-matmul model has no latency term; its chunks above are 16.8 MB.
    assert cost.ppermute_time(45e3, V5E.link_oneway) == pytest.approx(1e-6)
    assert cost.ppermute_time(1024 * 8192 * 2, V5E.link_oneway) > 100 * cost.ppermute_time(45e3, V5E.link_oneway)


def test_book_ch5_bucketed_all_reduce_hides_behind_the_backward_pass_above_2550_tokens():
    # ch. 5: data parallelism stays compute bound on v5p when the tokens per chip exceed C / W_ici = 2550. With P
    # parameters the bf16 gradients are 2P bytes; their all-reduce takes 2·2P / 1.8e11 (large n) = 22.2 ms for
    # P = 1e9, and the backward pass 4·b·P / 4.59e14 = 22.2 ms at b = 2550.
    p, big_n = 1e9, 10**6
    all_reduce = cost.all_reduce_time(2 * p, big_n, V5P.axis_bw)
    assert all_reduce == pytest.approx(22.2e-3, rel=1e-3)
    above = 4 * 2600 * p / V5P.flops   # 22.66 ms
    t = cost.bucketed_allreduce_time(2 * p, big_n, V5P.axis_bw, above, 10)
    assert not t.comm_bound
    assert t.exposed == pytest.approx(all_reduce / 10)           # only the last bucket: 2.22 ms
    assert t.total == pytest.approx(above + all_reduce / 10)     # 24.9 ms
    # One all-reduce after the backward pass overlaps nothing.
    one = cost.bucketed_allreduce_time(2 * p, big_n, V5P.axis_bw, above, 1)
    assert one.exposed == pytest.approx(all_reduce) and one.total == pytest.approx(above + all_reduce)
    below = 4 * 2500 * p / V5P.flops   # 21.79 ms: communication bound
    t = cost.bucketed_allreduce_time(2 * p, big_n, V5P.axis_bw, below, 10)
    assert t.comm_bound
    assert t.total == pytest.approx(below / 10 + all_reduce)     # 2.18 + 22.2 = 24.4 ms


def _simulate_buckets(grad_bytes, n, bw, backward, k, latency):
    """Event by event: bucket j is ready at j·backward/k; all-reduces run one at a time in order."""
    t = cost.all_reduce_time(grad_bytes / k, n, bw) + latency
    end = 0.0
    for j in range(1, k + 1):
        end = max(end, j * backward / k) + t
    return end


@pytest.mark.parametrize("k", [1, 2, 3, 8, 50])
@pytest.mark.parametrize("backward", [1e-4, 5e-3, 2e-2])
@pytest.mark.parametrize("latency", [0.0, 2e-5, 1e-3])
def test_bucketed_all_reduce_closed_form_matches_the_event_simulation(k, backward, latency):
    args = (64e6, 8, V5E.axis_bw, backward, k, latency)
    assert cost.bucketed_allreduce_time(*args).total == pytest.approx(_simulate_buckets(*args))


def test_best_bucket_count_balances_the_last_bucket_against_latency():
    # 100 MB of gradients on 8 v5e chips: the all-reduce takes A = 2·1e8·(7/8) / 9e10 = 1.944 ms. Backward 20 ms and
    # an exaggerated 0.5 ms per all-reduce. total(k) = max(20 + A/k + 0.5, 20/k + A + 0.5·k) (ms): the first branch
    # falls and the second rises with k; they cross where k = (20 − A) / 0.5 = 36.1, so the best k is 36
    # (total 20 + 0.054 + 0.5 = 20.554 ms; at 37: 0.54 + 1.944 + 18.5 = 20.985 ms).
    args = (100e6, 8, V5E.axis_bw, 20e-3)
    assert cost.best_bucket_count(*args, 0.5e-3) == 36
    assert cost.bucketed_allreduce_time(*args, 36, 0.5e-3).total == pytest.approx(20.554e-3, rel=1e-4)
    assert cost.bucketed_allreduce_time(*args, 37, 0.5e-3).total == pytest.approx(20.985e-3, rel=1e-4)
    # Without latency more buckets never hurt: the best is the largest allowed.
    assert cost.best_bucket_count(*args, 0.0, max_buckets=64) == 64
    with pytest.raises(ValueError, match="buckets"):
        cost.bucketed_allreduce_time(*args, 0)
    with pytest.raises(ValueError, match="0 以上"):
        cost.bucketed_allreduce_time(100e6, 8, V5E.axis_bw, -1.0, 4)
