"""6.7-1 estimate_step: コンパイル済みのプログラムから、計算の秒と通信の秒を見積もる。"""
from __future__ import annotations

from ...checking import Fail, call, exercise, f32, n_devices
from ...hlo import collective_ops
from ...meshes import mesh_1d
from .common import close, hidden_chip, number, pair, rng


def _programs(r):
    """隠しのプログラム: (説明, コンパイル済み)。デバイスの数からメッシュを作る。"""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import PartitionSpec as P

    n = n_devices()
    mesh = mesh_1d("data")
    d = 24
    w = f32(r.normal(size=(d, d)))
    x = f32(r.normal(size=(4 * n, d)))

    def dp_step(w, x):
        g = jax.grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)
        return w - 0.1 * g

    def ring_and_gather(x):
        nxt = lax.ppermute(x, "data", [(i, (i + 1) % n) for i in range(n)])  # 隣へ送る
        return lax.all_gather(nxt * 2.0, "data", tiled=True)

    out = []
    with jax.set_mesh(mesh):
        wr, xs = jax.device_put(w, P()), jax.device_put(x, P("data"))
        out.append(("データ並列のステップ", jax.jit(dp_step).lower(wr, xs).compile()))
        sm = jax.jit(jax.shard_map(ring_and_gather, in_specs=P("data"), out_specs=P("data")))
        out.append(("ppermute と all_gather の shard_map", sm.lower(xs).compile()))
    single = jax.jit(lambda a, b: jnp.tanh(a @ b)).lower(x[:5], w).compile()
    out.append(("1 デバイスの行列積", single))
    return out


def _diagnose(got_c, got_m, flops, traffic, result_bytes, allreduce, hw, scale, label):
    n = n_devices()
    want_c, want_m = flops / hw.flops, scale * traffic / hw.link_bw
    if close(got_c, want_m) and close(got_m, want_c) and not close(want_c, want_m):
        raise Fail(f"{label}: 返り値の順番が逆です（期待 (計算の秒, 通信の秒)）。")
    if not close(got_c, want_c):
        if n > 1 and close(got_c, n * want_c):
            raise Fail(f"{label}: 計算の秒が {n} 倍です。cost_analysis() の flops はもう 1 デバイス分なので、デバイスの数を掛けません。")
        if close(got_c, flops / hw.hbm_bw):
            raise Fail(f"{label}: 計算の秒を hw.hbm_bw で割っています。FLOP は hw.flops（最大性能）で割ります。")
        raise Fail(f"{label}: 計算の秒が違います: 期待 {want_c:.4g}、実際 {got_c:.4g}。"
                   "compiled.cost_analysis()['flops'] ÷ hw.flops です。")
    if close(got_m, want_m):
        return
    if traffic > 0:
        if close(got_m, scale * result_bytes / hw.link_bw) and not close(result_bytes, traffic):
            raise Fail(f"{label}: 通信の秒を op.bytes（結果の大きさ）から求めています。1 デバイスが送るバイトは op.traffic です。")
        if close(got_m, scale * traffic / hw.hbm_bw):
            raise Fail(f"{label}: 通信の秒を hw.hbm_bw で割っています。集団通信はチップ間の帯域 hw.link_bw で割ります。")
        if scale != 1.0 and close(got_m, traffic / hw.link_bw):
            raise Fail(f"{label}: bytes_scale={scale} が掛かっていません。通信の秒 = bytes_scale × traffic の和 ÷ hw.link_bw です。")
        if close(got_m, scale * allreduce / hw.link_bw):
            raise Fail(f"{label}: all-reduce だけを数えています。all-gather や collective-permute など、すべての集団通信の traffic を足します。")
    raise Fail(f"{label}: 通信の秒が違います: 期待 {want_m:.4g}、実際 {got_m:.4g}。"
               "ch6.hlo.collective_ops(compiled.as_text()) のすべての op.traffic を足し、bytes_scale を掛けて hw.link_bw で割ります。")


@exercise("6.7-1", "estimate_step")
def check_estimate_step(fn):
    r = rng(1)
    programs = _programs(r)
    chips = [hidden_chip(r, "隠しチップ A"), hidden_chip(r, "隠しチップ B")]
    kinds = set()
    for (label, compiled), hw, scale in zip(programs * 2, chips * 3, (0.5, 1.0, 0.25, 0.5, 1.0, 0.5)):
        ops = collective_ops(compiled.as_text())
        kinds |= {op.kind for op in ops if op.traffic > 0}
        flops = float(compiled.cost_analysis()["flops"])
        traffic = sum(op.traffic for op in ops)
        result_bytes = sum(op.bytes for op in ops)
        allreduce = sum(op.traffic for op in ops if op.kind == "all-reduce")
        out = call(fn, compiled, hw, scale) if scale != 1.0 else call(fn, compiled, hw)
        got_c, got_m = pair(out, "estimate_step", "（計算の秒, 通信の秒）")
        got_c, got_m = number(got_c, f"{label}の計算の秒"), number(got_m, f"{label}の通信の秒")
        _diagnose(got_c, got_m, flops, traffic, result_bytes, allreduce, hw, scale, f"{label}（{hw.name}）")
    seen = "、".join(sorted(kinds)) if kinds else "なし（1 デバイス）"
    return (f"隠しのプログラム 3 つ × 隠しのチップの行 2 つで、計算と通信の秒が一致しました"
            f"（送るバイトのあった集団通信: {seen}）。")
