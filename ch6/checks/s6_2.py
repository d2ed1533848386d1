"""6.2 pmap の演習チェック。

隠し入力はチェックのときに ``jax.device_count()`` から作ります（1, 2, 4, 8 デバイスのどれでも動く）。
値は NumPy の参照と比べ、さらに「本当にデバイス間の集団演算を使っているか」を jaxpr
（psum / ppermute / shard_map）とコンパイル済み HLO（余計な all-gather がないか）で確かめます。
"""
from __future__ import annotations

import numpy as np

from .._core import Fail, LearnerError, NotDone, _walk, call, exercise, expect_close, expect_shape
from .._core import f32 as _f32, hidden_rng, n_devices as _n

AXIS = "devices"  # 演習 2 の pmap の軸の名前
MESH_AXIS = "data"  # 演習 4 のメッシュの軸の名前
LR = 0.1  # 演習 2 の学習率
LR_LOGISTIC = 0.5  # 演習 4 の学習率


def _rng(tag: int) -> np.random.Generator:
    return hidden_rng(62_000 + tag)




def _close(a, b, rtol=1e-4, atol=1e-5) -> bool:
    try:
        a = np.asarray(a, dtype=np.float64)
    except Exception:
        return False
    b = np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=rtol, atol=atol))


def _eqns(fn, *args):
    """fn(*args) をトレースした jaxpr の式（入れ子も含む）。学習者の例外は LearnerError に。"""
    import jax

    try:
        closed = jax.make_jaxpr(fn)(*args)
    except NotImplementedError as exc:
        raise NotDone() from exc
    except Exception as exc:
        raise LearnerError(exc) from exc
    return list(_walk(closed.jaxpr))


def _prims(fn, *args) -> set[str]:
    return {e.primitive.name for e in _eqns(fn, *args)}


def _get(tree, key, what):
    if not isinstance(tree, dict) or set(tree) != {"w", "b"}:
        got = sorted(tree) if isinstance(tree, dict) else type(tree).__name__
        raise Fail(f"{what}はキー 'w' と 'b' の dict のはずですが、{got} が返りました。"
                   "jax.tree.map で params と同じ形の dict を返しましょう。")
    return tree[key]


# 6.2-1 -------------------------------------------------------------------------------

@exercise("6.2-1", "normalize_across_devices")
def check_normalize(fn):
    n = _n()
    rng = _rng(1)
    ks = [k for k in (5, 3, 4) if k != n][:2]  # 形を変えて 2 回（形の決め打ちを防ぐ）。k != n で転置と区別できる
    for k in ks:
        xs = _f32(rng.uniform(0.5, 2.0, size=(n, k)))
        want = xs / xs.sum()
        got = call(fn, xs)
        if getattr(got, "shape", None) == (k, n) and k != n:
            raise Fail(f"出力の形が {(k, n)} で、期待 {(n, k)} の転置です。デバイスの軸は 0 軸目のまま返します"
                       "（in_axes / out_axes は既定の 0 で十分です）。")
        local = xs / xs.sum(axis=1, keepdims=True)
        if n > 1 and _close(got, local):
            raise Fail("各行（各デバイス）の中だけで合計が 1 になっています。全デバイスの合計で割るには "
                       f"lax.psum(x.sum(), axis_name) を使います（pmap に axis_name を付けましょう）。")
        expect_close(got, want, f"normalize_across_devices(xs) の結果（xs の形 {(n, k)}）",
                     hint="全要素の合計が 1 になるように、全デバイスの合計で割ります。")
    prims = _prims(fn, xs)
    if "psum" not in prims:
        raise Fail("値は合っていますが、jaxpr にデバイス間の psum が見つかりません。"
                   "jax.pmap の中で lax.psum を使って全デバイスの合計を取りましょう。")
    return f"隠し入力 ({n}, {ks[0]}) と ({n}, {ks[1]}) で一致し、pmap の中で psum を使っています。"


# 6.2-2 -------------------------------------------------------------------------------

def mse_loss(params, x, y):
    """演習 2 の損失（ノートブックと同じ定義）。"""
    import jax.numpy as jnp

    return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)


def _mse_step_np(params, x, y, scale=1.0):
    """全データ x (N, d), y (N,) での 1 ステップ。scale は勾配の倍率（誤答の再現用）。"""
    w, b = np.asarray(params["w"], np.float64), float(params["b"])
    r = x @ w + b - y
    gw, gb = 2 * x.T @ r / len(y), 2 * r.mean()
    return {"w": w - LR * scale * gw, "b": b - LR * scale * gb}


def _regression(rng, groups, per, d):
    x = _f32(rng.normal(size=(groups, per, d)))
    w_true = rng.normal(size=(d,))
    y = _f32(x @ w_true + 0.5 + 0.1 * rng.normal(size=(groups, per)))
    return x, y


