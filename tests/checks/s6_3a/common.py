"""6.3a のチェックのテストが共有する部品。"""
from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
from jax.sharding import AxisType

from ch6 import run_check
from ch6.meshes import mesh_2d_shape
from tests.checkhelp import N

ROOT = Path(__file__).resolve().parents[3]




D, M = mesh_2d_shape(N)



def expect_pass(eid, fn):
    r = run_check(eid, fn)
    assert r.status == "pass", r.message
    return r


def expect_fail(eid, fn, *words, status="fail"):
    r = run_check(eid, fn)
    assert r.status == status, r.message
    for w in words:
        assert w in r.message, r.message
    return r



def own_mesh(order=1, axis_types=AxisType.Explicit):
    """渡された mesh ではなく、自分で作ったメッシュ（デバイスの並びや軸の種類を変えられる）。"""
    devs = np.array(jax.devices()[::order]).reshape(mesh_2d_shape())
    return jax.sharding.Mesh(devs, ("data", "model"), axis_types=(axis_types,) * 2)
