"""6.9b-2 restore_onto: 参照と別の正解（orbax の API を直接使う）は通り、行き先なしの復元、最初のステップ、
別の規則の行き先、データの位置を返さない・順序が逆の答え、jax.devices() のメッシュ、train.CONFIG の行き先、
書きかけのステップはそれぞれの言葉で落ちる。"""
import jax
import orbax.checkpoint as ocp

from ch6 import Status, lm
from ch6.capstone import train
from tests.checkhelp import boom, expect, not_done

EX = "6.9b-2"


def _target(config, devices, rule="fsdp_tp"):
    mesh = lm.make_mesh(devices)
    return train.abstract_state(config, train.state_shardings(config, lm.RULES[rule], mesh))


def ref(directory, config, devices):
    return train.restore(train.manager(directory), _target(config, devices))


def by_checkpointer(directory, config, devices):
    mgr = ocp.CheckpointManager(directory)
    step = mgr.latest_step()
    out = mgr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(_target(config, devices)),
                                                    data=ocp.args.JsonRestore()))
    return out["state"], out["data"]


def test_reference_and_direct_orbax_pass():
    expect(EX, ref, Status.PASS, "規則どおり")
    expect(EX, by_checkpointer, Status.PASS)


def test_restore_without_target_is_named():
    def wrong(directory, config, devices):
        mgr = train.manager(directory)
        out = mgr.restore(mgr.latest_step(), args=ocp.args.Composite(state=ocp.args.StandardRestore(),
                                                                     data=ocp.args.JsonRestore()))
        return out["state"], out["data"]
    expect(EX, wrong, Status.FAIL, "abstract_state")


def test_first_step_and_other_rules():
    def first(directory, config, devices):
        mgr = train.manager(directory)
        return train.restore(mgr, _target(config, devices), mgr.all_steps()[0])
    expect(EX, first, Status.FAIL, "最新のステップ")
    if jax.device_count() > 1:   # 1 デバイスではどの規則も複製で、dp と fsdp_tp のシャーディングは同じ
        expect(EX, lambda d, c, dev: train.restore(train.manager(d), _target(c, dev, "dp")), Status.FAIL, "規則 fsdp_tp")


def test_shape_of_the_answer():
    expect(EX, lambda d, c, dev: ref(d, c, dev)[0], Status.FAIL, "2 つ組")
    expect(EX, lambda d, c, dev: (ref(d, c, dev)[0], 3), Status.FAIL, "データの位置")
    expect(EX, lambda d, c, dev: ref(d, c, dev)[::-1], Status.FAIL, "順序が逆")
    expect(EX, lambda d, c, dev: (ref(d, c, dev)[0], {"step": 1}), Status.FAIL, "'position' の項目がありません", "step")
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR)


def test_all_devices_instead_of_devices_is_named():
    if jax.device_count() > 1:   # 1 デバイスでは devices と jax.devices() が同じ
        expect(EX, lambda d, c, dev: ref(d, c, jax.devices()), Status.FAIL, "渡した devices は", "lm.make_mesh(devices)")


def test_course_config_and_unfinished_step_get_japanese_messages():
    expect(EX, lambda d, c, dev: ref(d, train.CONFIG, dev), Status.FAIL, "形が保存した配列の形と合いません",
           "train.CONFIG ではなく")

    def newest_by_listing(directory, config, devices):
        steps = [int(p.name.split(".")[0]) for p in directory.iterdir() if p.name.split(".")[0].isdigit()]
        return train.restore(train.manager(directory), _target(config, devices), max(steps))
    expect(EX, newest_by_listing, Status.FAIL, "書き終えていないステップ", "latest_step")
