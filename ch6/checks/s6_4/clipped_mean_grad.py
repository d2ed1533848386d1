"""6.4-2 clipped_mean_grad: 利用者ごとに勾配をまとめてからクリップして平均する（利用者単位の DP-SGD）。

6.1-4 はサンプルごとにクリップしました。ここでは 1 人の利用者が複数のサンプルを持ち、守りたいのは利用者の影響なので、
利用者ごとの平均勾配 G_u（その利用者のサンプルの勾配の平均）の全体ノルムを max_norm 以下に切り詰め、利用者について平均します。
Ḡ = (1/U) Σ_u G_u · min(1, max_norm / ‖G_u‖)。1 サンプルは辞書 {"x", "y"}、params は入れ子の辞書、users は (B,) の整数。
"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, call, exercise, expect_close, f32, jaxpr_primitives, jaxpr_size
from ...recorded import recorded
from ..clipping import clipped_mean, clipping_mistakes, sample_norms
from .common import exercise_rng, matches, shape_of


def _loss2(params, example):
    import jax.numpy as jnp

    x, y = example["x"], example["y"]
    if getattr(x, "ndim", 1) != 1:
        raise Fail(f"sample_loss は 1 サンプル用ですが、形 {tuple(x.shape)} の x（バッチのまま）が渡されました。"
                   "jax.vmap(jax.grad(sample_loss), in_axes=(None, 0)) で包んでください。")
    t = jnp.tanh(params["enc"]["W"] @ x + params["enc"]["b"])
    return jnp.sum((params["out"] * t - y) ** 2)


def _grads2_np(params, xs, ys):
    """サンプルごとの勾配（NumPy、葉の先頭がサンプルの軸）。"""
    W, b, out = (np.asarray(a, np.float64) for a in (params["enc"]["W"], params["enc"]["b"], params["out"]))
    t = np.tanh(xs @ W.T + b)  # (B, h)
    r = out * t - ys
    dz = 2 * r * out * (1 - t ** 2)
    return {"enc": {"W": dz[:, :, None] * xs[:, None, :], "b": dz}, "out": 2 * r * t}


def _predict_np(params, xs):
    W, b, out = (np.asarray(a, np.float64) for a in (params["enc"]["W"], params["enc"]["b"], params["out"]))
    return out * np.tanh(xs @ W.T + b)


def _tree_map(f, *trees):
    import jax

    return jax.tree.map(f, *trees)


@recorded
def user_grads(per, users: np.ndarray, num_users: int, reduce: str = "mean"):
    """サンプルごとの勾配 per を利用者ごとにまとめる（葉の先頭が利用者の軸 (U, ...)）。reduce は mean か sum。"""
    counts = np.bincount(users, minlength=num_users).astype(np.float64)

    def one(v):
        out = np.zeros((num_users,) + v.shape[1:])
        np.add.at(out, users, v)
        return out / counts.reshape((-1,) + (1,) * (v.ndim - 1)) if reduce == "mean" else out

    return _tree_map(one, per)


def _users(rng, b: int, num_users: int) -> np.ndarray:
    """どの利用者も 1 件以上、件数はまちまち（利用者ごとの平均とサンプルの平均が違う）で、並びは混ぜる。
    利用者 0 はちょうど 1 件（和と平均が同じ利用者がいると、和でまとめる誤りとノルムをそろえる誤りを見分けられる）。"""
    users = np.concatenate([np.arange(num_users), rng.integers(1, num_users, size=b - num_users)])
    return rng.permutation(users).astype(np.int32)


@recorded
def _mistakes(per, users, num_users, max_norm, b):
    """よくある誤りの値（並びは :func:`_mistake_texts` の説明と同じ）。"""
    g_user = user_grads(per, users, num_users)
    sums = user_grads(per, users, num_users, "sum")
    at_user = clipping_mistakes(g_user, max_norm)
    sample_clip = clipped_mean(per, max_norm)  # 6.1-4 の答え: サンプルごとにクリップ
    clipped_user = _tree_map(lambda v: v * num_users, clipped_mean(g_user, max_norm))  # Σ_u（平均でなく合計）
    per_sample_then_user = clipped_mean(user_grads(
        _tree_map(lambda v: v * np.minimum(1.0, max_norm / sample_norms(per)).reshape((-1,) + (1,) * (v.ndim - 1)), per),
        users, num_users), np.inf)
    return [sample_clip, per_sample_then_user, clipped_mean(sums, max_norm), _tree_map(lambda v: v / b, clipped_user),
            at_user["no_clip"], at_user["clip_after_mean"], at_user["per_leaf"], at_user["scale_all"], clipped_user]


def _mistake_texts(b, num_users) -> list[str]:
    """:func:`_mistakes` の値それぞれの説明。"""
    return [
        "サンプルごとにクリップしています（6.1-4 と同じ）。利用者ごとの平均勾配 G_u を作ってから、G_u をクリップします。",
        "サンプルごとにクリップしてから利用者ごとにまとめています。クリップは、利用者ごとにまとめた G_u に対して行います。",
        "利用者ごとの勾配を合計でまとめています。G_u はその利用者のサンプルの勾配の平均です。",
        f"サンプルの数 {b} で割っています。クリップした G_u は利用者の数 num_users で平均します。",
        "クリップなしの平均と同じ値なので、クリップが効いていません。G_u ごとに min(1, max_norm/‖G_u‖) 倍してから平均します。",
        "利用者について平均してからクリップしています。クリップは平均の前に、利用者ごとに行います。",
        "葉ごとに別々のノルムでクリップしています。ノルムは 1 人の利用者のすべての葉をまとめて 1 つです。",
        "ノルムが max_norm 以下の利用者まで max_norm に伸ばしています。倍率は min(1, max_norm/‖G_u‖) です。",
        f"正しい値のちょうど {num_users} 倍（利用者の数倍）なので、合計になっています。利用者について平均します。",
    ]


@recorded
def _expected(params, x, y, noise, users, num_users, users2, num_users2) -> dict:
    """隠し入力での参照の値: 利用者 0 の y を予測の近くに置き換えた y、境目の max_norm、そこでの正しい値、誤りの値
    （:func:`_mistakes`）、別の割り当て users2（利用者 num_users2 人）での正しい値、クリップされる利用者の数。"""
    y = _with_small_user0(params, x, y, noise, users)
    per = _grads2_np(params, x, y)
    g_user = user_grads(per, users, num_users)
    norms = sample_norms(g_user)
    low = np.sort(norms)
    # ノルムの小さい 2 人（1 件だけの利用者 0 と、何件もある利用者）はクリップされず、ほかの 3 人はクリップされる
    max_norm = float(low[1] + low[2]) / 2
    return {"max_norm": max_norm, "clipped": int((norms > max_norm).sum()), "want": clipped_mean(g_user, max_norm),
            "mistakes": _mistakes(per, users, num_users, max_norm, len(users)),
            "want2": clipped_mean(user_grads(per, users2, num_users2), max_norm)}


def _with_small_user0(params, x, y, noise, users):
    """利用者 0 の y を予測の近くに置き換えた y（利用者 0 の勾配は小さい）。"""
    y = y.copy()
    y[users == 0] = _predict_np(params, x[users == 0]) + noise
    return y


def _magnitude(x) -> float:
    return float(np.max(np.abs(np.asarray(x, dtype=np.float64)))) if np.size(x) else 0.0


@exercise("6.4-2", "clipped_mean_grad")
def check_clipped_mean_grad(fn):
    import jax

    rng = exercise_rng(2)
    d, h, b, num_users = 5, 4, 14, 5
    params = {"enc": {"W": f32(rng.normal(size=(h, d)) * 0.7), "b": f32(rng.normal(size=(h,)) * 0.2)},
              "out": f32(1.0 + 0.3 * rng.normal(size=(h,)))}

    def batch(n):
        return {"x": f32(rng.normal(size=(n, d))), "y": f32(rng.normal(size=(n, h)))}

    data, users = batch(b), _users(rng, b, num_users)
    raw_y, noise = data["y"], f32(0.05 * rng.normal(size=(1, h)))
    data["y"] = _with_small_user0(params, data["x"], raw_y, noise, users)
    users2 = _users(rng, b, 3)
    # 参照の値はすべて学習者を呼ぶ前に（学習者版では、作るときに記録した値を引く）
    expected = _expected(params, data["x"], raw_y, noise, users, num_users, users2, 3)
    max_norm, want = expected["max_norm"], expected["want"]
    got = call(fn, _loss2, params, data, users, num_users, max_norm)

    structure = jax.tree.structure(params)
    if jax.tree.structure(got) != structure:
        raise Fail("戻り値の pytree の構造が params と違います。勾配は params と同じ入れ子の辞書で返してください。")
    names = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(params)]
    for name, leaf, ref in zip(names, jax.tree.leaves(got), jax.tree.leaves(params)):
        for lead, what in ((b, "サンプルごと"), (num_users, "利用者ごと")):
            if shape_of(leaf) == (lead,) + ref.shape:
                raise Fail(f"葉 {name} の形が {(lead,) + ref.shape} で、{what}の勾配のままです。"
                           "クリップした後、利用者について平均します。")
        if shape_of(leaf) != ref.shape:
            raise Fail(f"葉 {name} の形は {ref.shape} のはずが、{shape_of(leaf)} でした。")

    def same(cand):
        # atol は誤りの値の大きさに合わせて広げる: 正しい値の 5 倍の誤りなら、丸めの誤差も 5 倍（TPU で見つけた）
        return all(matches(a, c, rtol=1e-3, atol=1e-5 * max(1.0, _magnitude(c) / max(_magnitude(w), 1e-30)))
                   for a, c, w in zip(jax.tree.leaves(got), jax.tree.leaves(cand), jax.tree.leaves(want)))

    if not same(want):
        for cand, why in zip(expected["mistakes"], _mistake_texts(b, num_users)):
            if same(cand):
                raise Fail(why)
        for name, leaf, ref in zip(names, jax.tree.leaves(got), jax.tree.leaves(want)):
            expect_close(leaf, ref, f"葉 {name}", rtol=1e-3, atol=1e-5,
                         )
    # 利用者の並びを変え、利用者の数も変えて、もう一度（決め打ちと、利用者ごとの Python ループを見つける）
    _expect_close_tree(call(fn, _loss2, params, data, users2, 3, max_norm), expected["want2"], names,
                      "num_users=3、別の割り当てのとき")
    sizes = []
    for u in (3, 6):
        uu = _users(rng, b, u)
        sizes.append(jaxpr_size(lambda batch, users, u=u: fn(_loss2, params, batch, users, u, max_norm), data, uu))
    if sizes[0] != sizes[1]:
        raise Fail(f"利用者の数を 3 から 6 にすると jaxpr の式の数が {sizes[0]} から {sizes[1]} に増えたので、利用者を Python のループで"
                   "回しています。jax.ops.segment_sum で一度にまとめてください。")
    b2 = batch(2 * b)
    u2 = _users(rng, 2 * b, num_users)
    size_b = jaxpr_size(lambda batch, users: fn(_loss2, params, batch, users, num_users, max_norm), b2, u2)
    size_a = jaxpr_size(lambda batch, users: fn(_loss2, params, batch, users, num_users, max_norm), data, users)
    if size_a != size_b:
        raise Fail(f"サンプル数を {b} から {2 * b} にすると jaxpr の式の数が {size_a} から {size_b} に増えました。"
                   "サンプルごとの勾配は vmap(grad(...)) で一度に求めてください。")
    loops = jaxpr_primitives(lambda batch, users: fn(_loss2, params, batch, users, num_users, max_norm), data, users) \
        & {"scan", "while"}
    if loops:
        raise Fail(f"jaxpr に {', '.join(sorted(loops))} があるので、1 件ずつ（または 1 人ずつ）回しています。"
                   "vmap と segment_sum で一度にまとめてください。")
    n_clipped = expected["clipped"]
    return f"{b} サンプル・利用者 {num_users} 人（{n_clipped} 人をクリップ）と別の割り当てで一致し、jaxpr も大きさに依存しません。"


def _expect_close_tree(got, want, names, what):
    import jax

    if jax.tree.structure(got) != jax.tree.structure(want):
        raise Fail(f"{what}、戻り値の pytree の構造が params と違います。")
    for name, leaf, ref in zip(names, jax.tree.leaves(got), jax.tree.leaves(want)):
        expect_close(leaf, ref, f"{what}の葉 {name}", rtol=1e-3, atol=1e-5,
                     hint="users と num_users は引数の値を使います。")
