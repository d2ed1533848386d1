"""6.9b-2 restore_before_spike: 参照と別の正解（orbax の API を直接使う、ステップを自分で並べる）は通り、
最新のステップ（spike を見ない）、spike 以下のステップ、最も古いステップ、書きかけのステップ（ディレクトリの名前を
数える）、保存のない spike − 1、データの位置を飛ばさない・1 つずれる・種を変える、行き先なしの復元、別の規則の行き先、
jax.devices() のメッシュ、train.CONFIG の行き先、答えの形の誤りは、それぞれの言葉で落ちる。"""
import jax
import numpy as np
import orbax.checkpoint as ocp

from ch6 import Status, lm
from ch6.capstone import train
from ch6.checks.s6_9b.restore_mesh import pristine
from tests.checkhelp import boom, expect, not_done

EX = "6.9b-2"


def _target(config, devices, rule="fsdp_tp"):
    mesh = lm.make_mesh(devices)
    return train.abstract_state(config, train.state_shardings(config, lm.RULES[rule], mesh))


def _restore(directory, config, devices, step, position, rule="fsdp_tp"):
    state, data = train.restore(train.manager(directory), _target(config, devices, rule), step)
    return state, {**data, "position": position}


def ref(directory, config, devices, spike, nothing=None):
    earlier = [s for s in train.manager(directory).all_steps() if s < spike]
    if not earlier:
        return nothing  # spike より前に完全なチェックポイントがない
    return _restore(directory, config, devices, max(earlier), spike)


def by_checkpointer(directory, config, devices, spike):
    mgr = ocp.CheckpointManager(directory)
    earlier = sorted(s for s in mgr.all_steps() if s < spike)
    if not earlier:
        return None
    step = earlier[-1]
    out = mgr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(_target(config, devices)),
                                                    data=ocp.args.JsonRestore()))
    data = dict(out["data"])
    data["position"] = spike
    return out["state"], data


def test_reference_and_direct_orbax_pass():
    expect(EX, ref, Status.PASS, "規則どおり", "spike まで")
    expect(EX, by_checkpointer, Status.PASS)


def test_choosing_the_step():
    def latest(directory, config, devices, spike):          # spike を見ずに最新へ
        return _restore(directory, config, devices, train.manager(directory).latest_step(), spike)
    expect(EX, latest, Status.FAIL, "mgr.latest_step() ではなく")

    def at_or_before(directory, config, devices, spike):    # <= spike
        step = max(s for s in train.manager(directory).all_steps() if s <= spike)
        return _restore(directory, config, devices, step, spike)
    expect(EX, at_or_before, Status.FAIL, "損失が跳ねたバッチの勾配でステップ", "更新を終えた後")

    def oldest(directory, config, devices, spike):
        return _restore(directory, config, devices, train.manager(directory).all_steps()[0], spike)
    expect(EX, oldest, Status.FAIL, "もっと新しいステップ")

    def one_before(directory, config, devices, spike):      # どのステップも保存されていると思い込む
        return _restore(directory, config, devices, spike - 1, spike)
    expect(EX, one_before, Status.FAIL, "保存されていません", "all_steps()")

    def newest_by_listing(directory, config, devices, spike):  # ディレクトリの名前を数えて、書きかけも選ぶ
        steps = [int(p.name.split(".")[0]) for p in directory.iterdir() if p.name.split(".")[0].isdigit()]
        return _restore(directory, config, devices, max(s for s in steps if s < spike), spike)
    expect(EX, newest_by_listing, Status.FAIL, "書き終えていない", "all_steps()")


def test_the_data_position():
    def kept(directory, config, devices, spike):            # 保存した位置のまま（跳ねたバッチをもう一度）
        step = max(s for s in train.manager(directory).all_steps() if s < spike)
        return train.restore(train.manager(directory), _target(config, devices), step)
    expect(EX, kept, Status.FAIL, "保存した位置", "のままなので", "spike")

    def past(directory, config, devices, spike):            # spike のバッチまで飛ばす
        state, data = ref(directory, config, devices, spike)
        return state, {**data, "position": spike + 1}
    expect(EX, past, Status.FAIL, "位置 s − 1 のバッチ")

    def one_less(directory, config, devices, spike):        # spike − 1（最初の場合は保存した位置と同じ数）
        state, data = ref(directory, config, devices, spike)
        return state, {**data, "position": spike - 1}
    k = pristine()[3]                                      # 最初の場合: spike = 3k + 1、戻すのは 3k
    expect(EX, one_less, Status.FAIL, "保存した位置（spike − 1）のままなので", f"（ステップ {3 * k + 1} に使ったもの）")

    def one_less_later(directory, config, devices, spike):  # spike − 1 が保存した位置と違う場合の言葉
        state, data = ref(directory, config, devices, spike)
        step = int(state["step"])
        return state, {**data, "position": spike if spike - 1 == step else spike - 1}
    expect(EX, one_less_later, Status.FAIL, "spike − 1", "跳ねたステップ", "使ったバッチの番号")

    def numpy_int(directory, config, devices, spike):      # JSON に書けない np.int64
        state, data = ref(directory, config, devices, spike)
        return state, {**data, "position": np.int64(spike)}
    expect(EX, numpy_int, Status.FAIL, "Python の int ではなく int64", "JSON")

    def from_state(directory, config, devices, spike):     # 復元した状態の jax の配列から計算する
        state, data = ref(directory, config, devices, spike)
        return state, {**data, "position": state["step"] + (spike - int(state["step"]))}
    expect(EX, from_state, Status.FAIL, "整数のはずが", "Array")

    def as_text(directory, config, devices, spike):
        state, data = ref(directory, config, devices, spike)
        return state, {**data, "position": str(spike)}
    expect(EX, as_text, Status.FAIL, "整数のはずが", "str")

    def new_seed(directory, config, devices, spike):
        state, data = ref(directory, config, devices, spike)
        return state, {"position": spike, "seed": 0}
    expect(EX, new_seed, Status.FAIL, "'seed'")


