"""6.7-5 choose_layout: 収まって最も速い方式（DP・FSDP・TP、なければ None）を、式と規則のとおりに選ぶ。"""
from __future__ import annotations

from ...checking import Fail, call, exercise
from .common import HiddenChip, rng

LAYOUTS = ("DP", "FSDP", "TP")


def estimates(model: dict, hw, n: int, *, fsdp_factor: float = 3.0, tp_batch_split: bool = False) -> dict:
    """方式 -> (メモリ, 計算の秒 + 通信の秒)。キーワードは、よくある誤りの答えを作るため。"""
    p, w, lyr, b, a = model["params"], model["width"], model["layers"], model["batch"], model["act"]
    s = (n - 1) / n
    compute = 6 * b * p / n / hw.flops
    act = a * w * lyr
    return {
        "DP": (16 * p + act * b / n, compute + 2 * 2 * s * p / hw.link_bw),
        "FSDP": (16 * p / n + act * b / n, compute + 2 * fsdp_factor * s * p / hw.link_bw),
        "TP": (16 * p / n + act * (b / n if tp_batch_split else b), compute + 2 * 2 * s * b * w * (lyr - 1) / hw.link_bw),
    }


def pick(table: dict, capacity: float, *, use_memory: bool = True, by_memory: bool = False):
    fits = [((m, t) if by_memory else (t, m), name) for name, (m, t) in table.items() if not use_memory or m <= capacity]
    return min(fits)[1] if fits else None


def reference_layout(model: dict, hw, n: int):
    return pick(estimates(model, hw, n), hw.hbm_bytes)


def _cases(r):
    """(説明, model, hw, n): 答えが DP・FSDP・TP・None のそれぞれになる隠しの場面（数字は少しずつ揺らす）。"""
    j = lambda v: float(v * r.uniform(0.9, 1.1))  # noqa: E731
    fast = HiddenChip("隠しチップ（容量大）", j(1e15), j(4e12), j(8e11), 80e9)
    small = HiddenChip("隠しチップ（容量小）", j(3e14), j(1e12), j(2e11), 24e9)
    return [
        ("21 億の重み・容量大", {"params": j(2.1e9), "width": 8192, "layers": 32, "batch": 65536, "act": 4.0}, fast, 8),
        ("21 億の重み・容量小", {"params": j(2.1e9), "width": 8192, "layers": 32, "batch": 65536, "act": 4.0}, small, 16),
        ("幅の広いモデル・小さいバッチ", {"params": j(1.07e10), "width": 16384, "layers": 40, "batch": 2048, "act": 4.0}, fast, 8),
        ("TP だけ活性化が入らない", {"params": j(1.07e10), "width": 16384, "layers": 40, "batch": 12288, "act": 20.0}, fast, 8),
        ("FSDP と TP が両方収まる", {"params": j(2.1e9), "width": 8192, "layers": 32, "batch": 16384, "act": 4.0}, small, 16),
        ("大きすぎるモデル", {"params": j(4e11), "width": 32768, "layers": 96, "batch": 65536, "act": 4.0}, small, 16),
    ]


# よくある誤り: (その誤りで選んだ答え, メッセージ)。学習者の答えの並びが丸ごと一致したら、その誤りを名指しする
_MISTAKES = (
    (dict(fsdp_factor=2.0), {}, "FSDP の通信を DP と同じにしています。FSDP は all-gather 2 回と reduce-scatter 1 回で 2·3·s·P / W です"
                                "（DP の 1.5 倍）。"),
    (dict(tp_batch_split=True), {}, "TP の活性化をバッチの 1/n にしています。TP はバッチを分けないので、活性化はバッチ全体（a·B·w·L）です。"),
    ({}, dict(use_memory=False), "メモリを見ずに、いちばん速い方式を選んでいます。まず hbm_bytes 以下の方式に絞り、どれも収まらなければ None です。"),
    ({}, dict(by_memory=True), "メモリのいちばん少ない方式を選んでいます。収まる方式のうち、計算の秒 + 通信の秒がいちばん小さいものを選びます。"),
)


@exercise("6.7-5", "choose_layout")
def check_choose_layout(fn):
    r = rng(5)
    cases = _cases(r)
    gots, wants = [], []
    for label, model, hw, n in cases:
        got = call(fn, dict(model), hw, n)
        if got is not None and not isinstance(got, str):
            raise Fail(f"{label}: 方式の名前（'DP'・'FSDP'・'TP'）か None を返してください。実際は {type(got).__name__} です。")
        if isinstance(got, str) and got.lower() == "none":
            raise Fail(f"{label}: 文字列の {got!r} が返りました。どれも収まらないときは、文字列ではなく None を返します。")
        if got is not None and got not in LAYOUTS:
            raise Fail(f"{label}: {got!r} は方式の名前ではありません。'DP'・'FSDP'・'TP' か None を返します。")
        gots.append(got)
        wants.append(reference_layout(model, hw, n))
    assert set(wants) == {"DP", "FSDP", "TP", None}, wants  # 隠しの場面がすべての答えを含む
    if gots == wants:
        return "隠しのモデルとチップの行 6 つで、選んだ方式が一致しました（答えが DP・FSDP・TP・None の場面をすべて含みます）。"
    for est_kw, pick_kw, message in _MISTAKES:
        wrong = [pick(estimates(m, hw, n, **est_kw), hw.hbm_bytes, **pick_kw) for _, m, hw, n in cases]
        if gots == wrong:
            raise Fail(message)
    k = next(i for i, (g, w) in enumerate(zip(gots, wants)) if g != w)
    label, model, hw, n = cases[k]
    table, got, want = estimates(model, hw, n), gots[k], wants[k]
    if want is None:
        mem = min(m for m, _ in table.values())
        raise Fail(f"{label}: どの方式も収まらない（いちばん小さくても {mem / 1e9:.1f} GB、容量 {hw.hbm_bytes / 1e9:.0f} GB）のに、"
                   f"{got!r} が返りました。収まらなければ None です。")
    if got is None:
        raise Fail(f"{label}: {want} が収まる（{table[want][0] / 1e9:.1f} GB、容量 {hw.hbm_bytes / 1e9:.0f} GB）のに None が返りました。")
    mem_got, t_got = table[got]
    if mem_got > hw.hbm_bytes:
        raise Fail(f"{label}: {got} は 1 デバイスに {mem_got / 1e9:.1f} GB 要り、容量 {hw.hbm_bytes / 1e9:.0f} GB に収まりません"
                   f"（期待 {want}）。まず hbm_bytes 以下の方式に絞ります。")
    raise Fail(f"{label}: {got} の見積もりは {t_got * 1e3:.3g} ms で、{want} の {table[want][1] * 1e3:.3g} ms より遅いです。"
               "収まる方式のうち、計算の秒 + 通信の秒がいちばん小さいものを選びます。")
