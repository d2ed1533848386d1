"""6.3c pmap からの移行の演習チェック。

隠し入力はチェックのときに ``jax.device_count()`` から作ります（1〜8 のどのデバイス数でも動く）。
損失・学習率・eps は引数で渡すので、ノートブックの定義の写しは持ちません。

- 6.3c-1 ``make_migrated_step(mesh, loss_fn, lr)``: pmap の SGD ステップを ``jax.jit(jax.shard_map(...))`` に移し、
  1 度だけ作って返すファクトリ関数。値（隠しの学習率）、積み重ならない出力、同じ形での 2 回目の呼び出しで
  トレースし直さないこと（損失関数が呼ばれた回数で数える）、shard_map を使うこと、all-gather がないことを確かめます。
- 6.3c-2 ``standardize_smap(x, eps)``: pmap の標準化を ``jax.smap`` に移す。採点は ``with jax.set_mesh(mesh):`` の中で
  呼びます。全デバイスの統計量、eps、z は行で分割したまま、平均は複製、shard_map（smap）と pmean を使うことを確かめます。
"""
from __future__ import annotations

import numpy as np

from ..checking import Fail, LearnerError, NotDone, call, exercise, expect_close, expect_shape
from ..checking import walk as _walk
from ..checking import f32 as _f32, hidden_rng, n_devices as _n

from ..checking import PSUM_NAMES, dict_entry as _get, is_close as _close, traced_eqns  # noqa: F401

MESH_AXIS = "data"  # どちらの演習もメッシュの軸の名前は "data"（問題文に書いてある）
HIDDEN_LR = 0.35  # 6.3c-1 の採点で渡す学習率（ノートブックの LR_LOGISTIC とは違う）
HIDDEN_EPS = 0.2  # 6.3c-2 の採点で渡す eps（分散の小さい列で効く大きさ）


def _rng(tag: int) -> np.random.Generator:
    return hidden_rng(63_300 + tag)


def _eqns(fn, *args):
    """traced_eqns と同じ。ただし関数の中の jax.set_mesh は、何が違うかを言って不合格にする。"""
    try:
        return traced_eqns(fn, *args)
    except LearnerError as err:
        exc = err.exc
        if isinstance(exc, ValueError) and "set_mesh" in str(exc) and "outside of" in str(exc):
            raise Fail("関数の中で jax.set_mesh を使っています。jax.set_mesh は jit やトレースの外でしか使えないので、"
                       "メッシュは呼ぶ側で与えます（問題文のとおり、採点では with jax.set_mesh(mesh) の中で呼びます）。") from None
        raise


def _shard_maps(eqns) -> list[tuple[str, ...]]:
    """jaxpr の shard_map の式ごとに、そのメッシュの軸の名前。"""
    return [tuple(e.params["mesh"].axis_names) for e in eqns if e.primitive.name == "shard_map"]


def _pair(out, what: str):
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        got = f"長さ {len(out)} の {type(out).__name__}" if isinstance(out, (tuple, list)) else type(out).__name__
        raise Fail(f"{what}の 2 つ組（タプルでもリストでもよい）を返してください（受け取ったのは {got}）。")
    return out


# 6.3c-1 ------------------------------------------------------------------------------

def _logistic_np(params, x, y, lr, scale=1.0):
    """全データでのロジスティック回帰の 1 ステップ（NumPy）。scale は勾配の倍率（誤答の見分け用）。"""
    w, b = np.asarray(params["w"], np.float64), float(params["b"])
    z = x @ w + b
    loss = float(np.mean(np.logaddexp(0.0, z) - y * z))
    r = 1 / (1 + np.exp(-z)) - y
    gw, gb = x.T @ r / len(y), r.mean()
    return {"w": w - lr * scale * gw, "b": b - lr * scale * gb}, loss


def _step_data(rng, mesh, n, per, d):
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    x = _f32(rng.normal(size=(n * per, d)))
    y = _f32(rng.uniform(size=(n * per,)) < 0.5)
    p0 = {"w": _f32(rng.normal(size=(d,)) * 0.5), "b": np.float32(rng.normal() * 0.2)}
    placed = (jax.device_put(p0, NamedSharding(mesh, P())),
              jax.device_put(x, NamedSharding(mesh, P(MESH_AXIS))),
              jax.device_put(y, NamedSharding(mesh, P(MESH_AXIS))))
    return p0, x, y, placed


