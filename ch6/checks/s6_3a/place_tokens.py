"""6.3a-1 place_tokens のチェック。"""
from __future__ import annotations

from ... import meshes
from ...checking import Fail, call, exercise, expect_close, f32
from .common import as_pair, exercise_rng, placed_spec, show_spec


@exercise("6.3a-1", "place_tokens")
def check_place_tokens(fn):
    d, m = meshes.mesh_2d_shape()
    import jax

    # デバイスを逆順に並べたメッシュ: 学習者が自分で作った（既定の並びの）同じ形のメッシュとは等しくならない
    mesh = jax.make_mesh((d, m), ("data", "model"), devices=jax.devices()[::-1])
    rng = exercise_rng(1)
    B, T, D = 2 * d, 3 * m, 5  # D はどの軸の長さでも割り切れないとは限らないが、分けてはいけない軸
    tokens = f32(rng.normal(size=(B, T, D)))
    mask = f32(rng.random(size=(B, T)) < 0.7)
    got = as_pair(call(fn, tokens.copy(), mask.copy(), mesh), ("tokens", "mask"))
    gt, gm = got
    if getattr(gt, "shape", None) == mask.shape and getattr(gm, "shape", None) == tokens.shape:
        raise Fail("返す順番が逆です: (tokens, mask) の順に返してください。")
    hint = "jax.device_put(tokens, NamedSharding(mesh, P(...))) のように、渡された mesh に置きます。"
    st = placed_spec(gt, "tokens", mesh, hint)
    sm = placed_spec(gm, "mask", mesh, hint)
    expect_close(gt, tokens, "tokens ", hint="device_put は値を変えません。")
    expect_close(gm, mask, "mask ", hint="device_put は値を変えません。")
    want = ("data", "model")
    if st != want:
        raise Fail(f"tokens の spec が違います: 期待 P('data', 'model', None)、実際 {show_spec(st, 3)}。"
                   "spec の 1 番目が 0 軸（バッチ B）、2 番目が 1 軸（系列 T）、3 番目が 2 軸（特徴 D）に対応します。")
    if sm != want:
        raise Fail(f"mask の spec が違います: 期待 P('data', 'model')、実際 {show_spec(sm, 2)}。"
                   "mask も tokens と同じ (B, T) の分け方にすると、各デバイスが自分のトークンのマスクを手元に持てます。")
    # 性質そのもの: どのデバイスでも、持っている mask のブロックが、持っている tokens のブロックと同じ (B, T) の範囲
    where_t = {s.device.id: tuple(s.index[:2]) for s in gt.addressable_shards}
    where_m = {s.device.id: tuple(s.index[:2]) for s in gm.addressable_shards}
    if where_t != where_m:
        raise Fail("tokens と mask で、同じデバイスが持つ (B, T) の範囲が違います。同じ spec で置いてください。")
    per = gt.addressable_shards[0].data.shape
    return (f"隠し入力 tokens {tokens.shape} を、デバイス {d * m} 個（data={d} × model={m}）に "
            f"{per} ずつ、mask も同じ (B, T) の範囲で配置しました。")
