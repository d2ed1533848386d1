"""6.6-3 global_batch: ローカルなデータにパディングとマスクを付け、make_array_from_process_local_data で
グローバルなバッチ (x, mask) を作る。

約束（問題文）: 行を軸 ``axis`` で分割する（``NamedSharding(mesh, P(axis))``、特徴の軸は分割しない）。
行数は ``mesh.shape[axis]`` の倍数に切り上げ（デバイスの総数ではない）、足した行は 0、mask は実際の行が 1、
パディングの行が 0。mask も同じ軸で分割する。チェックは 1 プロセスで呼ぶので、ローカルなデータ = 全データ。
x と mask は ``jax.make_array_from_process_local_data`` で作る（必須）。1 プロセスでは ``jax.device_put`` でも
同じ配列になるが、複数プロセスでは各プロセスの x がそのプロセスの分だけなので誤り。呼び出しの間だけ 2 つの関数を
数える版に差し替え（``jax`` の属性と、学習者の関数のグローバル変数で同じ関数を指す名前）、返した配列がどちらで
作られたかを見る。
隠しのメッシュはデバイスの並びを入れ替えた 2 次元のメッシュで、軸の名前も隠し。
デバイスが 1 個ではどの軸の大きさも 1 でパディングが要らないので、パディングと mask の誤りは見分けられない
（正解の 1 行がそう言う）。
"""
from __future__ import annotations

import contextlib
import functools

import numpy as np

from ...checking import Fail, LearnerError, call, exercise, f32
from ...meshes import multiple_of
from ..specs import norm_spec, show_spec
from .common import exercise_rng, shuffled_mesh


def cases(rng: np.random.Generator):
    """(メッシュ, 軸の名前, x): 行を分割する軸は 2 本目と 1 本目の両方。割り切れない行数と、割り切れる行数。
    軸の大きさがデバイスの総数より小さければ、総数の倍数 + 1 行の場合も入れる（総数の倍数までのパディングと見分ける）。"""
    names = [("rows", "cols"), ("batch", "tensor"), ("dp", "mp")][int(rng.integers(3))]
    mesh = shuffled_mesh(rng, names)
    total = mesh.devices.size
    out = []
    for axis, extra in ((names[1], 1), (names[0], 1), (names[1], 0), (names[0], 0)):
        size = mesh.shape[axis]
        rows = size * int(rng.integers(2, 5)) + extra * int(rng.integers(1, size + 1))
        if extra and rows % size == 0 and size > 1:
            rows += 1
        if extra and size < total:
            rows = total * int(rng.integers(1, 4)) + 1
        out.append((mesh, axis, f32(rng.normal(size=(rows, int(rng.integers(3, 7)))))))
    return out


def _placed(arr, what: str, mesh, where: str):
    import jax
    from jax.sharding import NamedSharding

    if not isinstance(arr, jax.Array):
        raise Fail(f"{where}: {what} はデバイスに配置された jax.Array のはずが、{type(arr).__name__} でした。"
                   "jax.make_array_from_process_local_data で作ります。")
    sharding = arr.sharding
    if not isinstance(sharding, NamedSharding):
        raise Fail(f"{where}: {what} のシャーディングは NamedSharding のはずが、{type(sharding).__name__} でした。")
    if sharding.mesh != mesh:
        raise Fail(f"{where}: {what} が、引数の mesh とは別のメッシュに配置されています。"
                   "メッシュを作らず、渡された mesh を使います。")
    return norm_spec(sharding.spec)


class _Unpadded(Fail):
    """行数が軸の大きさで割り切れず、JAX が配置できなかった（ほかの場合の形を見てから伝える）。"""


class _Made:
    """学習者の呼び出しの間に、make_array_from_process_local_data と device_put が作った配列（id）。"""

    def __init__(self):
        self.local, self.put, self.depth = [], [], 0