def test_restore_without_target_is_named():
    def wrong(directory, config, devices, spike):
        mgr = train.manager(directory)
        step = max(s for s in mgr.all_steps() if s < spike)
        out = mgr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(),
                                                        data=ocp.args.JsonRestore()))
        return out["state"], {**out["data"], "position": spike}
    expect(EX, wrong, Status.FAIL, "abstract_state")


def test_other_rules_and_all_devices():
    if jax.device_count() > 1:   # 1 デバイスではどの規則も複製で、dp と fsdp_tp のシャーディングは同じ
        def dp(directory, config, devices, spike):
            step = max(s for s in train.manager(directory).all_steps() if s < spike)
            return _restore(directory, config, devices, step, spike, rule="dp")
        expect(EX, dp, Status.FAIL, "規則 fsdp_tp")
        expect(EX, lambda d, c, dev, spike: ref(d, c, jax.devices(), spike), Status.FAIL, "渡した devices は",
               "lm.make_mesh(devices)")


def test_other_devices_of_the_same_count():
    """jax.devices() の先頭から同じ数を取る答えと、devices を逆の順に並べる答え（1 デバイスでは見分けられない）。"""
    def first_n(directory, config, devices, spike):
        return ref(directory, config, jax.devices()[:len(devices)], spike)

    def reversed_order(directory, config, devices, spike):
        return ref(directory, config, list(devices)[::-1], spike)
    if jax.device_count() > 1:
        expect(EX, first_n, Status.FAIL, "数は同じで、別のデバイス", "lm.make_mesh(devices)")
        expect(EX, reversed_order, Status.FAIL, "メッシュのデバイスの並び", "その順のまま")
    else:
        expect(EX, first_n, Status.PASS, "確かめられません")
        expect(EX, reversed_order, Status.PASS, "確かめられません")


def test_shape_of_the_answer():
    expect(EX, lambda d, c, dev, s: ref(d, c, dev, s)[0], Status.FAIL, "2 つ組")
    expect(EX, lambda d, c, dev, s: (ref(d, c, dev, s)[0], 3), Status.FAIL, "データの位置")
    expect(EX, lambda d, c, dev, s: ref(d, c, dev, s)[::-1], Status.FAIL, "順序が逆")
    expect(EX, lambda d, c, dev, s: (ref(d, c, dev, s)[0], {"step": 1}), Status.FAIL, "'position' の項目がありません")
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR)


def test_course_config_gets_a_japanese_message():
    expect(EX, lambda d, c, dev, s: ref(d, train.CONFIG, dev, s), Status.FAIL, "形が保存した配列の形と合いません",
           "train.CONFIG ではなく")


def test_fresh_mistakes_from_the_statement():
    def before_spike(directory, config, devices, spike):    # 別の正解: spike − 1 以下の完全なステップ
        step = max((s for s in train.manager(directory).all_steps() if s <= spike - 1), default=None)
        return None if step is None else _restore(directory, config, devices, step, spike)
    expect(EX, before_spike, Status.PASS)

    def no_seed(directory, config, devices, spike):         # 位置だけの辞書を新しく作る（seed を落とす）
        out = ref(directory, config, devices, spike)
        return None if out is None else (out[0], {"position": spike})
    expect(EX, no_seed, Status.FAIL, "'seed'", "None")

    def fsdp_rule(directory, config, devices, spike):       # 規則 fsdp の行き先（tensor が 1 のメッシュでは同じ）
        step = max((s for s in train.manager(directory).all_steps() if s < spike), default=None)
        return None if step is None else _restore(directory, config, devices, step, spike, rule="fsdp")
    if jax.device_count() > 1:
        expect(EX, fsdp_rule, Status.FAIL, "規則 fsdp_tp")
    else:
        expect(EX, fsdp_rule, Status.PASS, "確かめられません")


def test_no_complete_checkpoint_before_the_spike():
    # 最初の保存のステップで跳ねた: 戻る先がないので None（問題文の必須）
    def max_only(directory, config, devices, spike):
        step = max(s for s in train.manager(directory).all_steps() if s < spike)
        return _restore(directory, config, devices, step, spike)
    expect(EX, max_only, Status.FAIL, "最初の保存のステップで跳ねたとき", "max() が空の列", "None を返します")
    expect(EX, lambda *a: ref(*a, nothing=(None, None)), Status.FAIL, "2 つ組ではなく None だけ")

    def first_save(directory, config, devices, spike):      # 戻る先がなければ最初の保存へ
        steps = train.manager(directory).all_steps()
        earlier = [s for s in steps if s < spike]
        return _restore(directory, config, devices, max(earlier) if earlier else steps[0], spike)
    expect(EX, first_save, Status.FAIL, "跳ねた更新を含みます", "None を返します")
