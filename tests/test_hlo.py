"""ch6.hlo（集団通信の数え方と通信量の見積もり）の単体テスト。

実際にコンパイルするテストは、conftest が決めたデバイス数（既定 8、--devices 2 など）で動きます。
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ch6.hlo import Collective, collective_ops, collective_report, collectives_in, compiled_text, count_collectives

N = jax.device_count()
multi = pytest.mark.skipif(N == 1, reason="通信は 2 デバイス以上でしか現れない")
M, K, NCOL = 16 * N, 8 * N, 4 * N


def _mesh(devices=None):
    return Mesh(np.array(devices or jax.devices()), ("data",))


def _matmul_case(a_spec, b_spec, out_spec, mesh=None):
    mesh = mesh or _mesh()
    a = jax.device_put(jnp.arange(M * K, dtype=jnp.float32).reshape(M, K) / (M * K), NamedSharding(mesh, a_spec))
    b = jax.device_put(jnp.ones((K, NCOL), jnp.float32), NamedSharding(mesh, b_spec))
    f = jax.jit(lambda u, v: u @ v, out_shardings=NamedSharding(mesh, out_spec))
    return f, a, b


# 行列積 a (M, K) @ b (K, N) の 4 つのケース（6.3a のノートブックと同じ）
FOUR_CASES = {
    "1 rows of a": ((P("data", None), P(), P("data", None)), {}),
    "2 contracting of a": ((P(None, "data"), P(), P()), {"all-reduce": 1}),
    "3 contracting of both": ((P(None, "data"), P("data", None), P()), {"all-reduce": 1}),
    "4 rows of a, cols of b": ((P("data", None), P(None, "data"), P("data", None)), {"all-gather": 1}),
}


@multi
@pytest.mark.parametrize("case", FOUR_CASES)
def test_four_sharded_matmul_cases(case):
    specs, want = FOUR_CASES[case]
    f, a, b = _matmul_case(*specs)
    assert count_collectives(f, a, b) == want
    np.testing.assert_allclose(np.asarray(f(a, b)), np.asarray(a) @ np.asarray(b), rtol=1e-5)


@pytest.mark.parametrize("case", FOUR_CASES)
def test_one_device_counts_nothing(case):
    """1 台のメッシュでは、どの配置でも通信は 1 つも入らない。"""
    f, a, b = _matmul_case(*FOUR_CASES[case][0], mesh=_mesh(jax.devices()[:1]))
    assert count_collectives(f, a, b) == {}
    assert collective_report(f, a, b) == []


def test_compiled_text_accepts_plain_function():
    text = compiled_text(lambda x: x * 2, jnp.ones(3))
    assert "HloModule" in text
    assert count_collectives(lambda x: x * 2, jnp.ones(3)) == {}


@multi
def test_report_all_reduce_bytes_and_traffic():
    f, a, b = _matmul_case(P(None, "data"), P("data", None), P())
    [op] = collective_report(f, a, b)
    assert op.kind == "all-reduce" and op.shapes == ((M, NCOL),) and op.dtype == "f32"
    assert op.bytes == M * NCOL * 4
    assert op.group_size == N
    assert op.traffic == pytest.approx(2 * (N - 1) / N * M * NCOL * 4)


@multi
def test_report_all_gather_bytes_and_traffic():
    f, a, b = _matmul_case(P("data", None), P(None, "data"), P("data", None))
    [op] = collective_report(f, a, b)
    assert op.kind == "all-gather" and op.bytes == K * NCOL * 4  # b 全体を集める
    assert op.traffic == pytest.approx((N - 1) / N * K * NCOL * 4)


@pytest.mark.skipif(N < 4 or N % 2, reason="2 次元メッシュ (N/2, 2) が要る")
def test_group_size_on_2d_mesh():
    mesh = jax.make_mesh((N // 2, 2), ("data", "model"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    x = jax.device_put(jnp.ones((4 * N, 8)), NamedSharding(mesh, P("data", "model")))
    w = jax.device_put(jnp.ones((8, 4)), NamedSharding(mesh, P("model", None)))
    f = jax.jit(lambda u, v: u @ v, out_shardings=NamedSharding(mesh, P("data", None)))
    ops = collective_report(f, x, w)
    assert [op.kind for op in ops] == ["all-reduce"]
    assert ops[0].group_size == 2  # model 軸の 2 台だけで足し合わせる


# ---------------------------------------------------------------- テキストだけで確かめる

HLO = """HloModule jit_f, entry_computation_layout={(f32[8,4]{1,0})->f32[32,4]{1,0}}, num_partitions=4