def _check_step_output(out, p0, x, y, n, d, what):
    new, loss = _pair(out, f"{what}は (new_params, loss) ")
    w, b = _get(new, "w", "new_params"), _get(new, "b", "new_params")
    if getattr(w, "shape", None) == (n, d) and n > 1:
        raise Fail(f"'w' の形が ({n}, {d}) で、pmap のようにデバイスごとに積み重なっています。"
                   "全デバイスで同じ結果は out_specs=P() で、形 (d,) の 1 つのグローバル配列として返します。")
    expect_shape(w, (d,), "new_params['w']", "out_specs=P() で複製された 1 つの配列を返します。")
    expect_shape(b, (), "new_params['b']", "out_specs=P() で複製された 1 つの配列を返します。")
    if getattr(loss, "shape", None) != ():
        shape = getattr(loss, "shape", None)
        raise Fail(f"loss の形が {tuple(shape) if shape is not None else type(loss).__name__} です。"
                   "全デバイスで平均した損失をスカラー（形 ()）で返します（lax.pmean と out_specs=P()）。")
    want, want_loss = _logistic_np(p0, x, y, HIDDEN_LR)
    expect_close(loss, want_loss, f"{what}の loss（更新前の全データの平均損失）",
                 hint="各デバイスの損失を lax.pmean で全デバイスの平均にします。")
    if n > 1 and _close(w, _logistic_np(p0, x, y, HIDDEN_LR, scale=n)[0]["w"]):
        raise Fail(f"更新が {n} 倍大きすぎます。check_vma=True（既定）の shard_map では、P() で渡したパラメータの勾配は"
                   "自動で全デバイス分 psum されるので、その後の pmean では平均になりません。"
                   "損失を pmean してから grad しましょう。")
    hint = f"学習率は引数 lr（採点では {HIDDEN_LR}）、損失は引数 loss_fn を使います。"
    expect_close(w, want["w"], f"{what}の new_params['w']", hint=hint)
    expect_close(b, want["b"], f"{what}の new_params['b']", hint=hint)


@exercise("6.3c-1", "make_migrated_step")
def check_migrated_step(fn):
    import jax
    import jax.numpy as jnp

    from ..hlo import count_collectives

    n = _n()
    rng = _rng(1)
    d, per = 3, 5
    mesh = jax.make_mesh((n,), (MESH_AXIS,))
    traces = [0]

    def loss_fn(params, x, y):
        # 採点で渡す損失（ロジットから計算する 2 値交差エントロピー）。呼ばれた回数＝トレースの回数
        traces[0] += 1
        z = x @ params["w"] + params["b"]
        return jnp.mean(jnp.logaddexp(0.0, z) - y * z)

    step = call(fn, mesh, loss_fn, HIDDEN_LR)
    if not callable(step):
        raise Fail(f"make_migrated_step はステップ関数（jit した関数）を返すファクトリ関数です"
                   f"（受け取ったのは {type(step).__name__}）。")
    p0, x, y, placed = _step_data(rng, mesh, n, per, d)
    _check_step_output(call(step, *placed), p0, x, y, n, d, "1 回目")
    first = traces[0]
    p1, x1, y1, placed1 = _step_data(rng, mesh, n, per, d)  # 同じ形、違う値
    _check_step_output(call(step, *placed1), p1, x1, y1, n, d, "2 回目（同じ形の別の入力）")
    again = traces[0] - first
    if again:
        raise Fail(f"同じ形の入力で 2 回目に呼んだとき、ステップがもう一度トレースされました（loss_fn が呼ばれた回数: "
                   f"1 回目の呼び出しで {first} 回、2 回目で {again} 回）。jax.jit(jax.shard_map(...)) は make_migrated_step の中で 1 度だけ作って"
                   "返します（呼ぶたびに jax.jit を作り直したり、jit を付けなかったりすると毎回トレースされます）。")

    meshes = _shard_maps(_eqns(step, *placed))
    if not any(MESH_AXIS in m for m in meshes):
        raise Fail("jaxpr に、渡したメッシュ（軸 'data'）の shard_map が見つかりません。この演習では "
                   "jax.jit(jax.shard_map(..., mesh=mesh, ...)) で移します（jit とシャーディングだけの版は 6.3c の本文で見ました）。")
    colls = call(count_collectives, jax.jit(step), *placed)
    if colls.get("all-gather", 0):
        raise Fail(f"コンパイル結果に all-gather が {colls['all-gather']} 個あります。データを集めずに、"
                   "各デバイスの損失（または勾配）だけを pmean で平均しましょう。")
    found = "、".join(f"{k} ×{v}" for k, v in colls.items()) or "なし"
    return (f"隠し入力（{n} デバイス × {per} 件、学習率 {HIDDEN_LR}）でレガシー版と同じ更新になり、"
            f"2 回目の呼び出しでトレースし直しませんでした（集団通信: {found}）。")


# 6.3c-2 ------------------------------------------------------------------------------

def _standardize_np(x, eps, n):
    """正解と、よくある誤りの値（全体の統計量・デバイスごとの統計量・eps なし・各デバイスの分散の平均）。"""
    x = x.astype(np.float64)
    mean = x.mean(axis=0)
    var = ((x - mean) ** 2).mean(axis=0)
    blocks = x.reshape(n, -1, x.shape[1])
    lmean = blocks.mean(axis=1, keepdims=True)
    lvar = ((blocks - lmean) ** 2).mean(axis=1, keepdims=True)
    return {
        "want": ((x - mean) / np.sqrt(var + eps), mean),
        "local": ((blocks - lmean) / np.sqrt(lvar + eps)).reshape(x.shape),
        "no_eps": (x - mean) / np.sqrt(var),
        "mean_of_local_var": (x - mean) / np.sqrt(lvar.mean(axis=0)[0] + eps),
    }


