"""6.8b-4 ulysses_attention: 並びが (ヘッド, 系列, 次元) の all-to-all 方式。"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ch6 import Status, run_check
from ch6.checking import CANNOT_TELL
from tests.checkhelp import boom, expect, not_done

EX = "6.8b-4"
N = jax.device_count()


def attention_hsd(q, k, v):
    s = jnp.einsum("hqd,hkd->hqk", q, k) / np.sqrt(q.shape[-1])
    return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), v)


def make(fwd=(0, 1), back=(1, 0), tiled=True, send_back=True):
    def ulysses_attention(q, k, v):
        def to_heads(x):
            return lax.all_to_all(x, "seq", split_axis=fwd[0], concat_axis=fwd[1], tiled=tiled)
        out = attention_hsd(to_heads(q), to_heads(k), to_heads(v))
        if not send_back:
            return out
        return lax.all_to_all(out, "seq", split_axis=back[0], concat_axis=back[1], tiled=tiled)
    return ulysses_attention


def stacked(q, k, v):
    qkv = lax.all_to_all(jnp.stack([q, k, v]), "seq", split_axis=1, concat_axis=2, tiled=True)
    return lax.all_to_all(attention_hsd(*qkv), "seq", split_axis=1, concat_axis=0, tiled=True)


def gather_kv(q, k, v):
    kf = lax.all_gather(k, "seq", axis=1, tiled=True)
    vf = lax.all_gather(v, "seq", axis=1, tiled=True)
    return attention_hsd(q, kf, vf)


def test_reference_passes():
    expect(EX, make(), Status.PASS, "all_to_all は 4 回", "2 次元のメッシュ")


def test_stacked_answer_passes():
    expect(EX, stacked, Status.PASS)


def test_lesson_axes_are_named():
    expect(EX, make(fwd=(1, 0), back=(0, 1)), Status.FAIL, "本編の (系列, ヘッド, 次元)")


def test_device_count_instead_of_axis_size_is_named():
    def global_count(q, k, v):      # 1 デバイスのヘッドの数を jax.device_count() から求める（2 次元のメッシュで 0 になる）
        heads_per_device = q.shape[0] // jax.device_count()
        out = make()(q, k, v)
        return out.reshape(heads_per_device * jax.device_count(), -1, q.shape[-1])
    from ch6.checks.s6_8b.common import section_meshes
    seq2 = section_meshes()[1].shape["seq"]
    if N == 1:  # どちらのメッシュも seq 軸は 1 個 = デバイスの数
        expect(EX, global_count, Status.PASS, CANNOT_TELL)
    elif 2 * seq2 % N == 0:  # 2 次元のメッシュのヘッドの数 2·seq がデバイスの数で割り切れると、reshape は何も変えない（正しい値）
        expect(EX, global_count, Status.PASS)
    else:
        expect(EX, global_count, Status.FAIL, "lax.axis_size('seq')")


def test_wrong_back_axes_are_named():
    expect(EX, make(back=(0, 1)), Status.FAIL, "all_to_all")


def test_not_sent_back_is_named():
    if N > 1:
        expect(EX, make(send_back=False), Status.FAIL, "逆向きの all_to_all")
    else:
        expect(EX, make(send_back=False), Status.FAIL, "戻す all_to_all がありません")


def test_reshape_instead_of_sending_back_is_named():
    def reshaped(q, k, v):      # 戻す all_to_all の代わりに reshape（ほかのデバイスの系列は戻らない）
        return make(send_back=False)(q, k, v).reshape(q.shape)
    expect(EX, reshaped, Status.FAIL, "戻す all_to_all がありません", "reshape")


def test_learner_assert_is_not_called_an_axis_name_error():
    def asserts_device_count(q, k, v):      # 学習者自身の assert（空のメッセージ）が 2 次元のメッシュで失敗する
        out = make()(q, k, v)
        assert lax.axis_size("seq") == jax.device_count()
        return out
    if N == 1:  # どちらのメッシュも seq 軸の大きさは 1 = デバイスの数: 見分けられず、✅ の行がそう言う
        expect(EX, asserts_device_count, Status.PASS, CANNOT_TELL)
        return
    expect(EX, asserts_device_count, Status.FAIL, "2 次元のメッシュでだけ AssertionError", "lax.axis_size('seq')")


def test_fresh_slips_from_the_statement():
    # q, k, v を stack したのに、本編と同じ軸の番号 (0, 1) で送る（stack で軸が 1 つずれる）
    def stacked_same_axes(q, k, v):
        qkv = lax.all_to_all(jnp.stack([q, k, v]), "seq", split_axis=0, concat_axis=1, tiled=True)
        out = attention_hsd(*qkv)
        return lax.all_to_all(out, "seq", split_axis=1, concat_axis=0, tiled=True)
    if N == 1:  # 大きさ 1 の軸の all_to_all は何もしないので、軸の番号は値に出ない
        expect(EX, stacked_same_axes, Status.PASS, CANNOT_TELL, "all_to_all の軸")
    else:  # 分割する軸が stack の軸（大きさ 3）になり、値が違うか、attention_hsd に渡す数が変わる
        assert run_check(EX, stacked_same_axes).status in (Status.FAIL, Status.ERROR)

    # 各デバイスのブロックでアテンションを計算してから入れ替え、すぐに戻す（順番が逆）
    def attention_first(q, k, v):
        out = attention_hsd(q, k, v)
        there = lax.all_to_all(out, "seq", split_axis=0, concat_axis=1, tiled=True)
        return lax.all_to_all(there, "seq", split_axis=1, concat_axis=0, tiled=True)
    if N == 1:  # 1 デバイスでは、ブロックが系列全体なので同じ値
        expect(EX, attention_first, Status.PASS, CANNOT_TELL, "順番")
    else:
        expect(EX, attention_first, Status.FAIL, "一致しません")


def test_wrong_axis_name_inside_jax_is_named():
    def wrong_axis(q, k, v):                # JAX は psum の知らない軸の名前に、空の AssertionError を出す
        return make()(q, k, v) + 0 * lax.psum(0.0, "sequence")
    expect(EX, wrong_axis, Status.FAIL, "軸の名前がメッシュにない", "'seq'")


def test_untiled_and_gather_are_named():
    expect(EX, gather_kv, Status.FAIL, "all_gather")
    expect(EX, lambda q, k, v: attention_hsd(q, k, v), Status.FAIL)
    words = ("tiled=True",) if N > 1 else ("tiled=False",)
    expect(EX, make(tiled=False), Status.FAIL, *words)
    expect(EX, lambda q, k, v: "out", Status.FAIL, "配列のはずが、str")


def test_local_attention_only_is_named():
    expect(EX, lambda q, k, v: attention_hsd(q, k, v), Status.FAIL, "all_to_all がありません")


def test_not_done_and_learner_error():
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR, "ZeroDivisionError")


def test_negative_axis_numbers_pass():
    # 軸の番号は負でもよい（問題文は番号の書き方を決めていない）
    def stacked_negative(q, k, v):
        qkv = lax.all_to_all(jnp.stack([q, k, v]), "seq", split_axis=-3, concat_axis=-2, tiled=True)
        return lax.all_to_all(attention_hsd(*qkv), "seq", split_axis=-2, concat_axis=-3, tiled=True)
    expect(EX, stacked_negative, Status.PASS)
    expect(EX, make(fwd=(-3, -2), back=(-2, -3)), Status.PASS, "all_to_all は 4 回")
