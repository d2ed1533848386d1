"""6.8b-3 dropped_choices: top-2 のルータの選択のうち、容量を超えてドロップされる選択。"""
from __future__ import annotations

import math

import numpy as np

from ...checking import Fail, call, exercise, fmt
from ...recorded import input_devices, recorded
from .common import exercise_rng

# 必須: C = ceil(c · k · T / E)（k = 2、T はグループのトークン数）、グループごと・エキスパートごと、
#       1 番目の選択をすべて 2 番目より先に、それぞれトークンの順に入れる。
# 自由: NumPy でも jax.numpy でも、ループでも。


@recorded
def _dropped(ids, n_experts, factor, *, rounding=math.ceil, k_factor=True, global_tokens=False,
             order="choice", seat_offset=0, reset=True, follow_first=False):
    """NumPy の参照（と、よくある誤りの形: reset=False はグループごとに席を数え直さない、follow_first=True は 1 番目が
    ドロップされたトークンの 2 番目もドロップし、席を使わない）。ids: (G, T, 2)。"""
    groups, tokens, k = ids.shape
    count = tokens * (groups if global_tokens else 1) * (k if k_factor else 1)
    cap = rounding(factor * count / n_experts)
    out = np.zeros(ids.shape, bool)
    seats = np.zeros(n_experts, int)
    for g in range(groups):
        if order == "choice":        # 1 番目の選択をすべて、その後に 2 番目
            seq = [(t, c) for c in range(k) for t in range(tokens)]
        elif order == "token":       # トークンごとに 1 番目、2 番目
            seq = [(t, c) for t in range(tokens) for c in range(k)]
        else:                        # 2 番目の選択を先に
            seq = [(t, c) for c in reversed(range(k)) for t in range(tokens)]
        if reset:
            seats = np.zeros(n_experts, int)
        for t, c in seq:
            e = ids[g, t, c]
            if follow_first and c == 1 and out[g, t, 0]:
                out[g, t, c] = True
                continue
            out[g, t, c] = seats[e] + seat_offset >= cap
            seats[e] += 1
    return out


def _ids(rng, groups, tokens, n_experts):
    """偏った top-2 の選択（同じトークンの 2 つは違うエキスパート）。"""
    weights = rng.dirichlet(np.full(n_experts, 0.7))
    first = rng.choice(n_experts, size=(groups, tokens), p=weights)
    second = (first + 1 + rng.choice(n_experts - 1, size=(groups, tokens))) % n_experts
    return np.stack([first, second], axis=-1).astype(np.int32)


def _crowded(groups, tokens, n_experts):
    """どのトークンも 1 番目にエキスパート 0 を選び、2 番目は 1 … E − 1 に散らばる選択（1 番目がドロップされても、
    2 番目は入る）。"""
    first = np.zeros((groups, tokens), np.int32)
    second = 1 + (np.arange(groups * tokens).reshape(groups, tokens) % (n_experts - 1))
    return np.stack([first, second], axis=-1).astype(np.int32)


_MISTAKES = [
    (dict(rounding=round), "容量を四捨五入したので、席が足りない場面があります。C = ceil(c · k · T / E) は切り上げ（math.ceil）です。"),
    (dict(rounding=math.floor), "容量を切り捨てたので、席が足りません。C = ceil(c · k · T / E) は切り上げ（math.ceil）です。"),
    (dict(k_factor=False), "容量に k = 2 を掛けていません。top-2 では 1 トークンが 2 回送られるので、C = ceil(c · 2 · T / E) です。"),
    (dict(global_tokens=True), "容量を全グループのトークンの数で計算しています。容量はグループごとの上限で、T は 1 グループのトークンの数です。"),
    (dict(order="token"), "席をトークンごとに 1 番目・2 番目と交互に埋めています。1 番目の選択をすべて入れてから、2 番目の選択を入れます。"),
    (dict(order="reversed"), "2 番目の選択を先に入れています。1 番目の選択を優先し、すべて入れてから 2 番目を入れます。"),
    (dict(seat_offset=-1), "容量より 1 つ多く入れています。席は 0 から C − 1 までの C 個で、番号が C 以上の選択がドロップされます。"),
    (dict(seat_offset=1), "席の番号を 1 から数えたので、容量より 1 つ少なく入れています。席は 0 から C − 1 までの C 個です。"),
    (dict(reset=False), "席をグループごとに数え直さず、前のグループの席に続けて数えています。容量はグループごとの上限です。"),
    (dict(follow_first=True), "1 番目の選択がドロップされたトークンの、2 番目の選択もドロップしています。"
                              "2 つの選択は別々に、空いた席があれば入ります。"),
]


