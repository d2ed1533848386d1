"""6.9a-1 make_rules: 参照と別の正解（大きさ 1 の軸も書く、割り切れない軸を None にする）は通り、本編の規則の写し、
バッチを tensor にも分割する、バッチの順序、head_dim に回さない、語彙を分割しない、同じ軸を 2 度使う、
辞書でない答えはそれぞれの言葉で落ちる。"""
from ch6 import Status
from ch6.checks.s6_9a.rules_for_mesh import reference
from ch6.lm import RULES
from tests.checkhelp import boom, expect, not_done

EX = "6.9a-1"


def test_reference_passes():
    expect(EX, reference, Status.PASS, "最小")


def test_explicit_none_and_size_one_axes_pass():
    def verbose(config, mesh):
        t, f = mesh.shape["tensor"], mesh.shape["fsdp"]
        return {"batch": ["data", "fsdp"], "embed": "fsdp" if config.d_model % f == 0 else None,
                "heads": "tensor" if config.n_heads % t == 0 else None,
                "head_dim": "tensor" if config.n_heads % t and config.d_head % t == 0 else None,
                "mlp": "tensor" if config.d_ff % t == 0 else None,
                "vocab": "tensor" if config.vocab % t == 0 else None, "norm": None}
    expect(EX, verbose, Status.PASS)


def test_copy_of_lesson_rules_cannot_be_placed():
    expect(EX, lambda config, mesh: dict(RULES["fsdp_tp"]), Status.FAIL, "割り切れず", "配置できません")


def test_batch_over_tensor_is_named():
    def wrong(config, mesh):
        return {**reference(config, mesh), "batch": ("data", "fsdp", "tensor")}
    expect(EX, wrong, Status.FAIL, "tensor にも分割")


def test_batch_in_wrong_order_or_missing():
    expect(EX, lambda c, m: {**reference(c, m), "batch": ("fsdp", "data")}, Status.FAIL, "data と fsdp の順")
    expect(EX, lambda c, m: {k: v for k, v in reference(c, m).items() if k != "batch"}, Status.FAIL, "batch")


def test_no_head_dim_fallback_is_named():
    def wrong(config, mesh):
        return {k: v for k, v in reference(config, mesh).items() if k != "head_dim"}
    expect(EX, wrong, Status.FAIL, "wq", "head_dim")


def test_vocab_left_replicated():
    def wrong(config, mesh):
        return {k: v for k, v in reference(config, mesh).items() if k != "vocab"}
    expect(EX, wrong, Status.FAIL, "必要以上に複製", "embed")


def test_same_axis_twice_and_unknown_axis():
    expect(EX, lambda c, m: {**reference(c, m), "heads": "tensor", "head_dim": "tensor"}, Status.FAIL, "同じメッシュ軸")
    expect(EX, lambda c, m: {**reference(c, m), "mlp": "model"}, Status.FAIL, "メッシュにない軸")


def test_not_a_dict_not_done_and_error():
    expect(EX, lambda c, m: [("batch", "data")], Status.FAIL, "辞書")
    expect(EX, lambda c, m: {"batch": 3}, Status.FAIL, "読めません")
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR)
