"""6.3a-4 attention_scores のチェック。"""
from __future__ import annotations

import numpy as np

from ... import meshes
from ...checking import Fail, LearnerError, call, exercise, expect_close, f32
from ...show import collectives_line
from .common import comm_counts, exercise_rng, norm_spec, show_spec


@exercise("6.3a-4", "attention_scores")
def check_attention_scores(fn):
    import jax
    from jax.sharding import PartitionSpec as P

    d, m = meshes.mesh_2d_shape()
    mesh = meshes.mesh_2d(("data", "model"))
    rng = exercise_rng(4)
    B, Sq, Sk, D = 2 * d, 3, 5, 4 * m  # Sq と Sk を変えて、q と k の取り違えも見える
    q = f32(rng.normal(size=(B, Sq, D)))
    k = f32(rng.normal(size=(B, Sk, D)))
    want = np.einsum("bqd,bkd->bqk", q, k)
    with jax.set_mesh(mesh):
        qs = jax.device_put(q, P("data", None, "model"))
        ks = jax.device_put(k, P("data", None, "model"))
        f = jax.jit(fn)
        try:
            out = call(f, qs, ks)
        except LearnerError as err:
            if type(err.exc).__name__ == "ShardingTypeError" and "ambiguous" in str(err.exc):
                raise Fail("縮約軸 D が 'model' で分割されているので、まだ ShardingTypeError が出ます。"
                           "einsum（または matmul）の out_sharding で出力のシャーディングを指定してください。") from None
            raise
        expect_close(out, want, "attention_scores(q, k) の結果", rtol=1e-4, atol=1e-4)
        spec = norm_spec(jax.typeof(out).sharding.spec)
        if spec != ("data",):
            extra = "（複製で、バッチが分割されていません）" if spec == () else ""
            raise Fail(f"出力の型は P('data', None, None) のはずが、{show_spec(spec, 3)}{extra or ' '}でした。"
                       "out_sharding で出力を P('data', None, None) にします。")
        counts = call(comm_counts, f, qs, ks)
    if counts.get("all-gather") or set(counts) - {"all-reduce"}:
        raise Fail(f"結果は正しいのですが、余分な通信があります（{collectives_line(counts)}）。"
                   "q や k を集め直さず、out_sharding で部分和の all-reduce だけにしてください。")
    if m == 1:
        return ("出力の型は P('data', None, None) です。model 軸の大きさが 1 なので通信が現れず、"
                "q や k を集め直す誤りはこの環境では確かめられません。")
    return f"出力の型は P('data', None, None)、通信は {collectives_line(counts)} だけです。"