%fused_all-gather_helper (p: f32[8,4]) -> f32[8,4] {
  ROOT %p = f32[8,4]{1,0} parameter(0)
}

ENTRY %main {
  %param = f32[8,4]{1,0} parameter(0)
  %all-gather.1 = f32[32,4]{1,0} all-gather(%param), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}
  %all-reduce = bf16[8,4]{1,0} all-reduce(%param), channel_id=2, replica_groups=[2,2]<=[4], to_apply=%add
  %ag-start = (f32[8,4]{1,0}, f32[16,4]{1,0}) all-gather-start(%param), channel_id=3, replica_groups={{0,1},{2,3}}, dimensions={0}
  %ag-done = f32[16,4]{1,0} all-gather-done(%ag-start)
  %rs = f32[2,4]{1,0} reduce-scatter(%param), channel_id=4, replica_groups={}, dimensions={0}, to_apply=%add
  %a2a = (f32[2,4]{1,0}, f32[2,4]{1,0}) all-to-all(%p0, %p1), channel_id=5, replica_groups=mesh['axis_0'=2,'axis_1'=2] {'axis_1'}
  %cp = s32[8]{0} collective-permute(%x), channel_id=6, source_target_pairs={{0,1},{1,0}}
  ROOT %copy = f32[32,4]{1,0} copy(%all-gather.1)
}
"""


def test_collectives_in_counts_ops_not_names():
    assert collectives_in(HLO) == {
        "all-gather": 2, "all-reduce": 1, "all-to-all": 1, "collective-permute": 1, "reduce-scatter": 1,
    }
    assert collectives_in("%copy = f32[2] copy(%all-reduce.3)") == {}


def test_collective_ops_parses_shapes_groups_and_bytes():
    ops = collective_ops(HLO)
    assert [o.kind for o in ops] == ["all-gather", "all-reduce", "all-gather", "reduce-scatter",
                                     "all-to-all", "collective-permute"]
    ag, ar, ag_async, rs, a2a, cp = ops
    assert (ag.shapes, ag.bytes, ag.group_size) == (((32, 4),), 32 * 4 * 4, 4)
    assert (ar.dtype, ar.bytes, ar.group_size) == ("bf16", 8 * 4 * 2, 2)         # iota 形式 [2,2]<=[4]
    assert (ag_async.shapes, ag_async.group_size) == (((16, 4),), 2)            # -start は結果だけ、-done は数えない
    assert (rs.bytes, rs.group_size) == (2 * 4 * 4, 4)                          # {} は全パーティション
    assert (a2a.bytes, a2a.group_size) == (2 * 2 * 4 * 4, 2)                    # mesh[...] {'axis_1'} 形式
    assert (cp.dtype, cp.bytes, cp.group_size) == ("s32", 32, None)


def test_traffic_formulas():
    assert Collective("all-gather", ((32,),), "f32", 128, 4).traffic == pytest.approx(96)
    assert Collective("all-reduce", ((32,),), "f32", 128, 4).traffic == pytest.approx(192)
    assert Collective("reduce-scatter", ((8,),), "f32", 32, 4).traffic == pytest.approx(96)
    assert Collective("all-to-all", ((8,),), "f32", 32, 4).traffic == pytest.approx(24)
    assert Collective("collective-permute", ((8,),), "f32", 32, None).traffic == 32
    assert Collective("all-reduce", ((8,),), "f32", 32, 1).traffic == 0


# TPU v5e（JAX 0.10.2）で 6.10 の int8 のデコードをコンパイルした HLO を縮めたもの：wq は行列積のない融合で
# bf16 に戻され（HBM に書かれる）、w_in は行列積の融合の中で戻される
TPU_INT8_HLO = """\
HloModule jit__lambda_

%copy_fusion.2 (param_0: s8[2048,32,128]) -> s8[2048,32,128] {
  %param_0 = s8[2048,32,128]{2,1,0:T(32,128)(4,1)} parameter(0)
  ROOT %copy.1 = s8[2048,32,128]{2,1,0:T(8,128)(4,1)} copy(%param_0)
}

