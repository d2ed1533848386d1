"""6.10-1 max_batch: 重みと KV キャッシュが HBM に収まる最大のバッチ。"""
from __future__ import annotations

from ...checking import Fail, call, exercise
from ...recorded import recorded
from .common import exercise_rng, kv_bytes_per_seq, whole_number

# 必須: 重み + B × (1 系列のキャッシュ) <= hbm_bytes となる最大の整数 B（等号は収まる）。重みだけで超えるなら 0。
# キャッシュは 層 × 2（K と V）× KV ヘッド × ヘッドの次元 × 長さ × 1 値のバイト。


@recorded
def _answer(model, seq_len, bytes_per_value, weight_bytes, hbm_bytes, **kw) -> int:
    per_seq = kv_bytes_per_seq(model, seq_len, bytes_per_value, **kw)
    return max(0, int((hbm_bytes - weight_bytes) // per_seq))


def _cases():
    r = exercise_rng(1)
    out = []
    for _ in range(4):
        kv = int(r.choice([2, 4, 8]))
        model = {"n_layers": int(r.integers(12, 81)), "n_heads": kv * int(r.choice([2, 4, 8])), "n_kv_heads": kv,
                 "head_dim": int(r.choice([64, 128])), "n_params": int(r.integers(10**9, 7 * 10**10))}
        bpv = int(r.choice([1, 2]))
        weight = model["n_params"] * int(r.choice([1, 2]))
        seq = int(r.choice([2048, 4096, 8192, 32768]))
        per_seq = kv_bytes_per_seq(model, seq, bpv)
        hbm = weight + int(per_seq * float(r.uniform(3.3, 60.7)))
        out.append((model, seq, bpv, weight, hbm))
    # ちょうど 7 系列で満杯になる組（等号は収まる）と、重みだけで HBM を超える組 2 つ: 超える量が 1 系列分より少ない組と、
    # 3.5 系列分の組（int() で 0 に向かって切り捨てると −3 になり、max(0, …) のない答えが見える）
    model, seq, bpv, weight, _ = out[0]
    per = kv_bytes_per_seq(model, seq, bpv)
    out.append((model, seq, bpv, weight, weight + 7 * per))
    out.append((model, seq, bpv, weight, weight - per // 3))
    out.append((model, seq, bpv, 10 * per, 10 * per - 3 * per - per // 2))
    # ちょうど満杯より 1 位置分（per // seq バイト）だけ多い組: 答えは 7 のまま。< で比べても 7 で、長さを seq + 1 で
    # 数えると 6 になるので、2 つの誤りを分ける
    out.append((model, seq, bpv, weight, weight + 7 * per + per // seq))
    return out


EXACT, OVER = 4, (5, 6)  # _cases() の中の位置: ちょうど満杯の組、重みだけで超える組


_MISTAKES = [
    (dict(kv_factor=1), "K だけを数えています。キャッシュは層ごとに K と V の 2 つを持つので、1 系列のバイトに 2 を掛けます。"),
    (dict(heads_key="n_heads"), "クエリのヘッドの数で数えています。GQA ではキャッシュに入るのは KV ヘッドの分だけなので、"
                                "model['n_kv_heads'] を使います。"),
    (dict(layers=False), "層の数を掛けていません。キャッシュは層ごとに K と V を持つので、1 系列のバイトは"
                         "層 × 2 × KV ヘッド × ヘッドの次元 × 長さ × 1 値のバイトです。"),
]


@exercise("6.10-1", "max_batch")
def check_max_batch(fn):
    cases = _cases()
    # 参照の値はすべて学習者を呼ぶ前に（学習者版では、作るときに記録した値を引く）
    want = [_answer(*c) for c in cases]
    alts = [[_answer(*c, **kw) for c in cases] for kw, _ in _MISTAKES]
    longer = [_answer(m, s + 1, b, weight, hbm) for m, s, b, weight, hbm in cases]
    recounted = [_answer(m, s, b, m["n_params"] * b, hbm) for m, s, b, _, hbm in cases]
    got = []
    for model, seq, bpv, weight, hbm in cases:
        value = call(fn, dict(model), seq, bpv, weight, hbm)
        got.append(whole_number(value, "max_batch の戻り値"))
    if got == want:
        return f"隠しのモデルとチップ {len(cases)} 通り（ちょうど満杯、重みだけで超える組を含む）で、最大のバッチが一致しました。"
    # 取り違えは重みが収まる組だけで比べる（重みだけで超える組の答え方は、下で別に名指しする）
    fits = [i for i in range(len(cases)) if i not in OVER]

    def same(alt) -> bool:
        return [got[i] for i in fits] == [alt[i] for i in fits]
    for (_, text), alt in zip(_MISTAKES, alts):
        if same(alt):
            raise Fail(text)
    if same(longer):
        raise Fail("長さを seq_len + 1 で数えたので、1 系列のキャッシュが 1 位置分大きくなっています。"
                   "キャッシュが持つ位置は seq_len 個なので、長さは seq_len のまま掛けます。")
    if same([int(hbm // kv_bytes_per_seq(m, s, b)) for m, s, b, _, hbm in cases]):
        raise Fail("重みのバイトを引いていません。HBM には重みも載るので、使えるのは hbm_bytes - weight_bytes です。")
    if same([int(hbm // (weight + kv_bytes_per_seq(m, s, b))) for m, s, b, weight, hbm in cases]):
        raise Fail("重みを系列ごとに足しています。重みはバッチの系列が共有して 1 回だけ載るので、"
                   "B は (hbm_bytes − weight_bytes) // (1 系列のキャッシュのバイト) です。")
    if same(recounted):
        raise Fail("重みのバイトを n_params × bytes_per_value で数え直しています。重みとキャッシュの 1 値のバイトは違う"
                   "ことがあるので、重みのバイトは引数の weight_bytes を使います。")
    k = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
    if k == EXACT and got[k] == want[k] - 1:
        raise Fail("ちょうど満杯になる組で 1 つ少なく返しています。重みとキャッシュの合計が hbm_bytes に等しいときは"
                   "収まるので、比較は <= です。")
    if k in OVER and got[k] < 0:
        raise Fail(f"重みだけで HBM を超える組で {got[k]} を返しています。収まるバッチがないときは 0 を返します"
                   "（max(0, …)）。")
    if got[k] == want[k] + 1:
        raise Fail(f"収まる数より 1 つ多い {got[k]} を返しています（正しくは {want[k]}）。端数は切り捨てます"
                   "（// か math.floor。切り上げや四捨五入ではありません）。")
    raise Fail(f"隠しの組の 1 つで、最大のバッチは {want[k]} のはずが {got[k]} でした。"
               "1 系列のキャッシュのバイトと、残りの HBM の割り算を確かめてください。")
