"""6.3a-1 place_tokens のチェック。"""
from __future__ import annotations

from ... import meshes
from ...checking import Fail, call, exercise, expect_close, f32
from ..specs import mesh_in_order
from .common import as_pair, exercise_rng, placed_spec, show_spec


@exercise("6.3a-1", "place_tokens")
def check_place_tokens(fn):
    d, m = meshes.mesh_2d_shape()
    import jax

    # デバイスを逆順に並べたメッシュ: 学習者が自分で作った（既定の並びの）同じ形のメッシュとは等しくならない
    mesh = mesh_in_order((d, m), ("data", "model"), jax.devices()[::-1])  # 複数のチップの TPU でも逆順のまま
    rng = exercise_rng(1)
    # どの軸もメッシュのどちらの軸の長さでも割り切れる（軸を取り違えた spec も JAX のエラーにならず、spec の誤りとして言える）
    B, T, D = 2 * d * m, 3 * d * m, 4 * d * m
    tokens = f32(rng.normal(size=(B, T, D)))
    mask = f32(rng.random(size=(B, T)) < 0.7)
    got = as_pair(call(fn, tokens.copy(), mask.copy(), mesh), ("tokens", "mask"))
    gt, gm = got
    if getattr(gt, "shape", None) == mask.shape and getattr(gm, "shape", None) == tokens.shape:
        raise Fail("mask と tokens の順に返っています。(tokens, mask) の順に返してください。")
    hint = "jax.device_put(tokens, NamedSharding(mesh, P(...))) で、渡された mesh に配置します。"
    st = placed_spec(gt, "tokens", mesh, hint)
    sm = placed_spec(gm, "mask", mesh, hint)
    expect_close(gt, tokens, "tokens ", hint="device_put は値を変えません。")
    expect_close(gm, mask, "mask ", hint="device_put は値を変えません。")
    want = ("data", "model")
    if st != want:
        raise Fail(f"tokens の spec は P('data', 'model', None) のはずが、{show_spec(st, 3)} でした。"
                   "spec の要素は順に 0 軸（B）、1 軸（T）、2 軸（D）に対応します。")
    if sm != want:
        raise Fail(f"mask の spec は P('data', 'model') のはずが、{show_spec(sm, 2)} でした。"
                   "tokens と同じ (B, T) の分割にすると、各デバイスが持つトークンのマスクも同じデバイスに配置されます。")
    # 性質そのもの: どのデバイスでも、持っている mask のブロックが、持っている tokens のブロックと同じ (B, T) の範囲
    where_t = {s.device.id: tuple(s.index[:2]) for s in gt.addressable_shards}
    where_m = {s.device.id: tuple(s.index[:2]) for s in gm.addressable_shards}
    if where_t != where_m:
        raise Fail("tokens と mask で、同じデバイスが持つ (B, T) の範囲が違います。同じ spec で配置してください。")
    per = gt.addressable_shards[0].data.shape
    one = "（デバイスが 1 個なので、メッシュを作り直す誤りはこの環境では確かめられません）" if d * m == 1 else ""
    return f"tokens {tokens.shape} を data={d} × model={m} に {per} ずつ、mask も同じ範囲に配置されています{one}。"