@exercise("6.2-2", "sgd_step")
def check_sgd_step(fn):
    import jax

    n = _n()
    rng = _rng(2)
    d, per = 4, 6
    params = {"w": _f32(rng.normal(size=(d,)) * 0.3), "b": np.float32(0.2)}
    xs, ys = _regression(rng, n, per, d)
    want = _mse_step_np(params, xs.reshape(-1, d), ys.reshape(-1))
    stepped = jax.pmap(fn, axis_name=AXIS, in_axes=(None, 0, 0))
    got = call(stepped, params, xs, ys)
    gw, gb = _get(got, "w", "sgd_step の戻り値"), _get(got, "b", "sgd_step の戻り値")
    expect_shape(gw, (n, d), "pmap した結果の 'w'", "パラメータ 'w' と同じ形 (d,) を返してください。")
    gw, gb = np.asarray(gw), np.asarray(gb)
    if n > 1 and not (np.allclose(gw, gw[:1], atol=1e-6) and np.allclose(gb, gb[:1], atol=1e-6)):
        raise Fail("デバイスごとに違うパラメータになりました: 勾配を平均していません。"
                   f"grad の後で lax.pmean(grads, '{AXIS}') で全デバイスの平均を取りましょう。")
    if n > 1 and _close(gw[0], _mse_step_np(params, xs.reshape(-1, d), ys.reshape(-1), scale=n)["w"]):
        raise Fail(f"更新が {n} 倍大きすぎます: 勾配を psum で合計しています。平均は lax.pmean です。")
    expect_close(gw[0], want["w"], "更新後の 'w'", hint=f"損失は mse_loss、学習率は {LR} です。")
    expect_close(gb[0], want["b"], "更新後の 'b'", hint=f"損失は mse_loss、学習率は {LR} です。")
    # デバイス数に依らない確認: vmap(axis_name=...) でも同じ集団演算が使える（軸の大きさ 3）
    x3, y3 = _regression(rng, 3, per, d)
    want3 = _mse_step_np(params, x3.reshape(-1, d), y3.reshape(-1))
    got3 = call(jax.vmap(fn, in_axes=(None, 0, 0), axis_name=AXIS), params, x3, y3)
    w3 = np.asarray(_get(got3, "w", "sgd_step の戻り値"))
    if _close(w3[0], _mse_step_np(params, x3.reshape(-1, d), y3.reshape(-1), scale=3)["w"]):
        raise Fail("軸の大きさ 3 で更新が 3 倍大きすぎます: 勾配を psum で合計しています。平均は lax.pmean です。")
    expect_close(w3[0], want3["w"], f"vmap(axis_name='{AXIS}') で 3 グループにしたときの 'w'",
                 hint=f"lax.pmean(grads, '{AXIS}') で平均します。")
    prims = _prims(stepped, params, xs, ys)
    if "psum" not in prims:
        extra = "all_gather で全データを集めるより、" if "all_gather" in prims else ""
        raise Fail(f"jaxpr にデバイス間の平均（psum）が見つかりません。{extra}"
                   f"勾配は lax.pmean(grads, '{AXIS}') で平均しましょう。")
    return f"隠し入力（{n} デバイス × {per} 件）で 1 台の SGD と一致し、勾配を pmean で平均しています。"


# 6.2-3 -------------------------------------------------------------------------------

@exercise("6.2-3", "ring_shift")
def check_ring_shift(fn):
    n = _n()
    rng = _rng(3)
    xs = _f32(rng.normal(size=(n, 3)))
    shifts = [1, -1] + ([2] if n > 2 else [])
    for shift in shifts:
        want = np.roll(xs, shift, axis=0)
        got = call(fn, xs, shift)
        expect_shape(got, xs.shape, f"ring_shift(xs, {shift}) の結果")
        if _close(got, want):
            continue
        order = ", ".join(f"{(i - shift) % n}→{i}" for i in range(min(n, 4))) + ("…" if n > 4 else "")
        if shift != 1 and n > 2 and _close(got, np.roll(xs, 1, axis=0)):
            raise Fail(f"shift={shift} でも shift=1 と同じ結果です。引数 shift を使って perm を作りましょう"
                       f"（期待する並び 送信元→受信先: {order}）。")
        if n > 2 and _close(got, np.roll(xs, -shift, axis=0)):
            raise Fail(f"shift={shift} で回る向きが逆です。デバイス i の値はデバイス (i + shift) % n へ送ります"
                       f"（期待する並び 送信元→受信先: {order}）。perm の組は (送信元, 送信先) です。")
        if n > 1 and _close(got, xs):
            raise Fail(f"shift={shift} で値が動いていません（期待する並び 送信元→受信先: {order}）。"
                       "lax.ppermute(x, axis_name, perm) で送り先を指定しましょう。")
        expect_close(got, want, f"ring_shift(xs, {shift}) の結果",
                     hint=f"{n} デバイスの環で、期待する並び 送信元→受信先 は {order} です。")
    prims = _prims(lambda a: fn(a, 1), xs)
    if "ppermute" not in prims:
        how = "all_gather で全部集めてから選ぶと通信が n 倍です。" if "all_gather" in prims else \
            "jnp.roll は 1 台の上での並べ替えで、デバイス間の送受信ではありません。"
        raise Fail(f"値は合っていますが、jaxpr に ppermute が見つかりません。{how}"
                   "pmap の中で lax.ppermute を使いましょう。")
    return f"{n} デバイスの環で shift={shifts} がすべて一致し、ppermute で送っています。"


