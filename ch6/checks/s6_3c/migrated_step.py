"""6.3c-1 make_migrated_step: 1 次元の pmap の SGD ステップを、2 次元メッシュ ('host', 'local') の
jax.jit(jax.shard_map(...)) に移し、1 度だけ作って返す。バッチは 2 つの軸をまとめて全デバイスに分割
（P(('host', 'local'))）し、平均も 2 つの軸の両方で取る（講義の 1 次元の移行の先の一歩）。"""
from __future__ import annotations

import re

import numpy as np

from ...checking import (
    Fail,
    LearnerError,
    call,
    cannot_tell,
    dict_entry,
    exercise,
    expect_close,
    expect_shape,
    f32,
    is_close,
    n_devices,
)
from ...meshes import mesh_2d_shape
from ..sgd_update import step_with, update_mistake
from .common import exercise_rng, learner_eqns, pair, shard_map_axes

# 6.3c-1 ------------------------------------------------------------------------------

HIDDEN_LR = 0.35  # 6.3c-1 の採点で渡す学習率（ノートブックの LR_LOGISTIC とは違う）
# 採点で渡す損失には L2 正則化が付く（ノートブックの logistic_loss とは違う）。引数 loss_fn を使わず
# ノートブックの損失を直接呼ぶ答えは、この項の分だけ更新がずれるので見分けられる
HIDDEN_L2 = 0.4
AXES = ("host", "local")  # 採点のメッシュの軸（問題文に書いてある）。バッチは P(AXES) で両方の軸をまとめて分割


def _logistic_grads_np(params, x, y, l2=HIDDEN_L2):
    """データ x, y でのロジスティック回帰（L2 つき）の損失と勾配 {'w', 'b'}（NumPy）。"""
    w, b = np.asarray(params["w"], np.float64), float(params["b"])
    z = x @ w + b
    loss = float(np.mean(np.logaddexp(0.0, z) - y * z) + l2 * np.sum(w * w))
    r = 1 / (1 + np.exp(-z)) - y
    return loss, {"w": x.T @ r / len(y) + 2 * l2 * w, "b": r.mean()}


def _logistic_np(params, x, y, lr, scale=1.0, l2=HIDDEN_L2):
    """全データでのロジスティック回帰（L2 つき）の 1 ステップ（NumPy）。scale は勾配の倍率（誤答の見分け用）。"""
    loss, g = _logistic_grads_np(params, x, y, l2)
    return step_with(params, {k: scale * v for k, v in g.items()}, lr), loss


def _run_step(step, placed, what):
    """学習者のステップを呼ぶ。lax.pmax を微分しようとしたエラーには、日本語の理由を付ける。"""
    try:
        return call(step, *placed)
    except LearnerError as err:
        text = str(err.exc)
        if "Differentiation rule for 'pmax'" in text:
            raise Fail(f"{what}の呼び出しで、損失に lax.pmax を含めて微分したので、エラーになりました（pmax は微分できません）。"
                       "全データの平均損失は lax.pmean で求めます。") from None
        if "out_specs which require replication" in text:
            raise Fail(f"{what}の呼び出しで、out_specs=P() で返す値が、型の上でまだデバイスごとに違う値（varying）です。"
                       "lax.pmean(…, ('host', 'local')) で 2 つの軸の両方で平均してください。") from None
        m = re.search(r"in_specs passed to shard_map: (.+?) does not match the specs of the input: (.+?) for arg", text)
        if m:
            raise Fail(f"{what}の呼び出しで、in_specs の {m.group(1)} が x・y のシャーディング {m.group(2)} と合いません。"
                       "x と y は P(('host', 'local')) です（軸の順番も同じ）。") from None
        m = re.search(r"in_specs\[\d+\] is (P\(.*?\)) which has length 2", text)
        if m and "too long" in text:
            raise Fail(f"{what}の呼び出しで、in_specs の {m.group(1)} が 2 次元分の指定になっています。"
                       "配列の 1 つの軸を 2 つのメッシュの軸で分割するときは P(('host', 'local')) と書きます。") from None
        if "must refer to an axis marked as manual" in text or re.search(r"unbound axis name: (?!host|local)", text):
            raise Fail(f"{what}の呼び出しで、メッシュにない軸の名前が使われています。"
                       "この問題のメッシュの軸は 'host' と 'local' です（本編の 'data' はありません）。") from None
        raise


