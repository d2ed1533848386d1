"""6.9a-1 make_rules: 参照と別の正解（大きさ 1 の軸も書く、割り切れない軸を None にする）は通り、本編の規則の写し、
バッチを tensor にも分割する、バッチの順序、head_dim に回さない、語彙を分割しない、割り切れを tensor でない軸で
試す、同じ軸を 2 度使う、要素数は同じでも約束と違う分割（heads の代わりの head_dim、embed を data にも、約束にない
layers の分割）、割り切れるかを試さない mlp・head_dim の分割、逆向きの割り切れの判定、辞書でない答えはそれぞれの言葉で落ちる。"""
from ch6 import Status
from ch6.checks.s6_9a.rules_for_mesh import reference
from ch6.lm import RULES
from tests.checkhelp import boom, expect, not_done

EX = "6.9a-1"


def test_reference_passes():
    expect(EX, reference, Status.PASS, "問題文と一致")


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
    expect(EX, lambda config, mesh: dict(RULES["fsdp_tp"]), Status.FAIL, "長さ 256 は 3 で割り切れない", "配置できません")


def test_batch_over_tensor_is_named():
    def wrong(config, mesh):
        return {**reference(config, mesh), "batch": ("data", "fsdp", "tensor")}
    expect(EX, wrong, Status.FAIL, "tensor 軸でも分割")


def test_batch_in_wrong_order_or_missing():
    expect(EX, lambda c, m: {**reference(c, m), "batch": ("fsdp", "data")}, Status.FAIL, "data 軸と fsdp 軸の順")
    expect(EX, lambda c, m: {k: v for k, v in reference(c, m).items() if k != "batch"}, Status.FAIL, "batch")


def test_no_head_dim_fallback_is_named():
    def wrong(config, mesh):
        return {k: v for k, v in reference(config, mesh).items() if k != "head_dim"}
    expect(EX, wrong, Status.FAIL, "wq", "head_dim")


def test_vocab_left_replicated():
    def wrong(config, mesh):
        return {k: v for k, v in reference(config, mesh).items() if k != "vocab"}
    expect(EX, wrong, Status.FAIL, "必要以上に複製", "embed", "論理軸 vocab")


def _tested_against(axis_of):
    """heads と mlp の割り切れを、tensor でなく axis_of(mesh) の軸で試す答え。"""
    def wrong(config, mesh):
        rules = {k: v for k, v in reference(config, mesh).items() if k not in ("heads", "mlp", "head_dim")}
        a = mesh.shape[axis_of]
        if config.n_heads % a == 0:
            rules["heads"] = "tensor"
        elif config.d_head % a == 0:
            rules["head_dim"] = "tensor"
        if config.d_ff % a == 0:
            rules["mlp"] = "tensor"
        return rules
    return wrong


def test_divisibility_tested_against_the_wrong_axis():
    expect(EX, _tested_against("fsdp"), Status.FAIL, "必要以上に複製")
    expect(EX, _tested_against("data"), Status.FAIL)


def test_the_tensor_only_case_catches_heads_and_mlp_tested_against_fsdp():
    def wrong(config, mesh):                     # head_dim の代わりは正しく、heads と mlp だけ fsdp で試す
        rules = reference(config, mesh)
        f = mesh.shape["fsdp"]
        for name, size in (("heads", config.n_heads), ("mlp", config.d_ff)):
            if rules.get(name) == "tensor" and size % f:
                del rules[name]
        return rules
    expect(EX, wrong, Status.FAIL, "割り切るのが tensor 軸の大きさだけの設定", "論理軸 heads・mlp", "tensor 軸の大きさ")


def test_same_axis_twice_and_unknown_axis():
    expect(EX, lambda c, m: {**reference(c, m), "heads": "tensor", "head_dim": "tensor"}, Status.FAIL, "同じメッシュの軸")
    expect(EX, lambda c, m: {**reference(c, m), "mlp": "model"}, Status.FAIL, "メッシュにない軸")


def test_not_a_dict_not_done_and_error():
    expect(EX, lambda c, m: [("batch", "data")], Status.FAIL, "辞書")
    expect(EX, lambda c, m: {"batch": 3}, Status.FAIL, "読めません")
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR)