# 6.2-4 -------------------------------------------------------------------------------

def logistic_loss(params, x, y):
    """演習 4 の損失（ノートブックと同じ定義）: ロジットから計算する 2 値交差エントロピー。"""
    import jax.numpy as jnp

    z = x @ params["w"] + params["b"]
    return jnp.mean(jnp.logaddexp(0.0, z) - y * z)


def _logistic_np(params, x, y, scale=1.0):
    w, b = np.asarray(params["w"], np.float64), float(params["b"])
    z = x @ w + b
    loss = float(np.mean(np.logaddexp(0.0, z) - y * z))
    r = 1 / (1 + np.exp(-z)) - y
    gw, gb = x.T @ r / len(y), r.mean()
    return {"w": w - LR_LOGISTIC * scale * gw, "b": b - LR_LOGISTIC * scale * gb}, loss


def _shard_map_meshes(eqns):
    return [tuple(e.params["mesh"].axis_names) for e in eqns if e.primitive.name == "shard_map"]


@exercise("6.2-4", "migrated_step")
def check_migrated_step(fn):
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    from ..hlo import count_collectives

    n = _n()
    rng = _rng(4)
    d, per = 3, 5
    mesh = jax.make_mesh((n,), (MESH_AXIS,))
    x = _f32(rng.normal(size=(n * per, d)))
    y = _f32(rng.uniform(size=(n * per,)) < 0.5)
    p0 = {"w": _f32(rng.normal(size=(d,)) * 0.5), "b": np.float32(-0.1)}
    params = jax.device_put(p0, NamedSharding(mesh, P()))
    xg = jax.device_put(x, NamedSharding(mesh, P(MESH_AXIS)))
    yg = jax.device_put(y, NamedSharding(mesh, P(MESH_AXIS)))
    want, want_loss = _logistic_np(p0, x, y)

    out = call(fn, mesh, params, xg, yg)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise Fail(f"(new_params, loss) の 2 つ組を返してください（受け取ったのは {type(out).__name__}）。")
    new, loss = out
    w, b = _get(new, "w", "new_params"), _get(new, "b", "new_params")
    if getattr(w, "shape", None) == (n, d) and n > 1:
        raise Fail(f"'w' の形が ({n}, {d}) で、pmap 流にデバイスごとに積み重なっています。"
                   "複製された結果は out_specs=P() で、形 (d,) の 1 つのグローバル配列として返します。")
    expect_shape(w, (d,), "new_params['w']", "out_specs=P() で複製された 1 つの配列を返します。")
    expect_shape(b, (), "new_params['b']", "out_specs=P() で複製された 1 つの配列を返します。")
    if getattr(loss, "shape", None) not in ((), None):
        raise Fail(f"loss の形が {tuple(loss.shape)} です。全デバイスで平均した損失をスカラー（形 ()）で返します"
                   "（lax.pmean と out_specs=P()）。")
    expect_close(loss, want_loss, "loss（更新前の全データの平均損失）",
                 hint="各デバイスの損失を lax.pmean で平均します。")
    if n > 1 and _close(w, _logistic_np(p0, x, y, scale=n)[0]["w"]):
        raise Fail(f"更新が {n} 倍大きすぎます。check_vma=True の shard_map では、P() のパラメータの勾配は"
                   "自動で全デバイス分 psum されるので、その後の pmean では平均になりません。"
                   "損失を pmean してから grad しましょう。")
    expect_close(w, want["w"], "new_params['w']", hint="レガシー版と同じ更新になるはずです。")
    expect_close(b, want["b"], "new_params['b']", hint="レガシー版と同じ更新になるはずです。")

    meshes = _shard_map_meshes(_eqns(lambda p, a, c: fn(mesh, p, a, c), params, xg, yg))
    if not any(MESH_AXIS in m for m in meshes):
        raise Fail("jaxpr に、渡したメッシュ（軸 'data'）の shard_map が見つかりません。この演習では "
                   "jax.jit(jax.shard_map(..., mesh=mesh, ...)) で移行します（jax.pmap や jit だけではなく）。")
    colls = call(count_collectives, jax.jit(lambda p, a, c: fn(mesh, p, a, c)), params, xg, yg)
    if colls.get("all-gather", 0):
        raise Fail(f"コンパイル結果に all-gather が {colls['all-gather']} 個あります。データを集めずに、"
                   "各デバイスの勾配と損失だけを pmean で平均しましょう。")
    found = "、".join(f"{k} ×{v}" for k, v in colls.items()) or "なし"
    return f"隠し入力（{n} デバイス × {per} 件）でレガシー版と同じ更新になりました（集団通信: {found}）。"
