"""ch6.capstone（6.9 節）のデータのイテレータ、学習の状態とシャーディング、Orbax での保存と別のメッシュへの復元。

コンパイルするテストは conftest が決めたデバイス数（既定 8、--devices 3 など）で動きます。
"""
from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from ch6 import lm
from ch6.capstone import data, train

SMALL = dataclasses.replace(train.CONFIG, n_layers=1, d_ff=60, max_len=16)
N = jax.device_count()


def test_corpus_is_shipped_japanese_text():
    text = data.corpus_text()
    assert text.startswith("# 6.1 vmap") and len(data.corpus_bytes()) > 10_000
    assert data.decode(data.corpus_bytes()[:9]) == "# 6.1 vma"


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 6])
def test_process_rows_join_into_the_same_global_batch(count):
    whole = data.ByteBatches(60, 8, seed=3)
    parts = [data.ByteBatches(60, 8, seed=3, process_index=p, process_count=count) for p in range(count)]
    for _ in range(3):
        assert (np.concatenate([next(p) for p in parts]) == next(whole)).all()


def test_state_resumes_at_the_saved_position():
    a = data.ByteBatches(12, 8)
    [next(a) for _ in range(4)]
    saved = a.state()
    assert saved == {"position": 4, "seed": 0}
    b = data.ByteBatches(12, 8).restore(saved)
    assert (next(a) == next(b)).all()
    assert (data.ByteBatches(12, 8, position=5).global_batch(5) == next(b)).all()
    with pytest.raises(ValueError, match="seed"):
        data.ByteBatches(12, 8, seed=1).restore(saved)
    with pytest.raises(ValueError, match="割り切れません"):
        data.ByteBatches(10, 8, process_count=3)


def test_labels_are_the_next_bytes():
    batch = data.ByteBatches(4, 16).global_batch(0)
    text = data.corpus_bytes()
    for row in batch:
        starts = [i for i in range(len(text) - 16) if (text[i:i + 17] == row).all()]
        assert starts


def _setup(devices):
    mesh = lm.make_mesh(devices)
    rules = lm.RULES["fsdp_tp"]
    sh = train.state_shardings(SMALL, rules, mesh)
    batch_sh = lm.batch_sharding(rules, mesh)
    return sh, batch_sh, train.make_step(SMALL, rules, sh, batch_sh)


def test_state_shardings_follow_the_rules_and_steps_keep_them():
    sh, batch_sh, step = _setup(jax.devices())
    state = train.init_state(SMALL, jax.random.key(0), sh)
    mu = state["opt_state"][0].mu
    assert mu["blocks"]["wq"].sharding == sh["params"]["blocks"]["wq"] == state["params"]["blocks"]["wq"].sharding
    state, losses = train.run(state, step, data.ByteBatches(train.BATCH, 8), 2, batch_sh)
    assert int(state["step"]) == 2 and losses[1] < losses[0]
    assert state["params"]["embed"].sharding == sh["params"]["embed"]


def test_save_then_restore_on_fewer_devices_continues_the_same(tmp_path):
    sh, batch_sh, step = _setup(jax.devices())
    state = train.init_state(SMALL, jax.random.key(0), sh)
    batches = data.ByteBatches(train.BATCH, 8)
    state, _ = train.run(state, step, batches, 2, batch_sh)
    mgr = train.manager(tmp_path / "ck")
    assert train.save(mgr, state, batches.state())
    mgr.wait_until_finished()
    _, ref = train.run(state, step, batches, 2, batch_sh)
    listing = train.disk_listing(tmp_path / "ck")
    assert "2/commit_success.txt" in listing and "2/data/metadata" in listing
    assert not any(str(tmp_path) in line for line in listing)
    m = max(1, N // 2)
    sh_m, batch_m, step_m = _setup(jax.devices()[:m])
    restored, data_state = train.restore(train.manager(tmp_path / "ck"), train.abstract_state(SMALL, sh_m))
    assert restored["params"]["embed"].sharding == sh_m["params"]["embed"]
    assert len(restored["params"]["embed"].sharding.device_set) == m
    _, again = train.run(restored, step_m, data.ByteBatches(train.BATCH, 8).restore(data_state), 2, batch_m)
    np.testing.assert_allclose(again, ref, atol=1e-4)
