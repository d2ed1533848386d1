"""6.9a-2 losses_match: 並列の学習ステップを 1 デバイスの学習ステップと比べる「損失の一致のテスト」。

隠しの線形回帰のデータ並列の学習ステップを、シャードの軸を vmap の axis_name で模擬して作ります（デバイスの数に
よらない）。正しいステップ（勾配を pmean、パディングを除いた平均）、勾配を集めない（all-reduce を忘れた）ステップ（最初の損失は同じで、
更新の後からずれる）、パディングを含めて平均したステップ（最初から少しずれる）を、学習者のテストに判定させます。
正しいステップと基準の差は、足し算の順序による丸めだけです。
"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, call, exercise
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
        return jax.jit(step)

    return jax.jit(reference), {k: sharded(k) for k in ("correct", "no_reduce", "padded")}


def cases(r):
    """(説明, w0, batches, tol)。バッチの最後の SHARDS 行はパディング（mask 0）。"""
    out = []
    for label, rows, dim, steps in (("隠しの回帰 A", 24, 5, 6), ("隠しの回帰 B", 40, 3, 4)):
        x, y = _problem(r, rows, dim)
        pad = SHARDS                                     # 行数をシャードの数の倍数にする
        x = np.concatenate([x, np.zeros((pad, dim), np.float32) + 3.0])
        y = np.concatenate([y, np.full(pad, 5.0, np.float32)])
        mask = np.concatenate([np.ones(rows, np.float32), np.zeros(pad, np.float32)])
        batch = (x, y, mask)
        out.append((label, np.zeros(dim, np.float32), [batch] * steps, 1e-4))
    return out


# 台本どおりの損失を返すステップ。状態はステップの番号で、基準は 1000 + 番号、テストは 2000 + 番号を返すので、
# どちらのステップがどの状態を受け取ったか（状態を持ち回したか、基準の状態を渡したか）が記録から分かる。
_REF, _TEST = 1000, 2000
_BASE = [1.0, 0.75, 0.5, 0.5]
SCRIPTS = {   # 名前: (基準の損失, テストの損失, tol, 正しい判定)
    "within": (_BASE, [1.0625, 0.6875, 0.5, 0.5], 0.125, True),
    "first": (_BASE, [1.25, 0.75, 0.5, 0.5], 0.125, False),
    "middle_low": (_BASE, [1.0, 0.5, 0.5, 0.5], 0.125, False),
    "middle_high": (_BASE, [1.0, 1.0, 0.5, 0.5], 0.125, False),
    "last": (_BASE, [1.0, 0.75, 0.5, 0.75], 0.125, False),
    "huge": (_BASE, [1.0, 8.75, 0.5, 0.5], 0.125, False),
    "exact_tol": (_BASE, [1.0, 0.75, 0.75, 0.5], 0.25, False),
    "relative": ([8.0, 8.0, 8.0, 8.0], [8.0, 8.5, 8.0, 8.0], 0.125, False),
}


class _Script:
    """台本の 1 つ: 2 つのステップと、それぞれが受け取った状態の記録。"""

    def __init__(self, ref_losses, test_losses):
        self.calls = {_REF: [], _TEST: []}
        self.n = len(ref_losses)
        self.losses = {_REF: ref_losses, _TEST: test_losses}
        self.step_ref = self._step(_REF, _TEST)
        self.step_test = self._step(_TEST, _REF)

    def _step(self, tag, other):
        def step(state, batch):
            self.calls[tag].append(int(state))
            k = int(state) % 1000
            # もう一方のステップの状態から進めると、そのステップと同じ損失になる（ずれが隠れる）
            losses = self.losses[other if int(state) // 1000 == other // 1000 else tag]
            return tag + k + 1, np.float32(losses[min(k, len(losses) - 1)])
        return step

    def batches(self):
        return [np.full(2, i, np.float32) for i in range(self.n)]

    def slip(self) -> str | None:
        """状態の扱いの誤りの言葉（なければ None）。"""
        for tag, other in ((_TEST, _REF), (_REF, _TEST)):
            if any(s // 1000 == other // 1000 for s in self.calls[tag]):
                return ("一方のステップが返した状態を、もう一方のステップに渡しています。それぞれのステップは、"
                        "そのステップが前に返した状態で進めます（同じ状態の損失は同じなので、ずれが見えません）。")
        for tag in (_REF, _TEST):
            ks = [s % 1000 for s in self.calls[tag]]
            if len(ks) != len(set(ks)):
                return ("同じ状態で何度もステップを呼んでいます。ステップが返した新しい状態を、"
                        "次のステップに渡して進めます。")
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


def _as_bool(out, label):
    if isinstance(out, (bool, np.bool_)):
        return bool(out)
    if getattr(out, "shape", None) == () and getattr(out, "dtype", None) == np.bool_:
        return bool(out)                                 # 0 次元の bool の配列（jnp.all の結果など）
    raise Fail(f"{label}: True か False を返してください。実際は {type(out).__name__} でした"
               "（比べた結果の配列なら bool(...) で包むと True/False になります）。")


def _check_scripts(fn):
    got = {}
    for name, (a, b, tol, want) in SCRIPTS.items():
        sc = _Script(a, b)
        got[name] = _as_bool(call(fn, sc.step_ref, sc.step_test, 0, sc.batches(), tol), "台本の損失")
        if want and not got[name]:
            raise Fail("台本の損失: どのステップの差も tol 未満なのに False を返しました。"
                       "等しさではなく、差の絶対値が tol 未満かで比べます。")
        if got[name] and not want:                      # ずれを見逃したときだけ、状態の扱いを調べる
            msg = sc.slip()
            if msg:
                raise Fail(f"台本の損失: {msg}")
    wrong = {name for name in SCRIPTS if got[name] != SCRIPTS[name][3]}
    if not wrong:
        return
    head = "台本の損失"
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
    _check_scripts(fn)
    r = exercise_rng(2)
    ref, steps = make_steps()
    want = {"correct": True, "no_reduce": False, "padded": False}
    for label, w0, batches, tol in cases(r):
        answers = {}
        for name, step in steps.items():
            answers[name] = _as_bool(call(fn, ref, step, w0, batches, tol), label)
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
    return (f"台本の {len(SCRIPTS)} つの損失の列と隠しの 2 つの回帰で、どのステップの差も tol 未満のときだけ一致と判定し、"
            "勾配の集め忘れとパディングの誤りを見つけました。")
