"""6.5 のエラー索引（notebooks/6_5_summary.md の表）の自己点検: 表の各行のエラーを実際に起こし、
例外の型の名前とメッセージの文字列が表のとおりであることを確かめる。

JAX の版が変わってメッセージや型が変われば、ここが失敗する（本編は表を見せるだけで、この点検はしない）。
"""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from jax import lax
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "6_5_summary.md"
n_devices = jax.device_count()
W_e, xs_e = jnp.ones((3, 4)), jnp.ones((6, 4))   # 小さな例のための配列


def explicit_mesh():
    return jax.make_mesh((n_devices,), ("data",))                             # 既定は Explicit


def auto_mesh():
    return jax.make_mesh((n_devices,), ("data",), axis_types=(AxisType.Auto,))


# 表の各行のエラーを起こす小さな関数
def out_axes_none():
    jax.vmap(lambda a: a * 2, out_axes=None)(jnp.ones(3))

def in_axes_not_prefix():
    jax.vmap(lambda p, x: p["W"] @ x, in_axes=({"w": None}, 0))({"W": W_e}, xs_e)   # キー名が違う

def inconsistent_sizes():
    jax.vmap(lambda a, b: a + b)(jnp.ones(3), jnp.ones(4))

def python_if_on_tracer():
    jax.vmap(lambda a: a if a > 0 else -a)(jnp.arange(3.0))


def unbound_axis_name():
    jax.vmap(lambda a: a - lax.pmean(a, "batch"))(jnp.ones(3))            # axis_name を付け忘れた

def pmap_leading_axis():
    jax.pmap(lambda x: x ** 2)(jnp.arange(2 * n_devices))                 # 先頭軸 ≠ デバイス数

def pmap_python_argument():
    def act(x, kind):
        return jnp.maximum(x, 0.0) if kind == "relu" else jnp.tanh(x)
    jax.pmap(act, in_axes=(0, None))(jnp.arange(float(n_devices)), "relu")   # 文字列を配列として渡した


def indivisible_explicit():
    jax.device_put(jnp.ones((2 * n_devices + 1, 4)), NamedSharding(explicit_mesh(), P("data")))

def indivisible_auto():
    # JAX 0.12 はこのエラーの直前に、起きた場所（ファイル名と行）を標準出力にも 1 行書くので、その行は捨てる
    with contextlib.redirect_stdout(io.StringIO()):
        jax.device_put(jnp.ones((2 * n_devices + 1, 4)), NamedSharding(auto_mesh(), P("data")))

def duplicate_mesh_axis():
    jax.device_put(jnp.ones((2 * n_devices, 2 * n_devices)), NamedSharding(explicit_mesh(), P("data", "data")))

def mesh_too_big():
    jax.make_mesh((2 * n_devices,), ("data",))

def change_device_count_too_late():
    jax.config.update("jax_num_cpu_devices", 2 * n_devices)   # JAX はもう動いている

def spec_without_mesh():
    jax.device_put(jnp.ones(8), P("data"))                   # set_mesh の外で PartitionSpec だけを渡した

def ambiguous_contraction():
    with jax.set_mesh(explicit_mesh()):
        a = jax.device_put(jnp.ones((8, 4 * n_devices)), P(None, "data"))
        b = jax.device_put(jnp.ones((4 * n_devices, 8)), P("data", None))
        a @ b                                                 # 縮約する軸が分割されている


def in_specs_do_not_match():
    f = jax.shard_map(lambda x: x * 2, mesh=explicit_mesh(), in_specs=P("data"), out_specs=P("data"))
    f(jnp.ones(4 * n_devices))                       # 入力はまだ分割されていない

def out_specs_not_replicated():
    f = jax.shard_map(lambda x: x.sum(), mesh=auto_mesh(), in_specs=P("data"), out_specs=P())
    f(jnp.ones(4 * n_devices))                       # 各デバイスの部分和はデバイスごとに違う

def out_specs_too_long():
    f = jax.shard_map(lambda x: x.sum(), mesh=auto_mesh(), in_specs=P("data"), out_specs=P("data"))
    f(jnp.ones(4 * n_devices))                       # 1 デバイスの結果はスカラー（0 次元）

def scatter_indivisible():
    f = jax.shard_map(lambda v: lax.psum_scatter(v, "data", scatter_dimension=0, tiled=True),
                      mesh=explicit_mesh(), in_specs=P(), out_specs=P("data"))
    f(jnp.ones(2 * n_devices + 1))                   # 長さがデバイス数で割り切れない

def smap_without_mesh():
    x = jax.device_put(jnp.ones(2 * n_devices), NamedSharding(explicit_mesh(), P("data")))
    jax.smap(lambda b: b * 2, in_axes=0, out_axes=0, axis_name="data")(x)   # with jax.set_mesh の外


