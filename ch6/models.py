"""本編・演習・チェックが共有する小さなモデル（6.3a のゲート付き MLP）。

チェックのパッケージ（``ch6.checks``）には参照の答えがあるので、学習者版ではノートブックから読み込めません
（:mod:`ch6.edition`）。演習がそのまま使うモデルはここに置き、答えを含むモジュールの外に出しておきます。
6.3a の演習ノートブックは ``from ch6.checks.s6_3a import gated_mlp`` と書き、完全版ではその名前で、学習者版では
:data:`ch6.edition.REDIRECTS` によってここから、同じ関数を受け取ります。
"""
from __future__ import annotations

__all__ = ["gated_mlp"]


def gated_mlp(params, x):
    """ゲート付き MLP（SwiGLU 型）の順伝播（forward）。

    重みは PyTorch の Linear と同じ (出力の数, 入力の数) の形です: W_gate と W_up は (H, D)、W_down は (O, H) で、
    y = x @ W.T と計算します（6.3a-3 と同じ）。gate と up は同じ隠れ層の軸 H を持ち、要素ごとに掛けてから
    W_down で出力の次元 O に戻します。
    出力のシャーディングは out_sharding で P('data', None)（バッチで分割し、出力の特徴は分割しない）にします。
    """
    import jax  # ch6 を読み込むだけでは JAX を読み込まないよう、関数の中で import します
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    gate = jax.nn.silu(x @ params["W_gate"].T + params["b_gate"])
    up = x @ params["W_up"].T + params["b_up"]
    return jnp.matmul(gate * up, params["W_down"].T, out_sharding=P("data", None)) + params["b_down"]