@exercise("6.8b-3", "dropped_choices")
def check_dropped_choices(fn):
    rng = exercise_rng(3)
    groups, n_experts = max(2, input_devices()), 5
    # (選択, 容量係数): c·k·T/E が整数の組（切り捨てと切り上げが同じ）、整数でない組（端数 0.76 と 0.16: 四捨五入が
    # 切り上げと同じ組と、切り捨てと同じ組）、何もドロップされない組
    cases = [(_ids(rng, groups, 15, n_experts), 1.0), (_ids(rng, groups, 13, n_experts), 1.3),
             (_ids(rng, groups, 14, n_experts), 1.1), (_ids(rng, groups, 11, n_experts), float(n_experts)),
             (_crowded(groups, 10, n_experts), 1.0)]
    # 参照の値はすべて学習者を呼ぶ前に（学習者版では、作るときに記録した値を引く）
    wants = [_dropped(ids, n_experts, factor) for ids, factor in cases]
    alts = [[_dropped(ids, n_experts, factor, **kw) for ids, factor in cases] for kw, _ in _MISTAKES]
    outs = []
    for ids, factor in cases:
        got = call(fn, ids.copy(), n_experts, factor)
        shape = tuple(getattr(got, "shape", ())) if hasattr(got, "shape") else None
        if shape == (n_experts,):
            raise Fail(f"形 ({n_experts},) の、エキスパートごとの数が返りました。"
                       f"どの選択がドロップされたかを、expert_ids と同じ形 {fmt(ids.shape)} の真偽値で返します。")
        if shape != ids.shape:
            got_shape = fmt(shape) if shape is not None else type(got).__name__
            raise Fail(f"戻り値は expert_ids と同じ形 {fmt(ids.shape)} のはずが、{got_shape} でした。")
        arr = np.asarray(got)
        if arr.dtype != np.bool_ and not (np.issubdtype(arr.dtype, np.integer) and set(np.unique(arr)) <= {0, 1}):
            raise Fail(f"戻り値の dtype が {arr.dtype} です。ドロップされた選択を True にした真偽値の配列で返します。")
        outs.append(arr.astype(bool))
    if all(np.array_equal(o, w) for o, w in zip(outs, wants)):
        n_drop = int(wants[1].sum())
        return (f"隠し入力 {len(cases)} つ（{groups} グループ、エキスパート {n_experts}、1 番目の選択が 1 つのエキスパートに"
                f"集まる場面を含む）で一致しました。容量係数 {cases[1][1]} では {n_drop} 個がドロップされます。")

    if all(np.array_equal(o, ~w) for o, w in zip(outs, wants)):
        raise Fail("True と False が逆で、残った選択を True にしています。ドロップされた選択を True にします。")
    for (_, text), alt in zip(_MISTAKES, alts):
        if all(np.array_equal(o, a) for o, a in zip(outs, alt)):   # すべての入力で、この形の誤りと同じ
            raise Fail(text)
    k = next(n for n, (o, w) in enumerate(zip(outs, wants)) if not np.array_equal(o, w))
    (ids, factor), arr, want = cases[k], outs[k], wants[k]
    cap = math.ceil(factor * 2 * ids.shape[1] / n_experts)
    if int(arr.sum()) == int(want.sum()):
        raise Fail(f"容量係数 {factor}（C = {cap}）で、ドロップの数 {int(want.sum())} 個は合っていますが、どの選択かが違います。"
                   "グループごとに、1 番目の選択からトークンの順に席を数えてください。")
    raise Fail(f"容量係数 {factor}（C = {cap}）で、ドロップは {int(want.sum())} 個のはずが {int(arr.sum())} 個でした。"
               "グループごとに、1 番目の選択から順に席を数えてください。")