def _standardize_input(rng, n, per, d):
    # デバイス i の行は平均が 3i ずれる（自分の統計量だけだと結果が変わる）。列 2 は分散が小さい（eps が効く）
    x = rng.normal(size=(n, per, d)) * np.array([1.0, 2.0, 0.05])
    x = x + 3.0 * np.arange(n)[:, None, None] * np.array([1.0, -0.5, 0.02])
    return _f32(x.reshape(n * per, d))


@exercise("6.3c-2", "standardize_smap")
def check_standardize_smap(fn):
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    n = _n()
    rng = _rng(2)
    per, d = 5, 3
    mesh = jax.make_mesh((n,), (MESH_AXIS,))
    x = _standardize_input(rng, n, per, d)
    xg = jax.device_put(x, NamedSharding(mesh, P(MESH_AXIS)))
    ref = _standardize_np(x, HIDDEN_EPS, n)
    (want_z, want_mean) = ref["want"]

    with jax.set_mesh(mesh):
        out = call(fn, xg, HIDDEN_EPS)
        z, mean = _pair(out, "standardize_smap(x, eps) は (z, mean) ")
        if getattr(z, "shape", None) == (n, per, d) and n > 1:
            raise Fail(f"z の形が {(n, per, d)} で、pmap のようにデバイスごとに積み重なっています。"
                       "smap の out_axes=0 は各デバイスのブロックを 0 軸目につなげ、形 (N, d) のグローバル配列で返します。")
        expect_shape(z, (n * per, d), "z（1 つ目の戻り値）", "入力 x と同じ形で返します。")
        mshape = getattr(mean, "shape", None)
        if n > 1 and mshape == (n * d,):
            raise Fail(f"mean の形が {(n * d,)} で、各デバイスの平均が out_axes=0 でつなげられています。"
                       "全デバイスで同じ値は out_axes=None で、形 (d,) の 1 つの配列として返します。")
        if n > 1 and mshape == (n, d):
            raise Fail(f"mean の形が {(n, d)} で、デバイスごとに積み重なっています。"
                       "全デバイスで同じ値は out_axes=None で、形 (d,) の 1 つの配列として返します。")
        expect_close(mean, want_mean, "mean（全データの列ごとの平均）",
                     hint="各デバイスの列平均を lax.pmean で全デバイスの平均にします。")
        if n > 1 and _close(z, ref["local"], rtol=1e-3, atol=1e-4):
            raise Fail("z を各デバイスの中だけの平均と分散で標準化しています。分散も lax.pmean で全デバイスの平均にします。")
        if _close(z, ref["no_eps"], rtol=1e-3, atol=1e-4):
            raise Fail("z の分母に eps が入っていません。jnp.sqrt(var + eps) で割ります（採点の eps は小さくありません）。")
        if n > 1 and _close(z, ref["mean_of_local_var"], rtol=1e-3, atol=1e-4):
            raise Fail("分散が、各デバイスの分散（自分の平均からのずれ）の平均になっています。"
                       "全体の平均 mean からのずれの 2 乗を、全デバイスで平均します。")
        expect_close(z, want_z, "z（1 つ目の戻り値）", rtol=1e-3, atol=1e-4,
                     hint="全データの列平均と分散で (x - mean) / sqrt(var + eps) を計算します。")

        z_ok = isinstance(getattr(z, "sharding", None), jax.sharding.Sharding) and \
            z.sharding.is_equivalent_to(NamedSharding(mesh, P(MESH_AXIS)), 2)
        if not z_ok:
            got = getattr(getattr(z, "sharding", None), "spec", type(z).__name__)
            raise Fail(f"z は行を軸 'data' で分割したまま返します（smap の out_axes=0）。返ってきた z のシャーディング: {got}。")
        m_ok = isinstance(getattr(mean, "sharding", None), jax.sharding.Sharding) and \
            mean.sharding.is_equivalent_to(NamedSharding(mesh, P()), 1)
        if not m_ok:
            got = getattr(getattr(mean, "sharding", None), "spec", type(mean).__name__)
            raise Fail(f"mean は全デバイスに複製して返します（smap の out_axes=None）。返ってきた mean のシャーディング: {got}。")

        eqns = _eqns(lambda a: fn(a, HIDDEN_EPS), xg)
    prims = {e.primitive.name for e in eqns}
    if not any(MESH_AXIS in m for m in _shard_maps(eqns)):
        raise Fail("値は合っていますが、jaxpr に軸 'data' の shard_map（jax.smap が作るもの）が見つかりません。"
                   "この演習では pmap の本体を jax.smap（または jax.shard_map）で移します。")
    if "all_gather" in prims:
        raise Fail("jaxpr に all_gather があります。データ全体を集めずに、列ごとの平均と分散だけを lax.pmean で平均しましょう。")
    if not prims & PSUM_NAMES:
        raise Fail("jaxpr にデバイス間の平均（pmean）が見つかりません。lax.pmean で全デバイスの統計量を求めます。")
    return (f"隠し入力（{n} デバイス × {per} 行、eps={HIDDEN_EPS}）で全データの標準化と一致し、"
            "z は行で分割したまま、mean は複製で返っています。")
