"""6.1 vmap の演習チェック。

どの演習も、1 サンプル用の関数（kernel、fn、pair_fn、loss_fn）を **引数で受け取り**、それを vmap で
バッチに広げる関数を書きます。チェックはノートブックの例とは別の関数（隠し関数）と、ノートブックにない形と
乱数で作った入力（隠し入力）で学習者の関数を呼びます。ですからノートブックの定義をここに写す必要はなく、
学習者の答えもノートブックの例の式を手で書き直したものでは通りません。

隠し関数は 1 サンプル分の形しか受け付けません。バッチがそのまま渡されたら（vmap を使わずに
ブロードキャストで書いた、vmap の段が足りない、in_axes が違う）、どの引数にどんな形が来たかを示して
不合格にします。Python のループは jaxpr の大きさ（バッチを変えても同じか）で見つけます。
"""
from __future__ import annotations

import functools

import numpy as np

from .. import explain
from .._core import Fail, LearnerError, call, exercise, expect_close, expect_no_batch_loop, fmt, jaxpr_primitives
from .._core import f32 as _f32, hidden_rng


def _rng(tag: int) -> np.random.Generator:
    return hidden_rng(61_000 + tag)


def _shape(x) -> tuple | None:
    try:
        return tuple(np.shape(x))
    except Exception:
        return None


class _Spy:
    """隠し関数の呼ばれた回数（渡した関数を使っているか）を数える。"""

    def __init__(self):
        self.calls = 0


def _guard(fn_name: str, arg: str, value, want: tuple, hint: str) -> None:
    """隠し関数の引数が 1 サンプル分の形でなければ、何が来たかを示して不合格にする。"""
    got = _shape(value)
    if got != want:
        raise Fail(f"{fn_name} の引数 {arg} に形 {fmt(got)} の値が渡されました。{fn_name} が 1 回の呼び出しで受け取る "
                   f"{arg} の形は {fmt(want)} です。{hint}")


def _sizes_fail(exc: LearnerError, hint) -> None:
    """in_axes の誤りでよく出る 2 つの vmap のエラー（軸の大きさがそろわない、軸の番号が次元を超える）を、
    どの引数のどの軸が何の大きさかを残した日本語と、この演習のヒントにする。"""
    err = exc.exc
    if isinstance(err, ValueError) and "rank should be at least" in str(err):
        said = explain.explain(err).removeprefix(f"{type(err).__name__}: ")
        raise Fail(f"{said.split('。')[0]}。{hint(set())}") from None
    if isinstance(err, ValueError) and "inconsistent sizes" in str(err):
        parts = explain.vmap_sizes(str(err))
        listed = "、".join(f"{n} の {a} 軸{f'など {c} 個' if c > 1 else ''}が {s}" for n, a, s, c in parts)
        names = {n.split("[")[0] for n, *_ in parts}
        raise Fail(f"vmap でバッチにする軸の大きさがそろっていません（{listed or '大きさの違う軸があります'}）。"
                   f"{hint(names)}") from None


def _unused(fn_name: str, spy: _Spy) -> None:
    if spy.calls == 0:
        raise Fail(f"渡された {fn_name} が一度も呼ばれていません。ノートブックの例の式を書き写すのではなく、"
                   f"引数の {fn_name} を vmap で包んで使ってください（チェックは別の {fn_name} を渡します）。")


# 6.1-1 -------------------------------------------------------------------------------
# 1 つの点 x と K 個の中心（centers と、中心ごとの幅 gammas）から K 個の特徴: in_axes=(None, 0, 0)

def _kernel_1(spy: _Spy, d: int):
    """隠し kernel（ラプラス核）: x (d,)、c (d,)、g () -> スカラー。"""
    import jax.numpy as jnp

    hint = "kernel は中心 1 つ用です。x は全中心で共通の 1 点、centers と gammas は中心ごとに 1 つずつです（in_axes）。"

    def kernel(x, c, g):
        spy.calls += 1
        _guard("kernel", "x", x, (d,), hint)
        _guard("kernel", "c", c, (d,), hint)
        _guard("kernel", "g", g, (), hint)
        return jnp.exp(-g * jnp.sum(jnp.abs(x - c)))

    return kernel


