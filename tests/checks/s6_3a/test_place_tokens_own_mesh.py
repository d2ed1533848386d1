"""6.3a-1: 渡された mesh ではなく、自分で作った同じ形のメッシュに置く答えは落ちる（issue 22 の 4）。"""
import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from ch6 import meshes
from tests.checkhelp import expect


def place_on_own_mesh(tokens, mask, mesh):
    own = jax.make_mesh(meshes.mesh_2d_shape(), ("data", "model"))  # 引数の mesh を使わない
    return (jax.device_put(tokens, NamedSharding(own, P("data", "model"))),
            jax.device_put(mask, NamedSharding(own, P("data", "model"))))


def place_with_set_mesh(tokens, mask, mesh):
    with jax.set_mesh(mesh):
        return jax.device_put(tokens, P("data", "model")), jax.device_put(mask, P("data", "model"))


def test_a_self_made_mesh_of_the_same_shape_is_named():
    if jax.device_count() == 1:
        return  # 1 デバイスでは並びが 1 通りしかない
    expect("6.3a-1", place_on_own_mesh, "fail", "別のメッシュ", "デバイスの並びが違います", "渡された mesh")


def test_the_given_mesh_through_set_mesh_passes():
    expect("6.3a-1", place_with_set_mesh, "pass")
