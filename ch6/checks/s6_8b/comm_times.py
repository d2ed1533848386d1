"""6.8b-1 attention_comm_times: リング（同じ向きの ppermute）と Ulysses（all-to-all 4 回）の通信の秒を、チップの行から。

隠しのチップの行（ch6.hardware.Chip、実在しない数値）で、TPU（トーラス）と GPU（スイッチ）、奇数や 2 のべきでない n、
n = 1、ヘッドの数が n で割り切れない場面を確かめます。秒は ch6.cost の関数から求め、式を書き直しません。
"""
from __future__ import annotations

import math

from ...checking import Fail, call, exercise
from ...cost import all_to_all_time, ppermute_time
from ...recorded import recorded
from ..chips import hidden_chip
from .common import exercise_rng

RTOL = 1e-6
KEYS = ("ring", "ulysses")


def network_of(hw) -> str:
    return "torus" if hw.kind == "TPU" else "switch"


@recorded
def reference(hw, n, seq_len, heads, head_dim, nbytes, kind: str = "") -> dict[str, float]:
    """正しい秒（kind を渡すと、名指しする誤りの秒）。"""
    b = seq_len / (1 if kind == "full_b" else n) * heads * head_dim * nbytes
    # 必須: ring = (n − 1)·ppermute_time(2b, link_oneway)、ulysses = 4·all_to_all_time(b, n, axis_bw, network)、
    #       network は TPU なら torus、GPU なら switch。ヘッドが n で割り切れなければ ulysses = inf。n = 1 は 0。
    # 自由: 途中の値の分け方。
    link = hw.axis_bw if kind == "axis_bw" else hw.hbm_bw if kind == "hbm" else hw.link_oneway
    steps = n if kind == "n_steps" else n - 1
    ring = steps * ppermute_time((1 if kind == "k_only" else 2) * b, link)
    network = {"network": "switch" if hw.kind == "TPU" else "torus", "all_torus": "torus",
               "all_switch": "switch"}.get(kind, network_of(hw))
    per_device = b * n if kind == "full_bytes" else b
    bw = {"hbm": hw.hbm_bw, "a2a_oneway": hw.link_oneway, "a2a_all_axes": hw.all_axes_bw}.get(kind, hw.axis_bw)
    count = {"two_a2a": 2, "three_a2a": 3}.get(kind, 4)
    ulysses = count * all_to_all_time(per_device, n, bw, network=network)
    if heads % n and kind != "no_inf":
        ulysses = math.inf
    return {"ring": ring, "ulysses": ulysses}


def cases(r):
    """(説明, hw, n, seq_len, heads, head_dim, bytes_per_value)。"""
    tpu = hidden_chip(r, "TPU", "隠しの TPU", torus_axes=3)
    tpu2 = hidden_chip(r, "TPU", "隠しの TPU（2 次元）", torus_axes=2)
    gpu = hidden_chip(r, "GPU", "隠しの GPU")
    m = int(r.integers(3, 9)) * 256
    return [
        ("隠しの TPU・n = 6", tpu, 6, 6 * m, 12, 128, 2),
        ("隠しの TPU・n = 5（奇数）", tpu2, 5, 5 * m, 10, 64, 2),
        ("隠しの GPU・n = 8", gpu, 8, 8 * m, 16, 128, 2),
        ("隠しの GPU・n = 3・float32", gpu, 3, 3 * m, 6, 96, 4),
        ("隠しの TPU・n = 4・ヘッド 6（割り切れない）", tpu, 4, 4 * m, 6, 128, 2),
        ("隠しの GPU・n = 1", gpu, 1, m, 8, 128, 2),
    ]