@exercise("6.1-1", "rbf_features")
def check_rbf_features(fn):
    rng = _rng(1)
    d, k = 3, 7

    def data(n):
        return _f32(rng.normal(size=(d,))), _f32(rng.normal(size=(n, d))), _f32(rng.uniform(0.2, 1.5, size=(n,)))

    x, centers, gammas = data(k)
    spy = _Spy()
    try:
        got = call(fn, _kernel_1(spy, d), x, centers, gammas)
    except LearnerError as exc:
        _sizes_fail(exc, lambda names: (
            "x は K 個の中心すべてに共通の 1 点なので、x の in_axes は None です（x の 0 軸は特徴の軸で、バッチではありません）。"
            if "x" in names else "in_axes は引数ごとに 1 つ: 共通の引数は None、中心ごとに違う引数は 0 です。"))
        raise
    _unused("kernel", spy)
    want = np.exp(-gammas * np.abs(x - centers).sum(1))
    expect_close(got, want, "rbf_features(kernel, x, centers, gammas) の結果",
                 hint="φ[k] = kernel(x, centers[k], gammas[k]) です。")
    expect_no_batch_loop(fn, lambda n: (_kernel_1(_Spy(), d), *data(n)), what="中心の数")
    return f"隠し kernel（別の核）と隠し入力（中心 {k} 個、{d} 次元）で一致し、jaxpr は中心の数に依存しません。"


# 6.1-2 -------------------------------------------------------------------------------
# 時間優先 (T, B, F) の系列と (B,) の長さ: in_axes=(1, 0)、out_axes=1

def _fn_2(spy: _Spy, t: int, f: int, b: int):
    """隠し fn: 長さまでの累積平均、それより後は 0。seq (T, F)、length () -> (T, F)。"""
    import jax.numpy as jnp

    def fn(seq, length):
        spy.calls += 1
        hint = ""
        if _shape(seq) == (b, f):
            hint = (f"seqs の 0 軸は時間（{t}）で、バッチ（{b} 本）は 1 軸目です。"
                    "seqs の in_axes を確かめてください。")
        _guard("fn", "seq", seq, (t, f), hint)
        _guard("fn", "length", length, (), "lengths は系列ごとに 1 つずつ（形 (B,) の 0 軸がバッチ）です。")
        steps = jnp.arange(seq.shape[0])
        running = jnp.cumsum(seq, axis=0) / (steps + 1.0)[:, None]
        return jnp.where((steps < length)[:, None], running, 0.0)

    return fn


def _fn_2_np(seqs, lengths):
    t = seqs.shape[0]
    steps = np.arange(t)
    running = np.cumsum(seqs.astype(np.float64), axis=0) / (steps + 1.0)[:, None, None]
    return np.where((steps[:, None] < lengths[None, :])[:, :, None], running, 0.0)


@exercise("6.1-2", "time_major_apply")
def check_time_major(fn):
    rng = _rng(2)
    t, b, f = 6, 4, 3
    seqs = _f32(rng.normal(size=(t, b, f)))
    lengths = np.array([2, 6, 0, 4], dtype=np.int32)
    spy = _Spy()
    try:
        got = call(fn, _fn_2(spy, t, f, b), seqs, lengths)
    except LearnerError as exc:
        _sizes_fail(exc, lambda names: (
            f"seqs は (時間 {t}, バッチ {b}, 特徴 {f}) の並びで、バッチは 1 軸目です。lengths は形 ({b},) で 0 軸目がバッチです。"))
        raise
    _unused("fn", spy)
    want = _fn_2_np(seqs, lengths)
    if _shape(got) == (b, t, f):
        raise Fail(f"出力の形が (バッチ, 時間, 特徴) = {fmt((b, t, f))} です。期待は入力と同じ時間優先の "
                   f"(時間, バッチ, 特徴) = {fmt((t, b, f))} です。出力のどこにバッチ軸を置くかは out_axes で決めます。")
    expect_close(got, want, "time_major_apply(fn, seqs, lengths) の結果",
                 hint="out[:, i] = fn(seqs[:, i], lengths[i]) です。")
    expect_no_batch_loop(fn, lambda n: (_fn_2(_Spy(), t, f, n), _f32(rng.normal(size=(t, n, f))),
                                        rng.integers(0, t + 1, size=n).astype(np.int32)), sizes=(3, 5))
    return f"隠し fn と隠し入力（時間 {t}、{b} 本、特徴 {f}）で一致し、jaxpr はバッチサイズに依存しません。"