def grad_of_vector():
    def per_example_loss(w, X):
        return jax.vmap(lambda x: (x @ w) ** 2)(X)  # 平均を取り忘れた
    jax.grad(per_example_loss)(jnp.ones(4), xs_e)

def sharded_unmapped_param():
    with jax.set_mesh(explicit_mesh()):
        W = jax.device_put(jnp.ones((4 * n_devices, 3)), P("data", None))  # パラメータまで data で分割した
        batch = jax.device_put(jnp.ones((2 * n_devices, 3)), P("data"))
        jax.vmap(lambda w, x: w @ x, in_axes=(None, 0))(W, batch)

def distributed_too_late():
    # すでに計算したあとなので、接続を試みる前に断られる
    jax.distributed.initialize(coordinator_address="127.0.0.1:1", num_processes=1, process_id=0)



# 表の「エラー」の列 → (そのエラーを起こす関数, 再現に必要なデバイス数)
TRIGGERS = {
    'out_axes=None なのに出力がバッチを持つ': (out_axes_none, 1),
    'in_axes が引数の構造と合わない': (in_axes_not_prefix, 1),
    'バッチ軸の長さがそろわない': (inconsistent_sizes, 1),
    'トレース中の値で Python の if': (python_if_on_tracer, 1),
    '軸の名前が見つからない': (unbound_axis_name, 1),
    'pmap の先頭軸がデバイス数と違う': (pmap_leading_axis, 1),
    'Python の値を配列として渡した': (pmap_python_argument, 1),
    '次元がメッシュ軸で割り切れない（Explicit のメッシュ）': (indivisible_explicit, 2),
    '次元がメッシュ軸で割り切れない（Auto のメッシュ）': (indivisible_auto, 2),
    '1 つのメッシュ軸を 2 つの次元に使った': (duplicate_mesh_axis, 1),
    'メッシュがデバイス数より大きい': (mesh_too_big, 1),
    'JAX が動いたあとでデバイス数を変えた': (change_device_count_too_late, 1),
    'メッシュなしで PartitionSpec を使った': (spec_without_mesh, 1),
    '縮約する軸が分割されていて、出力のシャーディングが決まらない': (ambiguous_contraction, 1),
    'in_specs と入力のシャーディングが合わない': (in_specs_do_not_match, 1),
    'デバイスごとに違う値を P() で返した': (out_specs_not_replicated, 1),
    'out_specs が 1 デバイスの結果より長い': (out_specs_too_long, 1),
    'psum_scatter で分割する次元が割り切れない': (scatter_indivisible, 2),
    'smap をメッシュなしで呼んだ': (smap_without_mesh, 1),
    'スカラーでない関数を grad した': (grad_of_vector, 1),
    '分割したパラメータを vmap に共通の引数として渡した': (sharded_unmapped_param, 1),
    'jax.distributed.initialize を呼ぶのが遅すぎる': (distributed_too_late, 1),
}

_ROW = re.compile(r"^\| E(\d\d) \| (.+?) \| `(\w+)`：`(.+?)` \| (.+?) \| (.+?) \| (.+) \|$")


def table_rows() -> list[tuple[str, str, str, str]]:
    """本編の表の行: (番号, エラー, 例外の型の名前, メッセージに含まれる文字列)。"""
    rows = []
    for line in NOTEBOOK.read_text(encoding="utf-8").splitlines():
        m = _ROW.match(line)
        if m:
            rows.append((m.group(1), m.group(2), m.group(3), m.group(4)))
    return rows


ROWS = table_rows()


def test_every_row_of_the_table_has_a_trigger_and_the_other_way_round():
    assert len(ROWS) == len(TRIGGERS) == 22
    assert [name for _, name, _, _ in ROWS] == list(TRIGGERS)
    assert [int(number) for number, *_ in ROWS] == list(range(1, len(ROWS) + 1))


@pytest.mark.parametrize("row", ROWS, ids=[f"E{r[0]}" for r in ROWS])
def test_each_error_of_the_table_is_raised_as_written(row):
    _, name, exc, fragment = row
    trigger, min_devices = TRIGGERS[name]
    jax.devices()  # JAX のバックエンドを先に初期化する（「JAX が動いたあと」の行がそれを前提にする）
    if n_devices < min_devices:
        trigger()  # このデバイス数では起きないはず（起きたら表が間違っている）
        return
    with pytest.raises(Exception) as caught:
        trigger()
    assert type(caught.value).__name__ == exc, f"{name}: 表では {exc} ですが、{type(caught.value).__name__} が起きました"
    assert fragment in str(caught.value), f"{name}: メッセージに「{fragment}」がありません: {str(caught.value)[:200]}"