@contextlib.contextmanager
def _watching(fn):
    """jax.make_array_from_process_local_data と jax.device_put を、作った配列を覚える版に差し替える。
    ``from jax import device_put`` のように名前で読み込んだ答えも見えるように、学習者の関数のグローバル変数で
    同じ関数を指す名前も差し替える（どちらも終わったら元に戻す）。make_array の中からの device_put は数えない。"""
    import jax

    made = _Made()
    originals = {"make_array_from_process_local_data": jax.make_array_from_process_local_data,
                 "device_put": jax.device_put}

    def spy(name, real):
        @functools.wraps(real)
        def wrapper(*args, **kwargs):
            made.depth += 1
            try:
                out = real(*args, **kwargs)
            finally:
                made.depth -= 1
            if name == "device_put" and made.depth == 0:
                made.put.extend(id(a) for a in jax.tree.leaves(out))
            elif name != "device_put":
                made.local.extend(id(a) for a in jax.tree.leaves(out))
            return out
        return wrapper

    spies = {name: spy(name, real) for name, real in originals.items()}
    space = getattr(fn, "__globals__", {})
    patched = [(jax, name, real) for name, real in originals.items()]
    patched += [(space, key, value) for key, value in list(space.items())
                for real in originals.values() if value is real]
    for where, key, real in patched:
        name = next(n for n, r in originals.items() if r is real)
        if where is jax:
            setattr(jax, key, spies[name])
        else:
            where[key] = spies[name]
    try:
        yield made
    finally:
        for where, key, real in patched:
            if where is jax:
                setattr(jax, key, real)
            else:
                where[key] = real


def _expect_local_data(made: _Made, gx, gm, where: str) -> None:
    """x と mask が jax.make_array_from_process_local_data で作られたこと（device_put なら、その名前で言う）。"""
    by_put = [what for what, arr in (("x", gx), ("mask", gm)) if id(arr) in made.put]
    if by_put:
        raise Fail(f"{where}: {' と '.join(by_put)} を jax.device_put で作っています。複数プロセスでは、ローカルなデータが"
                   "そのプロセスの分だけなので、jax.make_array_from_process_local_data で作ってください。")
    if not made.local:
        raise Fail(f"{where}: jax.make_array_from_process_local_data が呼ばれていません。"
                   "x と mask は、プロセスのローカルなデータからこの関数で作ります。")


def _placed_pair(fn, mesh, axis, x):
    n_rows = x.shape[0]
    size, other = mesh.shape[axis], _other(mesh, axis)
    rows = multiple_of(size, n_rows)
    where = f"{n_rows} 行を {axis}（大きさ {size}）で分割するとき"
    try:
        with _watching(fn) as made:
            got = call(fn, x.copy(), mesh, axis)
    except LearnerError as err:
        text = str(err.exc)
        if isinstance(err.exc, ValueError) and "evenly divide" in text and "array axis 0" in text:
            raise _Unpadded(f"{where}、行数が軸の大きさで割り切れず JAX が ValueError を出しました。"
                       f"行数を {size} の倍数（{rows} 行）にパディングしてから渡します。") from None
        if isinstance(err.exc, ValueError) and "evenly divide" in text:
            raise Fail(f"{where}、行でない軸も分割しようとして JAX が ValueError を出しました。"
                       "分割するのは行だけで、特徴の軸は分割しません。") from None
        raise
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        shown = f"長さ {len(got)} の {type(got).__name__}" if isinstance(got, (tuple, list)) else type(got).__name__
        raise Fail(f"{where}: 戻り値は (x, mask) の 2 つ組のはずが、{shown} でした。")
    gx, gm = got
    if getattr(gx, "ndim", None) == 1 and getattr(gm, "ndim", None) == 2:
        raise Fail(f"{where}: mask と x の順に返っています。(x, mask) の順に返します。")
    sx = _placed(gx, "x", mesh, where)
    _placed(gm, "mask", mesh, where)
    _expect_local_data(made, gx, gm, where)
    if sx != (axis,):
        said = f"{where}: x の spec は P({axis!r}) のはずが、{show_spec(sx)} でした。"
        if sx == ():
            raise Fail(said + f"すべてのデバイスに複製せず、行を軸 {axis} で分割します。")
        if sx == (other,):
            raise Fail(said + f"行を分割するのは軸 {axis} で、{other} ではありません。")
        raise Fail(said + "行だけを分割し、特徴の軸は分割しません。")
    return gx, gm