# 6.1-3 -------------------------------------------------------------------------------
# B 組の点群 Xs (B, n, d) と共通の点集合 Y (m, d): 距離 (B, n, m)。vmap を 3 段重ねる

def _pair_3(spy: _Spy, d: int):
    """隠し pair_fn（コサイン距離）: x (d,)、y (d,) -> スカラー。"""
    import jax.numpy as jnp

    hint = "pair_fn は 2 点用です。vmap を重ねて、点群の組・点群の中の点・Y の点の 3 つの軸を回してください。"

    def pair_fn(x, y):
        spy.calls += 1
        _guard("pair_fn", "x", x, (d,), hint)
        _guard("pair_fn", "y", y, (d,), hint)
        return 1.0 - jnp.dot(x, y) / jnp.sqrt(jnp.dot(x, x) * jnp.dot(y, y))

    return pair_fn


def _pair_3_np(xs, y):
    xs, y = xs.astype(np.float64), y.astype(np.float64)
    dots = np.einsum("bnd,md->bnm", xs, y)
    return 1.0 - dots / np.sqrt((xs ** 2).sum(-1)[:, :, None] * (y ** 2).sum(-1)[None, None, :])


@exercise("6.1-3", "batched_distances")
def check_batched_distances(fn):
    rng = _rng(3)
    b, n, m, d = 3, 5, 4, 6

    def data(b_, n_, m_):
        return _f32(rng.normal(size=(b_, n_, d))), _f32(rng.normal(size=(m_, d)))

    xs, y = data(b, n, m)
    spy = _Spy()
    try:
        got = call(fn, _pair_3(spy, d), xs, y)
    except LearnerError as exc:
        _sizes_fail(exc, lambda names: (
            f"Y（{m} 点）はどの点群のどの点とも比べる共通の集合なので、外側の 2 段では Y の in_axes は None、"
            "Y の点を回すのは一番内側の段だけです。"))
        raise
    _unused("pair_fn", spy)
    want = _pair_3_np(xs, y)
    shape = _shape(got)
    if shape is not None and shape != want.shape and sorted(shape) == sorted(want.shape):
        raise Fail(f"出力の形が {fmt(shape)} で、期待の (点群の組 B, 点 n, Y の点 m) = {fmt(want.shape)} と軸の順番が違います。"
                   "外側の段から順に、組（Xs の 0 軸）、組の中の点、Y の点を回します。")
    expect_close(got, want, "batched_distances(pair_fn, Xs, Y) の結果", rtol=1e-4, atol=1e-4,
                 hint="D[b, i, j] = pair_fn(Xs[b, i], Y[j]) です。")
    for what, make in (("点群の組の数", lambda k: (_pair_3(_Spy(), d), *data(k, n, m))),
                       ("点群の中の点の数", lambda k: (_pair_3(_Spy(), d), *data(b, k, m))),
                       ("Y の点の数", lambda k: (_pair_3(_Spy(), d), *data(b, n, k)))):
        expect_no_batch_loop(fn, make, sizes=(2, 3), what=what)
    return (f"隠し pair_fn（コサイン距離）と隠し入力 Xs {fmt(xs.shape)}、Y {fmt(y.shape)} で一致し、"
            "jaxpr は 3 つのどの大きさにも依存しません。")


# 6.1-4 -------------------------------------------------------------------------------
# DP-SGD の勾配: サンプルごとに勾配のノルムを max_norm 以下に切り詰めてから平均する

