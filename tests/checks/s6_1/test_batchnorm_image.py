"""6.1-6 batchnorm_image のチェック（ch6/checks/s6_1/batchnorm_image.py）のテスト。"""
import jax.numpy as jnp
import pytest
from jax import lax

from tests.checkhelp import expect, not_done


# 6.1-6 --------------------------------------------------------------------------------
def bn(x, eps=1e-5):
    mean = lax.pmean(jnp.mean(x, axis=(0, 1)), "batch")
    var = lax.pmean(jnp.mean((x - mean) ** 2, axis=(0, 1)), "batch")
    return (x - mean) / jnp.sqrt(var + eps)


def bn_psum(x, eps=1e-5):
    n = lax.psum(1, "batch") * x.shape[0] * x.shape[1]
    s = lax.psum(jnp.sum(x, axis=(0, 1)), "batch")
    ss = lax.psum(jnp.sum(x * x, axis=(0, 1)), "batch")
    mean = s / n
    return (x - mean) * lax.rsqrt(ss / n - mean * mean + eps)


def bn_reshape(x, eps=1e-5):
    flat = x.reshape(-1, x.shape[-1])
    mean = lax.pmean(flat.mean(0), "batch")
    var = lax.pmean(((flat - mean) ** 2).mean(0), "batch")
    return ((flat - mean) / jnp.sqrt(var + eps)).reshape(x.shape)


@pytest.mark.parametrize("fn", [bn, bn_psum, bn_reshape])
def test_6_1_6_correct(fn):
    expect("6.1-6", fn, "pass", "集団通信")


def test_6_1_6_dropping_eps_is_caught():
    """回帰（ミューテーションの生き残り）: 分散が ~4 の入力では eps を消しても差が ~1e-6 で通っていた。
    隠し入力に分散 ~1e-6 のチャネルを入れ、eps を引数で大きくしても呼ぶ。"""
    def no_eps(x, eps=1e-5):
        mean = lax.pmean(jnp.mean(x, axis=(0, 1)), "batch")
        var = lax.pmean(jnp.mean((x - mean) ** 2, axis=(0, 1)), "batch")
        return (x - mean) / jnp.sqrt(var)

    expect("6.1-6", no_eps, "fail", "eps")

    def fixed_eps(x, eps=1e-5):  # 引数の eps を使わない
        return bn(x, 1e-5)

    expect("6.1-6", fixed_eps, "fail", "eps=0.5")


def test_6_1_6_all_gather_then_mean_is_caught():
    """回帰（ミューテーションの生き残り）: 平均だけを all_gather + jnp.mean にしても値は同じで、分散の pmean が
    残るので「集団通信あり」で通っていた。"""
    def gathered_mean(x, eps=1e-5):
        mean = jnp.mean(lax.all_gather(jnp.mean(x, axis=(0, 1)), "batch"), axis=0)
        var = lax.pmean(jnp.mean((x - mean) ** 2, axis=(0, 1)), "batch")
        return (x - mean) / jnp.sqrt(var + eps)

    expect("6.1-6", gathered_mean, "fail", "all_gather", "lax.pmean(…, 'batch') 1 回")


def test_6_1_6_wrong():
    def per_image(x, eps=1e-5):  # 1 枚の中だけの統計（インスタンス正規化）
        return (x - x.mean((0, 1))) / jnp.sqrt(x.var((0, 1)) + eps)

    def per_pixel(x, eps=1e-5):  # 画素ごとのバッチ統計
        mean = lax.pmean(x, "batch")
        return (x - mean) / jnp.sqrt(lax.pmean((x - mean) ** 2, "batch") + eps)

    expect("6.1-6", per_image, "fail", "画像 1 枚ごと")
    expect("6.1-6", per_pixel, "fail", "画素ごと")
    expect("6.1-6", lambda x, eps=1e-5: x - lax.pmean(jnp.mean(x, (0, 1)), "batch"), "fail", "値が違います")
    expect("6.1-6", lambda x, eps=1e-5: lax.pmean(x, "i"), "error", "NameError", "軸の名前 i")
    expect("6.1-6", not_done, "not_done")
