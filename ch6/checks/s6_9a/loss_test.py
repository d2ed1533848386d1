"""6.9a-2 losses_match: 並列の学習ステップを 1 デバイスの学習ステップと比べる「損失の一致のテスト」。

隠しの線形回帰のデータ並列の学習ステップを、シャードの軸を vmap の axis_name で模擬して作ります（デバイスの数に
よらない）。正しいステップ（勾配を pmean、パディングを除いた平均）、勾配を集めない（all-reduce を忘れた）ステップ（最初の損失は同じで、
更新の後からずれる）、パディングを含めて平均したステップ（パディングのあるバッチでずれる）を、学習者のテストに判定させます。
正しいステップと基準の差は、足し算の順序による丸めだけです。バッチはステップごとに違い、どのステップも本編の
train.make_step と同じく状態を譲渡します（donate_argnums=0）。
"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, LearnerError, call, exercise
from .common import exercise_rng

SHARDS = 4


def _problem(r, rows: int, dim: int):
    x = r.normal(size=(rows, dim)).astype(np.float32)
    w_true = r.normal(size=(dim,)).astype(np.float32)
    y = (x @ w_true + 0.1 * r.normal(size=(rows,))).astype(np.float32)
    return x, y


def make_steps(lr: float = 0.1):
    """(基準の 1 デバイスのステップ, {名前: シャードに分けたステップ})。どのステップも (w, batch) -> (w, 損失)。

    batch = (x, y, mask)。シャードに分けたステップは x・y・mask を SHARDS 個に分け、vmap の axis_name で集団通信を模擬する。"""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def loss_sum(w, x, y, mask):
        return jnp.sum(mask * (x @ w - y) ** 2), jnp.sum(mask)

    def reference(w, batch):
        x, y, mask = batch
        def loss(w):
            s, n = loss_sum(w, x, y, mask)
            return s / n
        value, g = jax.value_and_grad(loss)(w)
        return w - lr * g, value

    def sharded(kind):
        def per_shard(w, x, y, mask):
            def local(w):
                s, n = loss_sum(w, x, y, mask)
                if kind == "padded":
                    return s, float(x.shape[0])        # パディングの行も数える
                return s, n
            (s, n), g = jax.value_and_grad(lambda w: local(w), has_aux=True)(w)
            total = lax.psum(n, "shards")
            value = lax.psum(s, "shards") / total
            g = g / total
            g = g if kind == "no_reduce" else lax.psum(g, "shards")
            if kind == "no_reduce":
                g = g * SHARDS                          # 各シャードが自分の勾配だけで更新する
            return w - lr * g, value

        def step(w, batch):
            x, y, mask = (a.reshape(SHARDS, a.shape[0] // SHARDS, *a.shape[1:]) for a in batch)
            ws = jnp.broadcast_to(w, (SHARDS, *w.shape))
            new_w, value = jax.vmap(per_shard, axis_name="shards")(ws, x, y, mask)
            return new_w[0], value[0]
        return jax.jit(step, donate_argnums=0)

    return jax.jit(reference, donate_argnums=0), {k: sharded(k) for k in ("correct", "no_reduce", "padded")}


def cases(r):
    """(説明, w0, batches, tol)。バッチはステップごとに別の行で、パディング（mask 0）の SHARDS 行は
    回帰 A ではどのバッチにも、回帰 B では最後のバッチ（端数のバッチ）にだけある。"""
    out = []
    for label, rows, dim, steps, padded in (("隠しの回帰 A", 24, 5, 6, "all"), ("隠しの回帰 B", 40, 3, 4, "last")):
        x, y = _problem(r, steps * (rows + SHARDS), dim)
        batches = []
        for t in range(steps):
            bx, by = (a[t * (rows + SHARDS):(t + 1) * (rows + SHARDS)].copy() for a in (x, y))
            mask = np.ones(rows + SHARDS, np.float32)
            if padded == "all" or t == steps - 1:        # 行数をシャードの数の倍数にするパディング
                bx[rows:], by[rows:], mask[rows:] = 3.0, 5.0, 0.0
            batches.append((bx, by, mask))
        out.append((label, np.zeros(dim, np.float32), batches, 1e-4))
    return out


# 台本どおりの損失を返すステップ。状態はステップの番号で、基準は 1000 + 番号、テストは 2000 + 番号を返すので、
# どちらのステップがどの状態を受け取ったか（状態を持ち回したか、基準の状態を渡したか）が記録から分かる。
# 状態は 0 次元の jax の配列で、ステップは受け取った状態を消す（本編のステップと同じ譲渡）。
# バッチ i は値 i の配列。ステップ k にバッチ k が来たときだけ台本の損失を返し、ほかのバッチなら両方のステップで
# 同じ _OFF + k + j/2 を返すので、台本の差はその組でしか見えない（バッチの順序の誤りは、ずれの見逃しになる）。
_REF, _TEST = 1000, 2000
_NAME = {_REF: "step_ref", _TEST: "step_test"}
_OFF = 3.0
_BASE = [1.0, 0.75, 0.5, 0.5]
SCRIPTS = {   # 名前: (基準の損失, テストの損失, tol, 正しい判定)。ずれはステップ 0〜3 のどこにもある
    "within": (_BASE, [1.0625, 0.6875, 0.5, 0.5], 0.125, True),
    "first": (_BASE, [1.25, 0.75, 0.5, 0.5], 0.125, False),
    "middle_low": (_BASE, [1.0, 0.5, 0.5, 0.5], 0.125, False),
    "middle_high": (_BASE, [1.0, 1.0, 0.5, 0.5], 0.125, False),
    "last": (_BASE, [1.0, 0.75, 0.5, 0.75], 0.125, False),
    "huge": (_BASE, [1.0, 8.75, 0.5, 0.5], 0.125, False),
    "exact_tol": (_BASE, [1.0, 0.75, 0.75, 0.5], 0.25, False),
    "relative": ([8.0, 8.0, 8.0, 8.0], [8.0, 8.5, 8.0, 8.0], 0.125, False),
}


def _batch_index(batch) -> int | None:
    """決めた損失の列のバッチ（値 i が 2 つ並ぶ配列）の番号 i。バッチでない値なら None。"""
    try:
        v = np.asarray(batch, dtype=np.float64)
    except Exception:   # バッチでない値
        return None
    if v.shape != (2,) or v[0] != v[1] or not float(v[0]).is_integer():
        return None
    return int(v[0])


class _Script:
    """決めた損失の列の 1 つ: 2 つのステップと、それぞれが受け取った (状態, バッチの番号) の記録。"""

    def __init__(self, ref_losses, test_losses):
        import jax.numpy as jnp

        self.calls = {_REF: [], _TEST: []}
        self.n = len(ref_losses)
        self.losses = {_REF: ref_losses, _TEST: test_losses}
        self.consumed = []          # (消した状態, 消したステップ, そのバッチの番号)
        self.reused = None          # 消えた状態が来た (消したステップ, 受け取ったステップ, 同じバッチか)
        self.step_ref = self._step(_REF, _TEST)
        self.step_test = self._step(_TEST, _REF)
        self.state = jnp.zeros((), jnp.int32)

    def _step(self, tag, other):
        import jax
        import jax.numpy as jnp

        def step(state, batch):
            j = _batch_index(batch)
            if isinstance(state, jax.Array) and state.is_deleted():
                by, last = next(((t, bj) for s, t, bj in self.consumed if s is state), (tag, None))
                self.reused = self.reused or (by, tag, j == last)
            value = int(state)                       # 消えた状態なら JAX の RuntimeError
            self.calls[tag].append((value, j))
            if isinstance(state, jax.Array):         # 譲渡: 受け取った状態を消す
                state.delete()
                self.consumed.append((state, tag, j))
            k = value % 1000
            if j != k:                               # 台本の組でない: 両方のステップで同じ損失
                return jnp.int32(tag + k + 1), np.float32(_OFF + k + 0.5 * (j if j is not None else -1))
            # もう一方のステップの状態から進めると、そのステップと同じ損失になる（ずれが隠れる）
            losses = self.losses[other if value // 1000 == other // 1000 else tag]
            return jnp.int32(tag + k + 1), np.float32(losses[min(k, len(losses) - 1)])
        return step

    def batches(self):
        return [np.full(2, i, np.float32) for i in range(self.n)]

    def donation_slip(self) -> str | None:
        """消えた（譲渡した）状態をステップに渡した誤りの言葉（なければ None）。"""
        if self.reused is None:
            return None
        by, to, same_batch = self.reused
        other = _TEST if by == _REF else _REF
        if by != to:
            return (f"{_NAME[by]} に渡した状態を {_NAME[to]} にも渡しましたが、ステップは状態を譲渡する"
                    "（donate_argnums=0）ので、その状態はもう消えています。"
                    "jax.tree.map(jnp.copy, state) などでコピーし、2 つのステップに別々の状態を渡します。")
        if same_batch and not self.calls[other]:
            return _never_called(other, by)
        return (f"{_NAME[by]} に 1 度渡した状態を、次のバッチでも {_NAME[by]} に渡しましたが、譲渡した状態はもう消えています。"
                "次のステップには、ステップが返した新しい状態を渡します。")

    def order_slip(self) -> str | None:
        """状態やバッチの渡し方の誤りの言葉（なければ None）。"""
        for tag, other in ((_TEST, _REF), (_REF, _TEST)):
            if self.calls[other] and not self.calls[tag]:
                return _never_called(tag, other)
        for tag, other in ((_TEST, _REF), (_REF, _TEST)):
            if any(s // 1000 == other // 1000 for s, _ in self.calls[tag]):
                return ("一方のステップが返した状態を、もう一方のステップに渡しています。それぞれのステップは、"
                        "そのステップが前に返した状態で進めます（同じ状態の損失は同じなので、ずれが見えません）。")
        ref_js = [j for _, j in self.calls[_REF]]
        test_js = [j for _, j in self.calls[_TEST]]
        for i, (a, b) in enumerate(zip(ref_js, test_js)):
            if a != b:
                return (f"{i + 1} 番目のステップで、step_ref には {_batch_name(a)}、step_test には {_batch_name(b)} "
                        "を渡しました。2 つのステップには、同じバッチを同じ順に渡します。")
        js, n = ref_js, self.n
        if js != list(range(len(js))):
            if len(js) > 1 and all(j == 0 for j in js):
                return ("すべてのステップに最初のバッチ batches[0] を渡しました。"
                        "ステップごとに、batches の次のバッチに進みます。")
            if js == list(range(n - 1, -1, -1)):
                return (f"batches を逆の順に渡しました（最初のステップに batches[{n - 1}]）。"
                        "batches の先頭から順に渡します。")
            if js == [(k - 1) % n for k in range(n)]:
                return (f"最初のステップに batches[0] ではなく batches[{n - 1}] を渡しました（添字が 1 つ前にずれています）。"
                        "batches[0]、batches[1]、… の順に渡します。")
            if js == list(range(1, n)):
                return ("最初のバッチ batches[0] のステップを飛ばしています。"
                        "batches[0] から最後のバッチまで、すべてのバッチでステップを進めます。")
            i = next(i for i, j in enumerate(js) if j != i)
            return (f"{i + 1} 番目のステップに batches[{i}] ではなく {_batch_name(js[i])} を渡しました。"
                    "batches の順に 1 つずつ渡します。")
        for tag in (_REF, _TEST):
            ks = [s % 1000 for s, _ in self.calls[tag]]
            if len(ks) != len(set(ks)):
                return ("同じ状態で何度もステップを呼んでいます。ステップが返した新しい状態を、"
                        "次のステップに渡して進めます。")
        return None

    def short_slip(self) -> str | None:
        """True を返したときの、比べ足りない誤りの言葉（なければ None）。"""
        short = min(len(self.calls[_REF]), len(self.calls[_TEST]))
        if short == 0:
            return "ステップを 1 度も呼ばずに True を返しました。両方のステップですべてのバッチを進め、損失を比べます。"
        if short == self.n - 1:
            return (f"{self.n} 個のバッチのうち最後のバッチのステップを比べていません。"
                    "最後のバッチまで、すべてのステップの損失を比べます。")
        if short < self.n:
            return (f"{self.n} 個のバッチのうち {short} ステップしか進めずに True を返しました。"
                    "ずれは更新を重ねた後のステップに出るので、すべてのステップの損失を比べます。")
        return None


def _never_called(missing: int, twice: int) -> str:
    return (f"{_NAME[missing]} を 1 度も呼ばず、{_NAME[twice]} だけを 2 度ずつ呼んでいます。"
            f"2 つ目の損失は {_NAME[missing]} で計算します。")


def _batch_name(j) -> str:
    return f"batches[{j}]" if j is not None else "batches の要素でない値"


def _as_bool(out, label):
    if isinstance(out, (bool, np.bool_)):
        return bool(out)
    if getattr(out, "shape", None) == () and getattr(out, "dtype", None) == np.bool_:
        return bool(out)                                 # 0 次元の bool の配列（jnp.all の結果など）
    if isinstance(out, (int, np.integer)):
        raise Fail(f"{label}: 戻り値が bool ではなく int の {int(out)} でした。"
                   "True か False を返します（np.bool_ や 0 次元の bool の配列も可）。")
    raise Fail(f"{label}: 戻り値が bool ではなく {type(out).__name__} でした。True か False を返します"
               "（比べた結果の配列なら bool(...) で包みます）。")


def _call_script(fn, sc, tol):
    try:
        return call(fn, sc.step_ref, sc.step_test, sc.state, sc.batches(), tol)
    except LearnerError as exc:
        msg = sc.donation_slip()
        if msg is None and "deleted" in str(exc.exc) and sc.state.is_deleted():
            msg = ("ステップが譲渡して消えた state を、後からコピーしようとしました（「Array has been deleted」）。"
                   "コピーは、state を最初のステップに渡す前に作ります。")
        if msg:
            raise Fail(f"決めた損失の列: {msg}") from None
        raise


def _check_scripts(fn):
    got = {}
    for name, (a, b, tol, want) in SCRIPTS.items():
        sc = _Script(a, b)
        got[name] = _as_bool(_call_script(fn, sc, tol), "決めた損失の列")
        if got[name] != want:                           # 判定を誤ったときだけ、状態とバッチの渡し方を調べる
            msg = sc.order_slip() or (sc.short_slip() if got[name] else None)
            if msg:
                raise Fail(f"決めた損失の列: {msg}")
        if want and not got[name]:
            raise Fail("決めた損失の列: どのステップの差も tol 未満なのに False を返しました。"
                       "等しさではなく、差の絶対値が tol 未満かで比べます。")
    wrong = {name for name in SCRIPTS if got[name] != SCRIPTS[name][3]}
    if not wrong:
        return
    head = "決めた損失の列"
    if {"middle_low", "middle_high"} <= wrong:
        if "last" not in wrong:
            raise Fail(f"{head}: 2 番目のステップだけで差が tol 以上ですが、True を返しました。"
                       "最後のステップだけでなく、どのステップの差も tol 未満かを調べます。")
        if "huge" not in wrong:
            raise Fail(f"{head}: 2 番目のステップだけで差が tol 以上ですが、True を返しました。"
                       "損失の平均や合計ではなく、ステップごとの差が tol 未満かを調べます。")
        raise Fail(f"{head}: 2 番目のステップの差が 7.75 で tol 0.125 を超えても True を返しました。"
                   "どのステップでも差が tol 未満のときだけ True です。")
    if "middle_low" in wrong or "middle_high" in wrong:
        side = "小さい" if "middle_low" in wrong else "大きい"
        raise Fail(f"{head}: テストの損失が基準より 0.25 {side}ステップを一致と判定しました。"
                   "差の絶対値 abs(...) を tol と比べます。")
    if "last" in wrong:
        raise Fail(f"{head}: 最後（4 番目）のステップだけで差が tol 以上ですが、True を返しました。"
                   "最後のバッチまで、すべてのステップを比べます。")
    if "first" in wrong:
        raise Fail(f"{head}: 最初のステップだけで差が tol 以上ですが、True を返しました。"
                   "最初のステップ（更新の前）の損失も、ほかのステップと同じように比べます。")
    if "exact_tol" in wrong:
        raise Fail(f"{head}: 差がちょうど tol（0.25）のステップを一致と判定しました。"
                   "一致は差が tol 未満（<）のときだけで、tol 以下（<=）ではありません。")
    if "relative" in wrong:
        raise Fail(f"{head}: 損失 8.0 と 8.5（差 0.5、tol 0.125）を一致と判定しました。"
                   "相対誤差ではなく、差の絶対値を tol と比べます。")
    raise Fail(f"{head}: 判定が正しくありません（{', '.join(sorted(wrong))}）。")


@exercise("6.9a-2", "losses_match")
def check_losses_match(fn):
    import jax.numpy as jnp

    _check_scripts(fn)
    r = exercise_rng(2)
    ref, steps = make_steps()
    want = {"correct": True, "no_reduce": False, "padded": False}
    for label, w0, batches, tol in cases(r):
        answers = {}
        for name, step in steps.items():
            try:        # ステップは状態を譲渡するので、呼ぶたびに新しい初めの状態を渡す
                out = call(fn, ref, step, jnp.array(w0), batches, tol)
            except LearnerError as exc:
                if "deleted" not in str(exc.exc):
                    raise
                raise Fail(f"{label}: 譲渡して消えた状態を、もう一度ステップに渡しました（「Array has been deleted」）。"
                           "jax.tree.map(jnp.copy, state) などで、2 つのステップに別々の状態を渡します。") from None
            answers[name] = _as_bool(out, label)
        if answers == want:
            continue
        if not answers["correct"]:
            raise Fail(f"{label}: 正しいステップを不一致と判定しました。差は足し算の順序による丸めだけなので、"
                       "等しさではなく、差が tol 未満かで比べます。")
        if answers["no_reduce"] and not answers["padded"]:
            raise Fail(f"{label}: 勾配を集めない（all-reduce を忘れた）ステップを一致と判定しました。"
                       "それぞれのステップを、そのステップが返した状態で進め、すべてのステップの損失を比べます。")
        if answers["padded"]:
            raise Fail(f"{label}: パディングの行も平均に含めたステップを一致と判定しました。"
                       "どのステップでも差が tol 未満のときだけ True です。")
        raise Fail(f"{label}: 判定が正しい組み合わせ（正しいステップだけ True）になりませんでした。")
    return (f"あらかじめ決めた {len(SCRIPTS)} つの損失の列と、状態を譲渡する隠しの 2 つの回帰を試しました。"
            "どのステップの差も tol 未満のときだけ一致と判定し、勾配の集め忘れとパディングの誤りを見つけました。")