%fused_computation.225 (param_0.685: s8[2048,32,128], param_1.690: f32[32,128]) -> bf16[2048,32,128] {
  %param_0.685 = s8[2048,32,128]{2,1,0:T(32,128)(4,1)} parameter(0)
  %fusion.955 = s8[2048,32,128]{2,1,0:T(8,128)(4,1)} fusion(%param_0.685), kind=kLoop, calls=%copy_fusion.2
  %convert_element_type.516 = f32[2048,32,128]{2,1,0:T(8,128)} convert(%fusion.955)
  %param_1.690 = f32[32,128]{1,0:T(8,128)S(1)} parameter(1)
  %mul.404 = f32[2048,32,128]{2,1,0:T(8,128)} broadcast(%param_1.690), dimensions={1,2}
  %mul.303 = f32[2048,32,128]{2,1,0:T(8,128)} multiply(%convert_element_type.516, %mul.404)
  ROOT %convert_element_type.515 = bf16[2048,32,128]{2,1,0:T(8,128)(2,1)} convert(%mul.303)
}

%inner_dot (p0: bf16[4,2048], p1: s8[2048,8192]) -> bf16[4,8192] {
  %p0 = bf16[4,2048]{1,0} parameter(0)
  %p1 = s8[2048,8192]{1,0:T(32,128)(4,1)} parameter(1)
  %c = bf16[2048,8192]{1,0} convert(%p1)
  ROOT %dot.1 = bf16[4,8192]{1,0} dot(%p0, %c), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%fused_computation.672 (p0: bf16[4,2048], p1: s8[2048,8192]) -> bf16[2048,8192] {
  %p0 = bf16[4,2048]{1,0} parameter(0)
  %p1 = s8[2048,8192]{1,0} parameter(1)
  ROOT %f = bf16[2048,8192]{1,0} fusion(%p0, %p1), kind=kOutput, calls=%inner_dot
}

ENTRY %main.111 (wq: s8[2048,32,128], wq_scale: f32[1,32,128], w_in: s8[2048,8192], x: bf16[4,2048]) -> bf16[4,8192] {
  %wq = s8[2048,32,128]{2,1,0:T(32,128)(4,1)} parameter(0), metadata={op_name="qp['blocks'][0]['wq']['q']"}
  %wq_scale = f32[1,32,128]{2,1,0} parameter(1)
  %bitcast.989 = f32[32,128]{1,0} bitcast(%wq_scale)
  %w_in = s8[2048,8192]{1,0:T(32,128)(4,1)} parameter(2)
  %x = bf16[4,2048]{1,0} parameter(3)
  %multiply_convert_fusion.93 = bf16[2048,32,128]{2,1,0:T(8,128)(2,1)} fusion(%wq, %bitcast.989), kind=kLoop, calls=%fused_computation.225, metadata={op_name="jit(<lambda>)/convert_element_type"}
  ROOT %convert_reduce_fusion.22 = bf16[2048,8192]{1,0} fusion(%x, %w_in), kind=kOutput, calls=%fused_computation.672
}
"""


def test_dequantized_outside_matmul_finds_the_weight_written_back_in_bf16():
    from ch6.hlo import Dequantized, dequantized_outside_matmul

    found = dequantized_outside_matmul(TPU_INT8_HLO)
    assert found == [Dequantized("wq", "multiply_convert_fusion.93", "bf16", 2048 * 32 * 128)]
    assert found[0].extra_bytes == 2 * 2 * 2048 * 32 * 128   # bf16 を書いて、読み直す
    # 戻す演算が行列積の融合に入れば（または int8 の引数がなければ）、何も見つからない
    fused = TPU_INT8_HLO.replace("calls=%fused_computation.225", "calls=%fused_computation.672")
    assert dequantized_outside_matmul(fused) == []
    assert dequantized_outside_matmul(TPU_INT8_HLO.replace("s8[", "bf16[")) == []


def test_dequantized_outside_matmul_on_this_backend():
    """この（CPU の）バックエンドでコンパイルした本物の HLO でも、例外なく読めて、行列積の融合の中の戻しは数えない。"""
    from ch6.hlo import dequantized_outside_matmul

    q = jnp.ones((64, 128), jnp.int8)
    s = jnp.full((1, 128), 0.5, jnp.float32)
    x = jnp.ones((4, 64), jnp.bfloat16)
    text = compiled_text(lambda q, s, x: x @ (q.astype(jnp.float32) * s).astype(jnp.bfloat16), q, s, x)
    found = dequantized_outside_matmul(text)
    assert all(d.parameter and d.elements == 64 * 128 for d in found)
