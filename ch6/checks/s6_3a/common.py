"""6.3a の演習チェックで共通に使う部品（spec の正規化と検査、配置の確認、隠し入力、集団通信の数え方）。"""
from __future__ import annotations

import numpy as np

from ... import explain, meshes
from ...checking import Fail, LearnerError, call, hidden_rng
from ..specs import norm_spec, show_spec, spec_parts  # noqa: F401  節のモジュールはここから読む


def exercise_rng(tag: int) -> np.random.Generator:
    return hidden_rng(63_100 + tag)


def mesh_1d_auto():
    """全デバイスを 1 列に並べた 'data' メッシュ（Auto）。"""
    from jax.sharding import AxisType

    return meshes.mesh_1d("data", AxisType.Auto)


def raw_text(x) -> str:
    text = explain.clean(repr(x))
    return text if len(text) <= 60 else text[:59] + "…"


def as_spec(x, what: str, ndim: int, axes: tuple[str, ...]):
    """学習者が返した spec（PartitionSpec、そのつもりのタプル・リスト、None）を確かめて PartitionSpec にする。

    次元の数、メッシュにない軸の名前、同じ軸の 2 度使い、unreduced などを、使う前に不正解として説明する。
    """
    from jax.sharding import PartitionSpec as P

    if x is None:
        return P()
    if isinstance(x, (tuple, list)) and not isinstance(x, P):
        try:
            x = P(*x)
        except Exception:
            raise Fail(f"{what} の要素が P(...) に渡せる値ではないので、PartitionSpec にできません。"
                       "メッシュの軸の名前（文字列）か None を並べます。") from None
    if not isinstance(x, P):
        raise Fail(f"{what} は PartitionSpec のはずが、{type(x).__name__} でした。P('data', None) のように書きます。")
    if getattr(x, "unreduced", None) or getattr(x, "reduced", None):
        raise Fail(f"{what} に unreduced / reduced の指定があります。この演習では各次元の分割だけを書きます。")
    entries = spec_parts(x)
    if len(entries) > ndim:
        raise Fail(f"{what} = {raw_text(x)} は {len(entries)} 次元分ありますが、配列は {ndim} 次元です。")
    names: list[str] = []
    for e in entries:
        group = e if isinstance(e, (tuple, list)) else (e,)
        for name in group:
            if name is None:
                continue
            if not isinstance(name, str):
                raise Fail(f"{what} = {raw_text(x)} の要素は、メッシュの軸の名前（文字列）か None にします。")
            if name not in axes:
                raise Fail(f"{what} = {raw_text(x)} の {name!r} はメッシュにない軸です"
                           f"（使える軸は {' / '.join(repr(a) for a in axes)}）。")
            names.append(name)
    dup = sorted({a for a in names if names.count(a) > 1})
    if dup:
        raise Fail(f"{what} = {raw_text(x)} は軸 {dup[0]!r} を 2 度使っています。"
                   "1 つのメッシュの軸で分割できるのは、配列の 1 つの次元だけです。")
    return x


def as_pair(got, names: tuple[str, ...]):
    """タプルでもリストでも受け取る（どの演習でも同じ規則）。長さが違えば不正解。"""
    if not isinstance(got, (tuple, list)) or len(got) != len(names):
        what = f"長さ {len(got)} の {type(got).__name__}" if isinstance(got, (tuple, list)) else type(got).__name__
        raise Fail(f"戻り値は ({', '.join(names)}) の {len(names)} つ組のはずが、{what} でした。タプルかリストで返してください。")
    return tuple(got)


def placed_spec(arr, what: str, mesh, hint: str) -> tuple:
    """配列が、渡したメッシュの NamedSharding で置かれていることを確かめ、正規化した spec を返す。"""
    import jax
    from jax.sharding import NamedSharding

    if not isinstance(arr, jax.Array):
        raise Fail(f"{what} がデバイス上の JAX 配列ではありません（{type(arr).__name__}）。{hint}")
    sharding = arr.sharding
    if not isinstance(sharding, NamedSharding):
        raise Fail(f"{what} のシャーディングが NamedSharding ではありません（{type(sharding).__name__}）。{hint}")
    if sharding.mesh != mesh:
        mine = "×".join(f"{k}={v}" for k, v in sharding.mesh.shape.items())
        same_shape = dict(sharding.mesh.shape) == dict(mesh.shape)
        why = "（形は同じですが、デバイスの並びが違います）" if same_shape else ""
        raise Fail(f"{what} が、引数の mesh とは別のメッシュ（{mine}）に配置されています{why}。"
                   "メッシュを作らず、渡された mesh を使ってください。")
    return norm_spec(sharding.spec)


def learner_step(what: str, fn, *args):
    """学習者の値を使って JAX を動かす（エラーはチェッカの内部エラーではなく不正解として説明する）。"""
    try:
        return call(fn, *args)
    except LearnerError as err:
        said = explain.explain(err.exc).removeprefix(f"{type(err.exc).__name__}: ")
        if "原文「" in said:  # 日本語にできない JAX のエラー: 英語を見せず、この演習で何を意味するかを言う
            said = "その spec の組み合わせでは、この配列と計算を配置できません。"
        raise Fail(f"{what}、JAX が {type(err.exc).__name__} を出しました。{said}") from None


def comm_counts(f, *args) -> dict:
    from ...hlo import count_collectives

    return count_collectives(f, *args)