def _loss_4(spy: _Spy, d: int):
    """隠し loss_fn: params = {"hidden": {"W", "b"}, "head": v}、x (d,)、y () -> スカラー。"""
    import jax.numpy as jnp

    hint = "loss_fn は 1 サンプル用です。サンプルの軸は vmap で回します（in_axes）。"

    def loss_fn(params, x, y):
        spy.calls += 1
        _guard("loss_fn", "x", x, (d,), hint)
        _guard("loss_fn", "y", y, (), hint)
        h = jnp.tanh(params["hidden"]["W"] @ x + params["hidden"]["b"])
        return (params["head"] @ h - y) ** 2

    return loss_fn


def _params_4(rng, d, h):
    return {"hidden": {"W": _f32(rng.normal(size=(h, d)) * 0.7), "b": _f32(rng.normal(size=(h,)) * 0.5)},
            "head": _f32(rng.normal(size=(h,)))}


def _per_example_grads(loss_fn, params, xs, ys):
    """参照: 1 件ずつ grad（チェック側なので素直なループ）。葉の先頭にサンプルの軸。"""
    import jax

    grads = [jax.grad(loss_fn)(params, x, y) for x, y in zip(xs, ys)]
    return jax.tree.map(lambda *g: np.stack([np.asarray(v, np.float64) for v in g]), *grads)


def _leaves_flat(tree):
    import jax

    return np.concatenate([np.reshape(v, (v.shape[0], -1)) for v in jax.tree.leaves(tree)], axis=1)


def _clip_mean(per, max_norm, per_leaf=False):
    import jax

    if per_leaf:
        return jax.tree.map(lambda g: (g * np.minimum(1.0, max_norm / np.sqrt((g.reshape(len(g), -1) ** 2).sum(1)))
                                       .reshape((-1,) + (1,) * (g.ndim - 1))).mean(0), per)
    norms = np.sqrt((_leaves_flat(per) ** 2).sum(1))
    scale = np.minimum(1.0, max_norm / norms)
    return jax.tree.map(lambda g: (g * scale.reshape((-1,) + (1,) * (g.ndim - 1))).mean(0), per)


def _tree_close(got, want) -> bool:
    import jax

    try:
        if jax.tree.structure(got) != jax.tree.structure(want):
            return False
        return all(np.allclose(np.asarray(g, np.float64), w, rtol=1e-4, atol=1e-6)
                   for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)))
    except Exception:
        return False


def _expect_tree(got, want, what: str, hint: str) -> None:
    """pytree の構造（辞書のキーと入れ子）を比べ、葉ごとに expect_close（どの葉かを示す）。"""
    import jax

    want_def = jax.tree.structure(want)
    try:
        got_def = jax.tree.structure(got)
    except Exception:
        got_def = None
    if got_def != want_def:
        raise Fail(f"{what}は params と同じ構造（{_describe(want)}）のはずですが、{_describe(got)} が返りました。"
                   "jax.tree.map を使うと、葉を計算しても構造はそのまま残ります。")
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(want)[0]]
    for path, g, w in zip(paths, jax.tree.leaves(got), jax.tree.leaves(want)):
        expect_close(g, w, f"{what}の {path} ", rtol=1e-4, atol=1e-6, hint=hint)


def _describe(tree) -> str:
    if isinstance(tree, dict):
        return "辞書 {" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in tree.items()) + "}"
    if isinstance(tree, (list, tuple)):
        return f"{type(tree).__name__}（要素 {len(tree)} 個）"
    shape = getattr(tree, "shape", None)
    return f"形 {fmt(tuple(shape))} の配列" if shape is not None else type(tree).__name__