def _values(gx, gm, mesh, axis, x):
    n_rows = x.shape[0]
    size = mesh.shape[axis]
    rows = multiple_of(size, n_rows)
    where = f"{n_rows} 行を {axis}（大きさ {size}）で分割するとき"
    values = np.asarray(gx)
    if not np.array_equal(values[:n_rows], x):
        raise Fail(f"{where}: x の最初の {n_rows} 行が、渡したデータと一致しません。実際の行は順番を変えずに先頭に置きます。")
    if not np.all(values[n_rows:] == 0):
        raise Fail(f"{where}: パディングの {rows - n_rows} 行は 0 のはずが、0 でない値がありました。"
                   "np.pad のように 0 の行を足します。")
    if tuple(getattr(gm, "shape", ())) != (rows,):
        raise Fail(f"{where}: mask の形は {(rows,)} のはずが、{tuple(gm.shape)} でした。mask は 1 行に 1 つの値です。")
    sm = norm_spec(gm.sharding.spec)
    if sm != (axis,):
        raise Fail(f"{where}: mask の spec は P({axis!r}) のはずが、{show_spec(sm)} でした。"
                   "mask も x の行と同じように分割します。")
    m = np.asarray(gm)
    if m.dtype != np.bool_ and not np.issubdtype(m.dtype, np.floating):
        raise Fail(f"{where}: mask の dtype は float32（または bool）のはずが、{m.dtype} でした。")
    want = np.arange(rows) < n_rows
    if not np.array_equal(m.astype(np.float32), want.astype(np.float32)):
        if rows > n_rows and np.all(m == 1):
            raise Fail(f"{where}: mask がすべて 1 です。パディングの {rows - n_rows} 行は損失に数えないので 0 にします。")
        raise Fail(f"{where}: mask は最初の {n_rows} 行が 1、残りの {rows - n_rows} 行が 0 のはずが、違いました。")


def _other(mesh, axis) -> str:
    return next(a for a in mesh.axis_names if a != axis)


# 名前を言うパディングの誤り: (パディングした行数の決め方, 説明)。すべての隠しの場合で一致したときだけ、その名前を言う
_ROW_SLIPS = (
    (lambda mesh, axis, n: multiple_of(mesh.devices.size, n),
     lambda mesh, axis: (f"パディングはデバイスの総数 {mesh.devices.size} ではなく、行を分割する軸 {axis} の大きさ "
                         f"{mesh.shape[axis]} の倍数までです。")),
    (lambda mesh, axis, n: multiple_of(mesh.shape[_other(mesh, axis)], n),
     lambda mesh, axis: f"行を分割するのは軸 {axis} なので、パディングも {axis} の大きさ {mesh.shape[axis]} の倍数までです。"),
    (lambda mesh, axis, n: (n // mesh.shape[axis] + 1) * mesh.shape[axis],
     lambda mesh, axis: "行数が軸の大きさで割り切れるときは、パディングは要りません（0 行）。"),
)


@exercise("6.6-3", "global_batch")
def check_global_batch(fn):
    hidden = cases(exercise_rng(3))
    got, unpadded = [], None
    for mesh, axis, x in hidden:
        try:
            got.append(_placed_pair(fn, mesh, axis, x))
        except _Unpadded as err:   # 配置できなかった場合は、ほかの場合の形で誤りの名前を探してから伝える
            got.append(None)
            unpadded = unpadded or err
    rows = [None if g is None else int(g[0].shape[0]) if len(g[0].shape) == 2 and g[0].shape[1] == x.shape[1]
            else -1 for g, (_, _, x) in zip(got, hidden)]
    wants = [multiple_of(mesh.shape[axis], x.shape[0]) for mesh, axis, x in hidden]
    seen = [i for i, r in enumerate(rows) if r is not None]
    if any(rows[i] != wants[i] for i in seen):
        k = next(i for i in seen if rows[i] != wants[i])
        mesh, axis, x = hidden[k]
        said = (f"{x.shape[0]} 行を {axis}（大きさ {mesh.shape[axis]}）で分割するとき: x の形は {(wants[k], x.shape[1])} "
                f"のはずが、{tuple(got[k][0].shape)} でした。")
        for rule, hint in _ROW_SLIPS:
            if all(rows[i] == rule(*hidden[i][:2], hidden[i][2].shape[0]) for i in seen):
                raise Fail(said + hint(mesh, axis))
        raise Fail(said + f"行数を {axis} の大きさ {mesh.shape[axis]} の倍数に切り上げ、特徴の数はそのままにします。")
    if unpadded is not None:
        raise Fail(str(unpadded))
    for (mesh, axis, x), (gx, gm) in zip(hidden, got):
        _values(gx, gm, mesh, axis, x)
    shape = " × ".join(f"{k}={v}" for k, v in hidden[0][0].shape.items())
    one = ("（デバイスが 1 個なので、どの軸の大きさも 1 でパディングが要らず、パディングと mask の誤りはこの環境では"
           "確かめられません）") if hidden[0][0].devices.size == 1 else ""
    return (f"メッシュ {shape} の両方の軸で、{len(hidden)} 通りのバッチの形・分割・値・mask が一致しました。"
            f"make_array_from_process_local_data で作っています{one}。")