def _one_axis_groups(n: int):
    """片方の軸だけで平均したとき、メッシュの位置 (0, 0) のデバイスが平均するシャードの番号（行優先の並び）。"""
    hosts, local = mesh_2d_shape(n)
    return [("local", list(range(local))), ("host", [i * local for i in range(hosts)])]


def _rows(x, y, shards, per):
    idx = np.concatenate([np.arange(k * per, (k + 1) * per) for k in shards])
    return x[idx], y[idx]


def _step_data(rng, mesh, n, per, d):
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    x = f32(rng.normal(size=(n * per, d)))
    y = f32(rng.uniform(size=(n * per,)) < 0.5)
    p0 = {"w": f32(rng.normal(size=(d,)) * 0.5), "b": np.float32(rng.normal() * 0.2)}
    placed = (jax.device_put(p0, NamedSharding(mesh, P())),
              jax.device_put(x, NamedSharding(mesh, P(AXES))),
              jax.device_put(y, NamedSharding(mesh, P(AXES))))
    return p0, x, y, placed


def _check_step_output(out, p0, x, y, n, d, what):
    new, loss = pair(out, f"{what}は (new_params, loss) ")
    w, b = dict_entry(new, "w", "new_params"), dict_entry(new, "b", "new_params")
    if getattr(w, "shape", None) == (n, d) and n > 1:
        raise Fail(f"'w' の形が ({n}, {d}) で、pmap のようにデバイスごとに積み重なっています。"
                   "全デバイスで同じ結果は out_specs=P() で、形 (d,) の配列として返します。")
    expect_shape(w, (d,), "new_params['w']", "out_specs=P() で複製された 1 つの配列を返します。")
    expect_shape(b, (), "new_params['b']", "out_specs=P() で複製された 1 つの配列を返します。")
    if getattr(loss, "shape", None) != ():
        shape = getattr(loss, "shape", None)
        raise Fail(f"loss はスカラー（形 ()）のはずが、{tuple(shape) if shape is not None else type(loss).__name__} でした。"
                   "lax.pmean で平均し、out_specs=P() で返してください。")
    want, want_loss = _logistic_np(p0, x, y, HIDDEN_LR)
    plain, plain_loss = _logistic_np(p0, x, y, HIDDEN_LR, l2=0.0)
    if is_close(loss, plain_loss) or is_close(w, plain["w"]):
        raise Fail("演習のノートブックの logistic_loss と同じ値なので、チェックが渡した loss_fn が使われていません。"
                   "ステップの本体では引数の loss_fn を呼びます。")
    per = len(y) // n
    for axis, group in _one_axis_groups(n):
        part, part_loss = _logistic_np(p0, *_rows(x, y, group, per), HIDDEN_LR)
        if len(group) not in (1, n) and (is_close(loss, part_loss) or is_close(w, part["w"])):
            raise Fail(f"{what}の平均が '{axis}' の軸の中だけで、全デバイスの平均になっていません。"
                       "lax.pmean(…, ('host', 'local')) で 2 つの軸の両方で平均します。")
    expect_close(loss, want_loss, f"{what}の loss（更新前の全データの平均損失）",
                 )
    if n > 1 and is_close(w, _logistic_np(p0, x, y, HIDDEN_LR, scale=n)[0]["w"]):
        raise Fail(f"P() のパラメータの勾配は shard_map の中の grad が自動で psum を入れるので、その後の pmean では更新が {n} 倍大きすぎます。"
                   "損失を pmean してから grad してください。")
    _, grads = _logistic_grads_np(p0, x, y)
    device_grads = [_logistic_grads_np(p0, x[i * per:(i + 1) * per], y[i * per:(i + 1) * per])[1] for i in range(n)]
    why = update_mistake(p0, {"w": w, "b": b}, grads, HIDDEN_LR, device_grads=device_grads)
    if why:
        raise Fail(f"{what}の呼び出しで、{why}")

    hint = "全データの平均損失の勾配で更新します。"
    expect_close(w, want["w"], f"{what}の new_params['w']", hint=hint)
    expect_close(b, want["b"], f"{what}の new_params['b']", hint=hint)