@exercise("6.1-4", "clipped_mean_grad")
def check_clipped_mean_grad(fn):
    rng = _rng(4)
    d, h, b = 4, 5, 9
    params = _params_4(rng, d, h)

    def data(n):
        return _f32(rng.normal(size=(n, d)) * 1.5), _f32(rng.normal(size=(n,)) * 2.0)

    xs, ys = data(b)
    per = _per_example_grads(_loss_4(_Spy(), d), params, xs, ys)
    norms = np.sqrt((_leaves_flat(per) ** 2).sum(1))
    # 境目 max_norm をサンプルのノルムの中ほどに置き（切り詰めるサンプルと、そのままのサンプルの両方がある）、
    # 全部を切り詰める小さな値（その 1/10）でも呼ぶ。2 つの値で、式のどの部分を落としても結果が変わる。
    max_norm = float(np.round(np.median(norms), 2))
    small = round(max_norm / 10, 3)
    spy = _Spy()
    got = call(fn, _loss_4(spy, d), params, xs, ys, max_norm)
    _unused("loss_fn", spy)
    want = _clip_mean(per, max_norm)
    got_leaves, want_leaves = _leaves_or_empty(got), _leaves_or_empty(want)
    if len(got_leaves) == len(want_leaves) and all(_shape(g) == (b, *np.shape(w)) for g, w in zip(got_leaves, want_leaves)):
        raise Fail(f"葉の先頭にサンプルの軸（{b}）が残っています。サンプルごとに切り詰めた勾配を、最後にサンプルについて平均します。")
    got_small = call(fn, _loss_4(_Spy(), d), params, xs, ys, small)
    want_small = _clip_mean(per, small)
    if not (_tree_close(got, want) and _tree_close(got_small, want_small)):
        mistakes = [
            (lambda c: _clip_mean(per, np.inf), "切り詰めていません: ノルムが max_norm を超えるサンプルは、勾配に max_norm / ノルム を掛けて縮めます。"),
            (lambda c: _clip_one(per, c), "平均してから切り詰めています。切り詰めはサンプルごと（平均する前）に行います。"),
            (lambda c: _clip_mean(per, c, per_leaf=True),
             "葉ごとに別々のノルムで切り詰めています。ノルムは全部の葉をまとめた 1 本のベクトルのノルムです。"),
            (lambda c: _scale_all(per, c), "ノルムが max_norm より小さいサンプルまで大きくしています: 掛ける値は min(1, max_norm / ノルム) です。"),
            (lambda c: _tree_scale(_clip_mean(per, c), b), "サンプルについて平均ではなく合計しています。"),
        ]
        for alt, msg in mistakes:
            if _tree_close(got, alt(max_norm)) and _tree_close(got_small, alt(small)):
                raise Fail(msg)
    _expect_tree(got, want, "clipped_mean_grad の結果",
                 hint="g_i = grad(loss_fn)(params, x_i, y_i) を min(1, max_norm / ||g_i||) 倍して、i について平均します。")
    _expect_tree(got_small, want_small, f"max_norm={fmt(small)}（全サンプルを切り詰める値）のときの結果",
                 hint="max_norm は引数で受け取った値を使い、g_i を min(1, max_norm / ||g_i||) 倍します。")
    expect_no_batch_loop(fn, lambda n: (_loss_4(_Spy(), d), params, *data(n), max_norm))
    clipped = int((norms > max_norm).sum())
    return (f"隠し loss_fn（入れ子の params）と {b} サンプル（うち {clipped} 件を切り詰め）で一致し、"
            "jaxpr はバッチサイズに依存しません。")


def _leaves_or_empty(tree) -> list:
    import jax

    try:
        return jax.tree.leaves(tree)
    except Exception:
        return []


def _clip_one(per, max_norm):
    import jax

    mean = jax.tree.map(lambda g: g.mean(0), per)
    norm = np.sqrt(sum(float((v ** 2).sum()) for v in jax.tree.leaves(mean)))
    return jax.tree.map(lambda g: g * min(1.0, max_norm / norm), mean)


def _scale_all(per, max_norm):
    import jax

    norms = np.sqrt((_leaves_flat(per) ** 2).sum(1))
    scale = max_norm / norms
    return jax.tree.map(lambda g: (g * scale.reshape((-1,) + (1,) * (g.ndim - 1))).mean(0), per)


def _tree_scale(tree, k):
    import jax

    return jax.tree.map(lambda g: g * k, tree)


# 6.1-5 -------------------------------------------------------------------------------
# M 個のモデルを、モデルごとの学習率で 1 ステップずつ学習する（パラメータ側の vmap）

