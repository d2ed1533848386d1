"""隠し入力を CPU に置く道具。6.1-4、6.7-3、6.7-4 のチェックが共有します。

値がバックエンドで変わる計算（FLOP、一時領域、float32 の tanh や和の丸め）を、どのマシンでも CPU で行います。
隠し入力を CPU に置いて渡すと、学習者の関数の計算も CPU で行われます（JAX は置かれたデバイスで計算します）。
こうして判定をどのマシンでもそろえます。学習者版は作るときに CPU で記録した値を引くので、これが前提です
（TPU v5e で、CPU の記録と TPU で計算した 6.1-4 の答えが 3e-4 ずれ、正しい答えが落ちたことがあります）。
"""
from __future__ import annotations


def measuring_device():
    """隠し入力を置くデバイス: CPU（なければ既定のデバイス）。"""
    import jax

    try:
        return jax.devices("cpu")[0]
    except RuntimeError:  # JAX_PLATFORMS で CPU を外したとき
        return jax.devices()[0]


def placed_inputs(inputs):
    """隠し入力 inputs（pytree）を :func:`measuring_device` に置いたもの（学習者に渡す値）。"""
    import jax

    return jax.device_put(inputs, measuring_device())