_MISTAKES = (
    ("axis_bw", "リングの秒を両方向の帯域 axis_bw で見積もっています（本編の表のリング）。同じ向きの ppermute は片方向の link_oneway で割ります。"),
    ("n_steps", "リングのステップを n 回と数えています。最初のブロックは各デバイスにあるので、送るのは n − 1 回です。"),
    ("k_only", "リングの秒が、1 ステップに b バイトを片方向で送る値です（K だけ、または K/V を半分ずつ逆向きに送る書き方）。"
               "この問題のリングは K と V の 2b バイトを同じ向きに送ります。"),
    ("full_b", "b を系列全体の長さで計算しています。b は 1 デバイスが持つ K のバイトで、seq_len / n を使います。"),
    ("two_a2a", "Ulysses の all-to-all を 2 回と数えています。Q・K・V を入れ替えて出力を戻すので 4 回です。"),
    ("three_a2a", "Ulysses の all-to-all を 3 回と数えています。Q・K・V の入れ替えの後に、出力を戻す 1 回が要るので 4 回です。"),
    ("network", "ネットワークの構成を取り違えています。TPU の行はトーラス（\"torus\"）、GPU の行はスイッチ（\"switch\"）です。"),
    ("all_torus", "GPU の行もトーラスとして見積もっています。GPU は NVLink のスイッチでつながるので \"switch\" を渡します。"),
    ("all_switch", "TPU の行もスイッチとして見積もっています。TPU の ICI はトーラスなので \"torus\" を渡します。"),
    ("a2a_oneway", "Ulysses の all-to-all を片方向の link_oneway で割っています。トーラスの all-to-all は両方向を使うので axis_bw です。"),
    ("a2a_all_axes", "Ulysses の all-to-all をすべての軸の帯域 all_axes_bw で割っています。軸 seq はトーラスの 1 軸なので axis_bw です。"),
    ("full_bytes", "all-to-all に系列全体のバイトを渡しています。all_to_all_time が受け取るのは 1 デバイスが持つ b バイトです。"),
    ("hbm", "通信の秒を HBM の帯域 hbm_bw で割っています。チップ間の通信は link_oneway や axis_bw で割ります。"),
    ("no_inf", "ヘッドの数が n で割り切れないのに、Ulysses の秒を返しています。そのときは使えないので math.inf です。"),
)


def _value(out, key: str, label: str) -> float:
    if key not in out:
        raise Fail(f"{label}: 返した辞書にキー \"{key}\" がありません。キーは \"ring\" と \"ulysses\" の 2 つです。")
    x = out[key]
    if isinstance(x, bool) or x is None:
        raise Fail(f"{label}: \"{key}\" の値は秒（数）のはずですが、{type(x).__name__} が返りました。")
    try:
        v = float(x)
    except Exception:
        raise Fail(f"{label}: \"{key}\" の値は秒（数）のはずですが、{type(x).__name__} が返りました。") from None
    if math.isnan(v) or v < 0:
        raise Fail(f"{label}: \"{key}\" の秒が {v} でした。秒は 0 以上の数（使えないときだけ math.inf）です。")
    return v


def same(got: dict[str, float], want: dict[str, float]) -> bool:
    return all((math.isinf(got[k]) and math.isinf(want[k])) or
               (not math.isinf(got[k]) and not math.isinf(want[k]) and
                math.isclose(got[k], want[k], rel_tol=RTOL, abs_tol=1e-30)) for k in KEYS)


def collect(fn, todo) -> list[dict[str, float]]:
    got = []
    for label, hw, n, seq_len, heads, dim, nbytes in todo:
        out = call(fn, hw, n, seq_len, heads, dim, nbytes)
        if not isinstance(out, dict):
            raise Fail(f"{label}: 辞書 {{\"ring\": 秒, \"ulysses\": 秒}} を返してください。{type(out).__name__} が返りました。")
        got.append({k: _value(out, k, label) for k in KEYS})
    return got


@exercise("6.8b-1", "attention_comm_times")
def check_attention_comm_times(fn):
    todo = cases(exercise_rng(1))
    # 参照の値と誤りの秒はすべて学習者を呼ぶ前に（学習者版では、作るときに記録した値を引く）
    want = [reference(*case[1:]) for case in todo]
    alts = [[reference(*case[1:], kind=kind) for case in todo] for kind, _ in _MISTAKES]
    got = collect(fn, todo)
    if all(same(g, w) for g, w in zip(got, want)):
        return "隠しのチップの行 3 つと 6 つの場面（奇数の n、n = 1、割り切れないヘッド）で、2 つの秒が一致しました。"
    for (_, message), alt in zip(_MISTAKES, alts):
        if all(same(g, a) for g, a in zip(got, alt)):
            raise Fail(message)
    i = next(i for i, (g, w) in enumerate(zip(got, want)) if not same(g, w))
    label, n = todo[i][0], todo[i][2]
    key = next(k for k in KEYS if not same({**want[i], k: got[i][k]}, want[i]))
    if n == 1:
        raise Fail(f"{label}: 通信がないので 0 秒のはずが、\"{key}\" は {got[i][key]:.4g} 秒でした。")
    raise Fail(f"{label}: \"{key}\" は {want[i][key]:.4g} 秒のはずが {got[i][key]:.4g} 秒でした。"
               "1 デバイスの b バイトと、どの帯域で割るかを確かめてください。")