def _loss_5(spy: _Spy, d: int, h: int):
    """隠し loss_fn: params = {"W" (h, d), "b" (h,), "v" (h,)}、x (d,)、y () -> スカラー。"""
    import jax.numpy as jnp

    def loss_fn(params, x, y):
        spy.calls += 1
        if _shape(params["W"]) != (h, d):
            raise Fail(f"loss_fn の params['W'] に形 {fmt(_shape(params['W']))} が渡されました。1 つのモデルの W は "
                       f"{fmt((h, d))} です: stacked_params はモデルの軸（0 軸）で vmap してから渡します。")
        _guard("loss_fn", "x", x, (d,), "loss_fn は 1 サンプル用です。サンプルの軸も vmap で回します。")
        _guard("loss_fn", "y", y, (), "loss_fn は 1 サンプル用です。サンプルの軸も vmap で回します。")
        return (params["v"] @ jnp.tanh(params["W"] @ x + params["b"]) - y) ** 2

    return loss_fn


def _stacked_5(rng, m, d, h):
    return {"W": _f32(rng.normal(size=(m, h, d)) * 0.6), "b": _f32(rng.normal(size=(m, h)) * 0.3),
            "v": _f32(rng.normal(size=(m, h)))}


def _sgd_reference(loss_fn, stacked, xs, ys, lrs, reduce="mean", same_lr=False, sign=-1.0, grads_only=False):
    """参照: モデルごと・サンプルごとのループ（チェック側）。"""
    import jax

    out = []
    for i in range(len(lrs)):
        p = jax.tree.map(lambda a: a[i], stacked)
        gs = [jax.grad(loss_fn)(p, x, y) for x, y in zip(xs, ys)]
        g = jax.tree.map(lambda *v: np.sum([np.asarray(u, np.float64) for u in v], axis=0), *gs)
        if reduce == "mean":
            g = jax.tree.map(lambda v: v / len(xs), g)
        lr = float(lrs[0] if same_lr else lrs[i])
        out.append(g if grads_only else jax.tree.map(lambda a, v: np.asarray(a, np.float64) + sign * lr * v, p, g))
    return jax.tree.map(lambda *v: np.stack(v), *out)


@exercise("6.1-5", "ensemble_sgd_step")
def check_ensemble_sgd_step(fn):
    rng = _rng(5)
    m, b, d, h = 3, 7, 4, 5
    stacked = _stacked_5(rng, m, d, h)
    xs, ys = _f32(rng.normal(size=(b, d))), _f32(rng.normal(size=(b,)))
    lrs = _f32([0.05, 0.3, 1.2])
    spy = _Spy()
    got = call(fn, _loss_5(spy, d, h), stacked, xs, ys, lrs)
    _unused("loss_fn", spy)
    loss = _loss_5(_Spy(), d, h)
    want = _sgd_reference(loss, stacked, xs, ys, lrs)
    if not _tree_close(got, want):
        mistakes = [
            (dict(same_lr=True), "全モデルに同じ学習率を使っています: lrs はモデルごとに 1 つずつなので、lrs もモデルの軸で vmap します。"),
            (dict(reduce="sum"), "損失（勾配）をサンプルについて合計しています。バッチ平均の損失の勾配を使います。"),
            (dict(sign=+1.0), "勾配の向きに進んでいます（p + lr * g）。損失を下げるには p - lr * g です。"),
            (dict(grads_only=True), "勾配を返しています。返すのは 1 ステップ後のパラメータ p - lr * g です。"),
        ]
        for kw, msg in mistakes:
            if _tree_close(got, _sgd_reference(loss, stacked, xs, ys, lrs, **kw)):
                raise Fail(msg)
    _expect_tree(got, want, "ensemble_sgd_step の結果",
                 hint="モデル k について p_k - lrs[k] * grad(平均損失)(p_k) です。")
    for what, make in (("モデル数", lambda k: (_loss_5(_Spy(), d, h), _stacked_5(rng, k, d, h), xs, ys,
                                              _f32(rng.uniform(0.1, 1.0, size=k)))),
                       ("サンプル数", lambda k: (_loss_5(_Spy(), d, h), stacked, _f32(rng.normal(size=(k, d))),
                                               _f32(rng.normal(size=(k,))), lrs))):
        expect_no_batch_loop(fn, make, sizes=(2, 4), what=what)
    return (f"隠し loss_fn と {m} モデル（学習率 {', '.join(fmt(float(v)) for v in lrs)}）× {b} サンプルで一致し、"
            "jaxpr はモデル数にもサンプル数にも依存しません。")


