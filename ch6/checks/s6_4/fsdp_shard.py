"""6.4-4 fsdp_shard: FSDP 風にパラメータを 'data' 軸で分割する。"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, LearnerError, call, exercise, f32
from ...meshes import mesh_1d, mesh_2d, mesh_2d_shape
from ...recorded import input_devices, recorded
from .common import exercise_rng

# 6.4-4 -------------------------------------------------------------------------------
# FSDP 風にパラメータを分割: 割り切れる軸のうちいちばん長い軸（同じ長さなら前の軸）を 'data' で分割

def _fsdp_tree(rng, k):
    """data 軸の大きさ k から形を決めた隠しの pytree。どの k でも、割り切れる軸のうち
    「最初」「最後」「いちばん長い」が別々の軸になる葉（qkv）、同じ長さの軸が並ぶ葉（square）、
    いちばん長い軸だけが割り切れない葉（proj）、
    1 次元の葉、割り切れない葉、Adam の状態のような整数のスカラーを入れる。"""
    return {
        "embed": f32(rng.normal(size=(3 * k, 5))),
        "attn": {"qkv": f32(rng.normal(size=(2 * k, 5 * k, 3 * k))),
                 "out": f32(rng.normal(size=(k + 1, 3 * k, 2 * k)))},
        "square": f32(rng.normal(size=(4 * k, 4 * k))),
        # いちばん長い軸（2k+1）は割り切れず、短い軸（2k）が割り切れる: 「いちばん長い軸だけを調べる」誤りを見分ける
        "proj": f32(rng.normal(size=(2 * k + 1, 2 * k))),
        "dense": {"W": f32(rng.normal(size=(7, 2 * k))), "b": f32(rng.normal(size=(2 * k,)))},
        "head": {"W": f32(rng.normal(size=(5, 3))), "b": f32(rng.normal(size=(k + 1,)))},
        "count": np.asarray(7, dtype=np.int32),
    }


def _names(mesh) -> str:
    return "・".join(repr(a) for a in mesh.axis_names)


@recorded
def fsdp_axis(shape, k):
    """規則: 長さが k で割り切れる軸のうち、いちばん長い軸（同じ長さなら前の軸）。なければ None。"""
    divisible = [i for i, s in enumerate(shape) if s % k == 0]
    return max(divisible, key=lambda i: (shape[i], -i)) if divisible else None


@recorded
def _first_axis(shape, k):
    return next((i for i, s in enumerate(shape) if s % k == 0), None)


@recorded
def _last_axis(shape, k):
    divisible = [i for i, s in enumerate(shape) if s % k == 0]
    return divisible[-1] if divisible else None


@recorded
def _longest_last_axis(shape, k):
    divisible = [i for i, s in enumerate(shape) if s % k == 0]
    return max(divisible, key=lambda i: (shape[i], i)) if divisible else None


def _entries(spec, ndim):
    """PartitionSpec を、軸ごとのメッシュ軸名のタプルの列にそろえる（末尾の None、1 つだけのタプルを正規化）。"""
    items = list(spec) + [None] * (ndim - len(spec))
    return tuple(() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in items)


@recorded
def _expected(shapes, k, n_mesh):
    """葉の形 shapes それぞれについて、data 軸の大きさ k のメッシュ（デバイス n_mesh 個）での期待: 規則の軸 axis、
    その spec（spec は文字列、entries は :func:`_entries` の形）、名指しする誤りの軸（by_mesh: 全デバイス数 n_mesh で
    割り切れるかを調べたとき、longest_last・first・last: 同じ長さなら後ろの軸、割り切れる最初の軸、最後の軸）。"""
    from jax.sharding import PartitionSpec as P

    out = []
    for shape in shapes:
        axis = fsdp_axis(shape, k)
        spec = P() if axis is None else P(*[None] * axis, "data")
        out.append({"axis": axis, "spec": str(spec), "entries": _entries(spec, len(shape)),
                    "by_mesh": fsdp_axis(shape, n_mesh), "longest_last": _longest_last_axis(shape, k),
                    "first": _first_axis(shape, k), "last": _last_axis(shape, k)})
    return out


def _expected_on(mesh, tree) -> list[dict]:
    """隠しの pytree の葉それぞれの期待（:func:`_expected`。葉は jax.tree.leaves の順）。"""
    import jax

    shapes = [tuple(int(s) for s in np.shape(leaf)) for leaf in jax.tree.leaves(tree)]
    return _expected(shapes, mesh.shape["data"], mesh.devices.size)


def _check_fsdp_on(fn, mesh, tree, label, expected):
    import jax
    from jax.sharding import NamedSharding

    k = mesh.shape["data"]
    n_mesh = mesh.devices.size
    try:
        got = call(fn, tree, mesh)
    except LearnerError as exc:
        if "implies that array axis" not in str(exc.exc):
            raise
        raise Fail(f"{label}: 割り切れない軸を 'data' で分割しようとしてエラーになりました。"
                   f"割り切れるかは mesh.shape['data'] = {k} で調べます。") from None
    if jax.tree.structure(got) != jax.tree.structure(tree):
        raise Fail(f"{label}: 戻り値の pytree の構造が入力と違います。jax.tree.map で葉ごとに配置してください。")
    mesh_devices = set(mesh.devices.flat)
    total_in = total_out = 0
    for (path, leaf), want, exp in zip(jax.tree_util.tree_leaves_with_path(got), jax.tree.leaves(tree), expected):
        name = jax.tree_util.keystr(path)
        if not isinstance(leaf, jax.Array):
            raise Fail(f"{label}: 葉 {name} が {type(leaf).__name__} です。jax.device_put で jax.Array にしてください。")
        if leaf.dtype != want.dtype:
            raise Fail(f"{label}: 葉 {name} の dtype が {want.dtype} から {leaf.dtype} に変わりました。値はそのまま配置してください。")
        if leaf.shape != want.shape or not np.array_equal(np.asarray(leaf), want):
            raise Fail(f"{label}: 葉 {name} の値が変わっています。配置を変えるだけで、値は変えません。")
        sh = leaf.sharding
        if set(sh.device_set) != mesh_devices:
            raise Fail(f"{label}: 葉 {name} はメッシュのデバイス {n_mesh} 個にあるはずが、{len(sh.device_set)} 個でした。"
                       "NamedSharding(mesh, spec) を使ってください。")
        if not isinstance(sh, NamedSharding):
            raise Fail(f"{label}: 葉 {name} が NamedSharding ではなく {type(sh).__name__} で配置されています。"
                       "jax.device_put(a, NamedSharding(mesh, spec)) を使ってください。")
        if tuple(sh.mesh.axis_names) != tuple(mesh.axis_names):
            raise Fail(f"{label}: 葉 {name} が、渡された mesh（軸 {_names(mesh)}）とは別のメッシュ（軸 {_names(sh.mesh)}）に"
                       "配置されています。NamedSharding には引数の mesh を使ってください。")
        if not np.array_equal(sh.mesh.device_ids, mesh.device_ids):
            raise Fail(f"{label}: 葉 {name} が、渡された mesh とはデバイスの並びが違うメッシュに配置されています。"
                       "NamedSharding には引数の mesh を使ってください。")
        shape = want.shape
        axis = exp["axis"]
        total_in += want.nbytes
        total_out += int(np.prod(sh.shard_shape(leaf.shape))) * leaf.dtype.itemsize
        got_entries = _entries(sh.spec, len(shape))
        if got_entries == exp["entries"]:
            continue
        seen = f"（spec は {exp['spec']} のはずが {sh.spec}）"
        others = sorted({a for e in got_entries for a in e} - {"data"})
        if others:
            raise Fail(f"{label}: 葉 {name}（形 {shape}）を {', '.join(others)} 軸でも分割しています{seen}。"
                       "'data' 軸だけで分割し、ほかの軸（model など）は使いません。")
        split = [i for i, e in enumerate(got_entries) if "data" in e]
        if split and n_mesh != k and split[0] == exp["by_mesh"]:
            hint = f"割り切れるかは全デバイス数 {n_mesh} ではなく、mesh.shape['data'] = {k} で調べます。"
        elif not split:
            if axis is None:  # ここには来ない（期待も複製なら spec は一致している）
                hint = ""
            elif exp["by_mesh"] is None and n_mesh != k:
                hint = f"割り切れるかは全デバイス数 {n_mesh} ではなく、mesh.shape['data'] = {k} で調べます。"
            elif len(shape) == 1:
                hint = "1 次元の葉（バイアスなど）も分割の対象です。"
            elif shape[axis] < max(shape):
                longest = int(np.argmax(shape))
                hint = (f"いちばん長い {longest} 軸は {k} で割り切れませんが、{axis} 軸（長さ {shape[axis]}）は割り切れます。")
            else:
                hint = f"{axis} 軸（長さ {shape[axis]}）が {k} で割り切れます。"
            raise Fail(f"{label}: 葉 {name}（形 {shape}）が 'data' 軸で分割されていません{seen}。{hint}")
        else:
            j = split[0]
            if axis is None:
                hint = f"どの軸も {k} で割り切れないので、複製（P()）にします。"
            elif j == exp["longest_last"]:
                hint = "いちばん長い軸が複数あるときは、前の軸を選びます。"
            elif j == exp["first"]:
                hint = "割り切れる最初の軸ではなく、割り切れる軸のうちいちばん長い軸を選びます。"
            elif j == exp["last"]:
                hint = "割り切れる最後の軸ではなく、割り切れる軸のうちいちばん長い軸を選びます。"
            else:
                hint = "割り切れる軸のうちいちばん長い軸（同じ長さなら前の軸）を選びます。"
            want = "複製" if axis is None else f"{axis} 軸の分割"
            raise Fail(f"{label}: 葉 {name}（形 {shape}）は {want}のはずが、{j} 軸が分割されています。{hint}")
        raise Fail(f"{label}: 葉 {name}（形 {shape}）の分割が規則と違います{seen}。{hint}")
    return total_in, total_out


@exercise("6.4-4", "fsdp_shard")
def check_fsdp_shard(fn):
    import jax

    # 隠し入力はデバイス 8 個まで（記録の範囲）。それより多いときは先頭の 8 個でメッシュを作る
    n = input_devices()
    everything = n == jax.device_count()
    rng = exercise_rng(4)
    mesh1 = mesh_1d("data") if everything else jax.make_mesh((n,), ("data",), devices=jax.devices()[:n])
    # 偶数なら (n/2, 2)、奇数なら (n, 1)
    mesh2 = (mesh_2d(("data", "model")) if everything
             else jax.make_mesh(mesh_2d_shape(n), ("data", "model"), devices=jax.devices()[:n]))
    k, n_model = mesh2.shape["data"], mesh2.shape["model"]
    cases = [(mesh1, _fsdp_tree(rng, n), f"1 次元メッシュ（data={n}）"),
             (mesh2, _fsdp_tree(rng, k), f"2 次元メッシュ（data={k}, model={n_model}）")]
    if n % 2 == 1 and n > 1:  # 奇数: 2 次元メッシュの data は全デバイス数と同じなので、一部のデバイスのメッシュも使う
        sub = jax.make_mesh((n - 1,), ("data",), devices=jax.devices()[: n - 1])
        cases.append((sub, _fsdp_tree(rng, n - 1), f"デバイス {n - 1} 個のメッシュ（data={n - 1}）"))
    # 期待はすべて学習者を呼ぶ前に（学習者版では、作るときに記録した値を引く）
    expected = [_expected_on(mesh, tree) for mesh, tree, _ in cases]
    t_in, t_out = _check_fsdp_on(fn, *cases[0], expected[0])
    for case, exp in zip(cases[1:], expected[1:]):
        _check_fsdp_on(fn, *case, exp)
    if n == 1:
        return ("各葉は割り切れる最も長い軸を 'data' だけで分割しています。1 デバイスではどの軸も 1 で割り切れるので、"
                "割り切れるかの調べ方の誤りはこの環境では確かめられません。")
    return (f"デバイス {n} 個で、全体 {t_in:,} バイトが 1 デバイスあたり {t_out:,} バイトになりました。"
            "どのメッシュでも、各葉は割り切れる最も長い軸を 'data' だけで分割しています。")
