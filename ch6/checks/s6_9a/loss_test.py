"""6.9a-2 losses_match: 並列の学習ステップを 1 デバイスの学習ステップと比べる「損失の一致のテスト」。

隠しの線形回帰のデータ並列の学習ステップを、シャードの軸を vmap の axis_name で模擬して作ります（デバイスの数に
よらない）。正しいステップ（勾配を pmean、パディングを除いた平均）、勾配の平均を忘れたステップ（最初の損失は同じで、
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
    """(説明, w0, batches, tol)。バッチの最後の行はパディング（mask 0）。"""
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


@exercise("6.9a-2", "losses_match")
def check_losses_match(fn):
    r = exercise_rng(2)
    ref, steps = make_steps()
    want = {"correct": True, "no_reduce": False, "padded": False}
    for label, w0, batches, tol in cases(r):
        answers = {}
        for name, step in steps.items():
            out = call(fn, ref, step, w0, batches, tol)
            if not isinstance(out, (bool, np.bool_)):
                raise Fail(f"{label}: True か False を返してください。実際は {type(out).__name__} でした。")
            answers[name] = bool(out)
        if answers == want:
            continue
        if not answers["correct"]:
            raise Fail(f"{label}: 正しいステップを不一致と判定しました。差は足し算の順序による丸めだけなので、"
                       "等しさではなく、差が tol 未満かで比べます。")
        if answers["no_reduce"] and not answers["padded"]:
            raise Fail(f"{label}: 勾配の平均を忘れたステップを一致と判定しました。最初の損失は更新の前なので同じです。"
                       "更新を重ねたすべてのステップの損失を比べます。")
        if answers["padded"]:
            raise Fail(f"{label}: パディングの行も平均に含めたステップを一致と判定しました。"
                       "どのステップでも差が tol 未満のときだけ True です。")
        raise Fail(f"{label}: 判定が正しい組み合わせ（正しいステップだけ True）になりませんでした。")
    return "隠しの 2 つの回帰で、正しいステップだけを一致と判定し、勾配の平均の忘れとパディングの誤りを見つけました。"