@exercise("6.3c-1", "make_migrated_step")
def check_migrated_step(fn):
    import jax
    import jax.numpy as jnp

    from ...hlo import count_collectives

    n = n_devices()
    rng = exercise_rng(1)
    d, per = 3, 5
    mesh = jax.make_mesh(mesh_2d_shape(), AXES)
    traces = [0]

    def loss_fn(params, x, y):
        # 採点で渡す損失（2 値交差エントロピー + L2 正則化）。呼ばれた回数＝トレースの回数
        traces[0] += 1
        z = x @ params["w"] + params["b"]
        return jnp.mean(jnp.logaddexp(0.0, z) - y * z) + HIDDEN_L2 * jnp.sum(params["w"] ** 2)

    step = call(fn, mesh, loss_fn, HIDDEN_LR)
    if not callable(step):
        raise Fail(f"make_migrated_step の戻り値はステップ関数のはずが、{type(step).__name__} でした。jit した関数を返してください。")
    p0, x, y, placed = _step_data(rng, mesh, n, per, d)
    _check_step_output(_run_step(step, placed, "1 回目"), p0, x, y, n, d, "1 回目")
    first = traces[0]
    if first == 0:
        raise Fail("1 回目の呼び出しで引数 loss_fn が一度も呼ばれませんでした。ステップの本体では、ノートブックの損失ではなく引数の loss_fn を呼びます。")
    p1, x1, y1, placed1 = _step_data(rng, mesh, n, per, d)  # 同じ形、違う値
    _check_step_output(_run_step(step, placed1, "2 回目"), p1, x1, y1, n, d, "2 回目（同じ形の別の入力）")
    again = traces[0] - first
    if again:
        raise Fail("同じ形の入力でステップが 2 回目もトレースされたので、jit がないか、呼ぶたびに jit を作り直しています。"
                   "jax.jit(jax.shard_map(...)) は make_migrated_step の中で 1 度だけ作ってください。")

    eqns = learner_eqns(step, *placed)
    meshes = shard_map_axes(eqns)
    if not any(set(AXES) <= set(m) for m in meshes):
        raise Fail("jaxpr に、渡したメッシュ（軸 'host' と 'local'）の shard_map がありません。"
                   "この演習では jax.jit(jax.shard_map(..., mesh=mesh, ...)) で移します。")
    colls = call(count_collectives, jax.jit(step), *placed)
    # jaxpr の all_gather も見る: デバイスが 1 個だと、TPU のコンパイラは大きさ 1 の all-gather を消してしまう
    gathers = colls.get("all-gather", 0) or sum(e.primitive.name == "all_gather" for e in eqns)
    if gathers:
        raise Fail(f"ステップに all-gather が {gathers} 個あります。データを集めずに、損失（または勾配）だけを pmean してください。")
    found = "、".join(f"{k} ×{v}" for k, v in colls.items()) or "なし"
    shape = "×".join(str(v) for v in mesh.shape.values())
    # 1 個では集団通信がなく、pmean・psum・平均なしが同じ値になる
    note = cannot_tell("全デバイスでの平均") if n == 1 else f"（集団通信: {found}）"
    return f"メッシュ {shape} でレガシー版と同じ更新になり、2 回目はトレースし直しませんでした{note}。"
