"""6.4-4: 「いちばん長い軸だけを見て、割り切れなければ複製」は、どのデバイス数でも落ちる（issue 22 の 4）。"""
import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tests.checkhelp import expect


def shard_longest_only(tree, mesh):
    size = mesh.shape["data"]

    def place(a):
        shape = np.shape(a)
        if not shape:
            return jax.device_put(a, NamedSharding(mesh, P()))
        axis = max(range(len(shape)), key=lambda i: (shape[i], -i))  # 割り切れるかを見ずに、いちばん長い軸
        spec = P(*[None] * axis, "data") if shape[axis] % size == 0 else P()
        return jax.device_put(a, NamedSharding(mesh, spec))

    return jax.tree.map(place, tree)


def test_longest_axis_only_is_rejected_with_its_reason():
    if jax.device_count() == 1:
        return  # data=1 ではどの軸も割り切れるので、2 つの規則は同じ
    expect("6.4-4", shard_longest_only, "fail", "割り切れませんが", "は割り切れます")