# 6.1-6 -------------------------------------------------------------------------------
# 画像のバッチ正規化: 1 枚 (H, W, C) を受け取り、チャネルごとにバッチ全体と全画素の統計で正規化する

EPS = 1e-5


def _images_6(rng, b, hh, ww, c):
    """チャネルごとに性質の違う画像: 画像ごとのずれ、画素ごとのずれ、分散がとても小さいチャネル（eps が効く）。"""
    x = rng.normal(size=(b, hh, ww, c)) * np.linspace(0.5, 3.0, c)
    x += rng.normal(size=(b, 1, 1, c)) * 2.0 + 1.5        # 画像ごとのずれ（画像 1 枚の統計とは違う）
    x += rng.normal(size=(1, hh, ww, c))                   # 画素ごとのずれ（画素ごとの統計とは違う）
    x[..., 0] = rng.normal(size=(b, hh, ww)) * 1e-3        # 分散 1e-6: eps=1e-5 のほうが大きい
    return _f32(x)


def _bn_np(xs, eps):
    x = xs.astype(np.float64)
    mean = x.mean((0, 1, 2))
    var = ((x - mean) ** 2).mean((0, 1, 2))
    return (x - mean) / np.sqrt(var + eps)


@exercise("6.1-6", "batchnorm_image")
def check_batchnorm_image(fn):
    import jax

    rng = _rng(6)
    b, hh, ww, c = 5, 4, 3, 6
    xs = _images_6(rng, b, hh, ww, c)
    got = call(jax.vmap(fn, axis_name="batch"), xs)
    want = _bn_np(xs, EPS)
    if _shape(got) == want.shape and not np.allclose(np.asarray(got, np.float64), want, rtol=1e-3, atol=1e-3):
        g = np.asarray(got, np.float64)
        if np.allclose(g, _bn_np(xs, 0.0), rtol=1e-2, atol=1e-3):
            raise Fail("分散がとても小さいチャネル（分散 ≈ 1e-6）で値が違います: 分母の sqrt(分散 + eps) の eps を"
                       "入れていないようです。")
        per_image = (xs - xs.mean((1, 2), keepdims=True)) / np.sqrt(xs.var((1, 2), keepdims=True) + EPS)
        if np.allclose(g, per_image, rtol=1e-3, atol=1e-3):
            raise Fail("画像 1 枚ごとの統計で正規化しています。平均と分散はバッチ全体（lax.pmean(…, 'batch')）と"
                       "全画素（H と W の軸）にわたって取ります。")
        per_pixel = (xs - xs.mean(0)) / np.sqrt(xs.var(0) + EPS)
        if np.allclose(g, per_pixel, rtol=1e-3, atol=1e-3):
            raise Fail("画素ごとにバッチの統計を取っています。チャネルごとに、H と W の軸もまとめて平均します"
                       "（jnp.mean(…, axis=(0, 1)) と lax.pmean の組み合わせ）。")
    expect_close(got, want, "vmap(batchnorm_image, axis_name='batch')(xs) の結果", rtol=1e-3, atol=1e-4,
                 hint="チャネルごとに、バッチ全体と全画素の平均・分散で (x - 平均) / sqrt(分散 + eps) です。")
    big_eps = 0.5
    got_eps = call(jax.vmap(functools.partial(fn, eps=big_eps), axis_name="batch"), xs)
    expect_close(got_eps, _bn_np(xs, big_eps), f"eps={big_eps} で呼んだ結果", rtol=1e-3, atol=1e-4,
                 hint="eps は引数で受け取った値を使います。")
    prims = jaxpr_primitives(fn, xs[0], axis_env=[("batch", b)])
    if not prims & {"psum", "pmean", "psum_invariant"}:
        raise Fail("1 枚用の関数の中に集団通信（psum / pmean）が見つかりません。"
                   "バッチ全体の統計は lax.pmean(…, axis_name='batch') で取ります。")
    return (f"隠し入力（画像 {b} 枚、{hh}×{ww}、{c} チャネル。分散 ≈ 1e-6 のチャネルを含む）と eps={big_eps} で一致し、"
            "関数の中で集団通信を使っています。")