def test_head_dim_instead_of_divisible_heads_is_named():
    def wrong(config, mesh):                     # 要素数は同じ: heads が割り切れても head_dim を分割する
        rules = reference(config, mesh)
        if rules.get("heads") == "tensor" and config.d_head % mesh.shape["tensor"] == 0:
            del rules["heads"]
            rules["head_dim"] = "tensor"
        return rules
    expect(EX, wrong, Status.FAIL, "heads が tensor 軸の大きさで割り切れるのに、head_dim を分割")


def test_more_axes_than_promised_are_named():
    def embed_over_data(config, mesh):           # embed を data にも（FSDP を data の軸まで広げる）: 要素数は減る
        rules = reference(config, mesh)
        if rules.get("embed") == "fsdp" and config.d_model % (mesh.shape["fsdp"] * mesh.shape["data"]) == 0:
            rules["embed"] = ("fsdp", "data")
        return rules
    expect(EX, embed_over_data, Status.FAIL, "論理軸 embed", "問題文の分割は 'fsdp' だけ")

    def layers_split(config, mesh):              # 約束にない論理軸 layers を data に
        return {**reference(config, mesh), "layers": "data"}
    expect(EX, layers_split, Status.FAIL, "論理軸 layers", "分割しません")


def test_splitting_without_testing_divisibility_is_named():
    def mlp_always(config, mesh):                # d_ff を割り切れるか試さずに tensor へ
        return {**reference(config, mesh), "mlp": "tensor"}
    expect(EX, mlp_always, Status.FAIL, "ヘッドの数も head_dim も d_ff も tensor 軸の大きさで割り切れない設定")

    def head_dim_untested(config, mesh):         # heads が割り切れなければ、d_head を試さずに head_dim へ
        rules = reference(config, mesh)
        if config.n_heads % mesh.shape["tensor"]:
            rules["head_dim"] = "tensor"
        return rules
    expect(EX, head_dim_untested, Status.FAIL, "ヘッドの数も head_dim も d_ff も tensor 軸の大きさで割り切れない設定")


def test_inverted_divisibility_gets_the_general_hint():
    def inverted(config, mesh):                  # 割り切れるかを逆向き（メッシュの大きさ % 次元）で試す
        t, f = mesh.shape["tensor"], mesh.shape["fsdp"]
        rules = {"batch": ("data", "fsdp")}
        if f % config.d_model == 0:
            rules["embed"] = "fsdp"
        for name, size in (("heads", config.n_heads), ("mlp", config.d_ff), ("vocab", config.vocab)):
            if t % size == 0:
                rules[name] = "tensor"
        return rules
    expect(EX, inverted, Status.FAIL, "必要以上に複製", "割り切れるので分割できます")


def test_fresh_mistakes_from_the_statement():
    def product(config, mesh):                   # head_dim に回すかを heads × d_head の割り切れで試す
        rules = {k: v for k, v in reference(config, mesh).items() if k != "head_dim"}
        t = mesh.shape["tensor"]
        if config.n_heads % t and (config.n_heads * config.d_head) % t == 0:
            rules["head_dim"] = "tensor"
        return rules
    expect(EX, product, Status.FAIL, "積だけが tensor 軸の大きさで割り切れる設定", "head_dim を tensor 軸で 4 個に分割", "割り切れない")

    def embed_against_tensor(config, mesh):      # embed の割り切れを tensor の大きさで試す
        rules = {k: v for k, v in reference(config, mesh).items() if k != "embed"}
        if config.d_model % mesh.shape["tensor"] == 0:
            rules["embed"] = "fsdp"
        return rules
    expect(EX, embed_against_tensor, Status.FAIL, "embed")

    def mlp_against_d_model(config, mesh):       # mlp の割り切れを d_ff ではなく d_model で試す
        rules = {k: v for k, v in reference(config, mesh).items() if k != "mlp"}
        if config.d_model % mesh.shape["tensor"] == 0:
            rules["mlp"] = "tensor"
        return rules
    expect(EX, mlp_against_d_model, Status.FAIL, "mlp")

    expect(EX, lambda c, m: {**reference(c, m), "batch": "data"}, Status.FAIL, "data 軸と fsdp 軸の順")
