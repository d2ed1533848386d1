"""ch6.lm（6.9・6.10 の小さな言語モデル、論理軸と規則）の単体テスト。

コンパイルするテストは conftest が決めたデバイス数（既定 8、--devices 3 など）で動きます。
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from ch6 import lm

CONFIG = lm.Config(d_model=60, n_heads=2, d_head=4, d_ff=24, n_layers=2, max_len=16)
N = jax.device_count()


def _params():
    return lm.init_params(CONFIG, jax.random.key(0))


def test_axes_match_params_tree_and_ranks():
    params, axes = _params()
    flat_p = jax.tree.leaves(params)
    flat_a = jax.tree.leaves(axes, is_leaf=lambda s: isinstance(s, P))
    assert jax.tree.structure(params) == jax.tree.structure(axes, is_leaf=lambda s: isinstance(s, P))
    assert all(len(a) == p.ndim for p, a in zip(flat_p, flat_a))
    assert all(name in lm.LOGICAL_AXES for a in flat_a for name in a)
    assert sum(p.size for p in flat_p) == lm.param_count(CONFIG)


def test_mesh_shape_covers_every_count():
    assert lm.mesh_shape(8) == (2, 2, 2)
    assert lm.mesh_shape(4) == (2, 1, 2)
    assert lm.mesh_shape(6) == (3, 1, 2)
    assert lm.mesh_shape(3) == (1, 3, 1)
    assert lm.mesh_shape(5) == (1, 5, 1)
    assert lm.mesh_shape(1) == (1, 1, 1)
    for n in range(1, 13):
        data, fsdp, tensor = lm.mesh_shape(n)
        assert data * fsdp * tensor == n
        assert data > 1 or fsdp == 1 or tensor == 1   # XLA の分割器が活性値を複製し直す形は選ばない
    for n in (1, 2, 3, 4, 5, 6, 8, 10, 12):   # 既定の d_model はこれらの fsdp で割り切れる
        assert lm.Config().d_model % lm.mesh_shape(n)[1] == 0


def test_rules_map_logical_to_mesh_axes():
    mesh = lm.make_mesh()
    spec = P("embed", "heads", "head_dim")
    assert lm.to_mesh_spec(spec, lm.RULES["dp"]) == P()
    assert lm.to_mesh_spec(spec, lm.RULES["fsdp_tp"]) == P("fsdp", "tensor")
    assert lm.to_mesh_spec(P("batch"), lm.RULES["fsdp_tp"]) == P(("data", "fsdp"))
    # 大きさ 1 の軸は mesh を渡すと省く
    expect = tuple(a for a in ("data", "fsdp") if mesh.shape[a] > 1)
    got = lm.to_mesh_spec(P("batch"), lm.RULES["fsdp_tp"], mesh)
    assert got == (P() if not expect else P(expect[0] if len(expect) == 1 else expect))
    with pytest.raises(ValueError, match="同じメッシュ軸"):
        lm.to_mesh_spec(P("embed", "mlp"), {"embed": "fsdp", "mlp": "fsdp"})


def test_causal_forward_ignores_future_tokens():
    params, _ = _params()
    tok = jnp.arange(10, dtype=jnp.int32)[None] * 7 % 256
    other = tok.at[0, 6:].set(3)
    a = lm.forward(params, tok, CONFIG)
    b = lm.forward(params, other, CONFIG)
    assert a.shape == (1, 10, CONFIG.vocab)
    np.testing.assert_allclose(a[0, :6], b[0, :6], atol=1e-6)
    assert not np.allclose(a[0, 6:], b[0, 6:])


def test_loss_starts_near_uniform():
    params, _ = _params()
    tok = jax.random.randint(jax.random.key(1), (4, 9), 0, 256)
    assert abs(float(lm.loss(params, tok, CONFIG)) - np.log(256)) < 0.1


@pytest.mark.parametrize("name", sorted(lm.RULES))
def test_every_rule_gives_same_loss_on_the_mesh(name):
    params, axes = _params()
    mesh = lm.make_mesh()
    rules = lm.RULES[name]
    batch = 12 * N
    tok = jax.random.randint(jax.random.key(2), (batch, 9), 0, 256)
    ref = float(lm.loss(params, tok, CONFIG))
    p = jax.device_put(params, lm.shardings(axes, rules, mesh))
    t = jax.device_put(tok, lm.batch_sharding(rules, mesh))
    got = jax.jit(lm.loss, static_argnums=2)(p, t, CONFIG)
    assert abs(float(got) - ref) < 1e-5
    specs = lm.specs(axes, rules, mesh)
    for leaf, spec in zip(jax.tree.leaves(p), jax.tree.leaves(specs, is_leaf=lambda s: isinstance(s, P))):
        assert leaf.sharding.spec == spec


def test_flops_per_token_counts_matmuls():
    c = CONFIG
    n = lm.param_count(c) - c.vocab * c.d_model - c.max_len * c.d_model
    assert lm.flops_per_token(c, 8) == 6 * n + 12 * c.n_layers * 8 * c.n_heads * c.d_head
