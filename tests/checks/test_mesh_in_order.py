"""チェックが並びを入れ替えて渡すメッシュは、複数のチップの TPU でもその並びのまま（6.3a-1、6.6-3、6.6-4）。

jax.make_mesh は、TPU ではデバイスをチップのつながりの順に並べ直します（devices を渡しても）。
ここでは CPU で jax.make_mesh をその並べ直しをする版（逆順にする）に差し替え、チェックの隠しのメッシュが
変わらないことを確かめます。
変わると、入れ替えた並びを確かめる意味がなくなり、学習者版では記録を引く要約（``ch6.recorded.digest``）が
作ったときと違って、6.6-4 が採点できなくなります。
"""
import jax
import numpy as np
import pytest

from ch6.checks.s6_6 import rows_to_load
from ch6.checks.s6_6.common import exercise_rng, shuffled_mesh
from ch6.checks.specs import mesh_in_order
from ch6.recorded import digest


def _reordering(real):
    """TPU の jax.make_mesh のように、渡したデバイスを並べ直す版（ここでは逆順）。"""
    def make_mesh(shape, names, *args, devices=None, **kwargs):
        devices = list(jax.devices() if devices is None else devices)[: int(np.prod(shape))]
        return real(shape, names, *args, devices=devices[::-1], **kwargs)
    return make_mesh


@pytest.fixture
def topology_order(monkeypatch):
    monkeypatch.setattr(jax, "make_mesh", _reordering(jax.make_mesh))


def _ids(mesh) -> list[int]:
    return [d.id for d in mesh.devices.flat]


def test_the_fake_topology_does_reorder_make_mesh(topology_order):
    """前提: 真似た並べ直しは jax.make_mesh に効く（効かなければ、下のテストは何も確かめていない）。"""
    if jax.device_count() < 2:
        pytest.skip("デバイスが 1 個では並びが変わらない")
    devices = jax.devices()
    assert _ids(jax.make_mesh((len(devices),), ("x",), devices=devices)) == [d.id for d in devices][::-1]


def test_mesh_in_order_keeps_the_given_order(topology_order):
    devices = jax.devices()[::-1]
    mesh = mesh_in_order((len(devices),), ("x",), devices)
    assert _ids(mesh) == [d.id for d in devices]
    assert mesh.axis_types == jax.make_mesh((len(devices),), ("x",)).axis_types  # 軸の種類は make_mesh の既定


def test_hidden_meshes_and_their_digests_ignore_the_topology(monkeypatch):
    plain = [digest((s, shape, owner, 0), {}) for s, shape, _, owner, _ in rows_to_load.cases(exercise_rng(4))]
    order = _ids(shuffled_mesh(np.random.default_rng(7), ("a", "b")))
    monkeypatch.setattr(jax, "make_mesh", _reordering(jax.make_mesh))
    assert _ids(shuffled_mesh(np.random.default_rng(7), ("a", "b"))) == order
    again = [digest((s, shape, owner, 0), {}) for s, shape, _, owner, _ in rows_to_load.cases(exercise_rng(4))]
    assert again == plain
