"""6.5 まとめの小テスト（選択式、10 問）のチェック。

学習者は ``def q1(): return "b"`` のように、選択肢の記号を返す関数を書きます。記号は大文字・小文字、
前後の空白、全角・半角を区別しません（"b"、"B"、" b "、"ｂ" は同じ答え）。

どの問も、正解はチェックのその場で JAX を実際に動かして（いまのデバイス数で）求めます。
選択肢がコードの問（1・3・4・7・10）は、選択肢のコードを 1 つずつ実行し、結果が問の求めるものと一致するかで
判定します。違う選択肢を選んだときは「その選択肢がなぜ違うのか」と「実際に動かすと何が起きたか」を
1 行で説明します（正解の記号は言いません）。デバイスが 1 個だと区別できなくなる選択肢は、すべて正解として扱い、
そう書き添えます。

選択肢のコード（``Q1_OPTIONS`` など）は、解答ノートブックの問題文にそのまま載っています
（tests/test_checks_6_5.py が一致を確かめます）。
"""
from __future__ import annotations

import dataclasses
import functools
import unicodedata
from typing import Callable

from .._core import Fail, call, exercise, fmt

CHOICES = ("a", "b", "c", "d")


# ---------------------------------------------------------------- 共通部品

def _describe(value) -> str:
    """文字列でない値を、1 行の短い説明に（配列の中身や repr は出さない）。"""
    if value is None:
        return "None"
    if isinstance(value, (bool, int, float)):
        return f"{type(value).__name__} の {fmt(value)}"
    shape = getattr(value, "shape", None)
    if shape is not None:
        name = type(value).__name__
        if "Tracer" in name:
            kind = "トレーサ"
        elif type(value).__module__.startswith("numpy"):
            kind = "NumPy の配列"
        elif type(value).__module__.startswith("jax"):
            kind = "JAX の配列"
        else:
            kind = name
        try:
            dims = fmt(tuple(int(d) for d in shape))
        except Exception:  # 形を数にできないもの
            dims = "?"
        dtype = getattr(value, "dtype", None)
        return f"{kind}（形 {dims}{f'、{dtype}' if dtype is not None else ''}）"
    if isinstance(value, (list, tuple, dict, set)):
        return f"{type(value).__name__}（要素 {len(value)} 個）"
    if callable(value):
        return "関数（記号ではなく関数が返っています）"
    if type(value).__name__ == "P" and type(value).__module__.startswith("jax"):
        return "PartitionSpec"
    return type(value).__name__


def _choice(fn) -> str:
    """学習者の関数を呼び、選択肢の記号（小文字 1 文字）に直す。おかしな値は Fail。"""
    got = call(fn)
    if not isinstance(got, str):
        raise Fail(f"選択肢の記号を文字列で返してください（例: return \"a\"）。受け取ったのは {_describe(got)} です。")
    key = unicodedata.normalize("NFKC", got).strip().lower()
    if key not in CHOICES:
        shown = repr(got[:20]) + ("…" if len(got) > 20 else "")
        raise Fail(f"選択肢は \"a\"〜\"d\" のどれか 1 つです（受け取ったのは {shown}）。記号を 1 文字だけ返してください。")
    return key


@dataclasses.dataclass(frozen=True)
class Outcome:
    """選択肢のコードを実際に動かした結果。ok: 問の求めるものと一致した。text: 何が起きたか（短い日本語）。"""

    ok: bool
    text: str


def _run(thunk: Callable[[], object], judge: Callable[[object], Outcome]) -> Outcome:
    """選択肢のコードを実行し、例外なら「〇〇Error になります」、そうでなければ judge で判定する。"""
    try:
        result = thunk()
    except Exception as exc:  # 選択肢のコードが起こすエラー（学習者のコードではない）
        return Outcome(False, f"{type(exc).__name__} になります")
    return judge(result)


def _shapes_text(x) -> str:
    """配列・辞書・タプルの形を 1 行で（{W: (64, 3, 10), b: (64, 3)} など）。"""
    if hasattr(x, "shape"):
        return fmt(tuple(x.shape))
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k}: {_shapes_text(v)}" for k, v in sorted(x.items())) + "}"
    if isinstance(x, (list, tuple)):
        return "(" + ", ".join(_shapes_text(v) for v in x) + ")"
    return type(x).__name__


def _n_devices() -> int:
    import jax

    return jax.device_count()


def _mesh():
    """問題文の mesh と同じ: いまのデバイス全部、軸 data、Explicit（jax.make_mesh の既定）。"""
    import jax

    return jax.make_mesh((_n_devices(),), ("data",))


def _auto_mesh():
    import jax
    from jax.sharding import AxisType

    return jax.make_mesh((_n_devices(),), ("data",), axis_types=(AxisType.Auto,))


def _single_note(correct: set[str], n: int) -> str:
    if n == 1 and len(correct) > 1:
        letters = "・".join(sorted(correct))
        return f"（デバイスが 1 個なので {letters} は区別できず、どれも正解として扱いました）"
    return ""


def _grade(fn, correct: set[str], why: dict[str, str], ok: str,
           outcomes: dict[str, Outcome] | None = None) -> str:
    """correct に入っていれば ok を返し、違えば選んだ選択肢の誤りの理由（と、実際に動かした結果）で Fail。"""
    if not correct:  # どの選択肢も当たらない: 問題の前提が崩れている（チェッカー側の問題）
        raise RuntimeError("no choice matches what JAX computed")
    key = _choice(fn)
    if key in correct:
        return ok + _single_note(correct, _n_devices())
    text = outcomes[key].text if outcomes and key in outcomes else ""
    ran = f"（実際に動かすと、{text}）" if text else ""
    raise Fail(f"「{key}」は違います。{why[key]}{ran}")


def _eval(source: str, namespace: dict):
    return eval(source, dict(namespace))  # noqa: S307  問題文の選択肢（このモジュールの定数）だけを評価する


def _jax_namespace() -> dict:
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import NamedSharding, PartitionSpec as P

    return {"jax": jax, "jnp": jnp, "lax": lax, "P": P, "NamedSharding": NamedSharding, "n_devices": _n_devices()}


# 6.5-1 -------------------------------------------------------------------------------
# 入力 x についての、サンプルごとの勾配

Q1_OPTIONS = {
    "a": "jax.grad(loss, argnums=1)(params, xs, ys)",
    "b": "jax.vmap(jax.grad(loss, argnums=1), in_axes=(None, 0, 0))(params, xs, ys)",
    "c": "jax.grad(jax.vmap(loss, in_axes=(None, 0, 0)), argnums=1)(params, xs, ys)",
    "d": "jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(params, xs, ys)",
}


def q1_loss(params, x, y):
    """問 1 の 1 サンプル用の損失（問題文と同じ）: x (10,), y スカラー -> スカラー。"""
    import jax.numpy as jnp

    return (jnp.tanh(params["W"] @ x + params["b"]).sum() - y) ** 2


@functools.lru_cache(maxsize=None)
def _q1_outcomes() -> dict[str, Outcome]:
    import jax
    import numpy as np

    rng = np.random.default_rng(65_001)
    params = {"W": rng.normal(size=(3, 10)).astype(np.float32), "b": rng.normal(size=3).astype(np.float32)}
    xs = rng.normal(size=(64, 10)).astype(np.float32)
    ys = rng.normal(size=64).astype(np.float32)
    g1 = jax.jit(jax.grad(q1_loss, argnums=1))
    want = np.stack([np.asarray(g1(params, xs[i], ys[i])) for i in range(len(xs))])
    ns = _jax_namespace() | {"loss": q1_loss, "params": params, "xs": xs, "ys": ys}

    def judge(out):
        if not hasattr(out, "shape"):
            return Outcome(False, f"形 {_shapes_text(out)} の勾配が返ります")
        if tuple(out.shape) != want.shape:
            return Outcome(False, f"形 {fmt(tuple(out.shape))} が返ります")
        ok = bool(np.allclose(np.asarray(out), want, rtol=1e-4, atol=1e-5))
        return Outcome(ok, "形 (64, 10) の正しい勾配が返ります" if ok else "値の違う形 (64, 10) の配列が返ります")

    return {k: _run(lambda s=s: _eval(s, ns), judge) for k, s in Q1_OPTIONS.items()}


@exercise("6.5-1", "q1")
def check_q1(fn):
    out = _q1_outcomes()
    why = {
        "b": "argnums と、vmap と grad を重ねる順番を見直しましょう。",
        "a": "loss は 1 サンプル用の関数です。バッチ xs (64, 10) をそのまま渡すと、W (3, 10) との行列積の形が合いません。",
        "c": "vmap(loss) はサンプルごとの損失のベクトル (64,) を返します。grad が微分できるのはスカラーを返す関数だけです。",
        "d": "grad の argnums の既定は 0 なので、微分するのは params です。"
             "得られるのはパラメータについてのサンプルごとの勾配で、x についての勾配ではありません。",
    }
    return _grade(fn, {k for k, o in out.items() if o.ok}, why,
                  "1 サンプルの損失を x について微分し（argnums=1）、その関数を vmap でバッチに広げると、"
                  "形 (64, 10) のサンプルごとの勾配になります。", out)


# 6.5-2 -------------------------------------------------------------------------------
# smap の出力の形（pmap は積み重ね、smap はつなげる）

def _q2_shapes(n: int) -> dict[str, tuple]:
    return {"a": (n, 3), "b": (3 * n,), "c": (3,)}  # "d" は「エラーになる」


@functools.lru_cache(maxsize=None)
def _q2_truth(n: int) -> frozenset:
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    mesh = _mesh()
    x2 = jax.device_put(jnp.ones((4 * n, 3)), NamedSharding(mesh, P("data")))
    try:
        with jax.set_mesh(mesh):
            shape = tuple(jax.smap(lambda b: b.sum(axis=0), in_axes=0, out_axes=0, axis_name="data")(x2).shape)
    except Exception:
        return frozenset({"d"})
    return frozenset(k for k, s in _q2_shapes(n).items() if s == shape)


@exercise("6.5-2", "q2")
def check_q2(fn):
    n = _n_devices()
    why = {
        "a": "(n_devices, 3) は pmap の形です。pmap は各デバイスの結果を新しい先頭軸に積み重ねますが、"
             "smap は out_axes の軸に沿ってつなげます（6.3c の 4 節）。",
        "c": "(3,) は 1 デバイスの関数が返す形です。smap は各デバイスの結果をつなげるので、全体はそれより大きくなります。",
        "d": "エラーにはなりません。smap の関数は次元の数を減らしてもかまいません。"
             "各デバイスの結果 (3,) を、out_axes=0 の軸に沿ってつなげます。",
    }
    return _grade(fn, set(_q2_truth(n)), why,
                  f"各デバイスの (3,) が 0 軸目に沿って {n} 個つながり、全体は ({3 * n},) です"
                  "（pmap なら積み重なって (n_devices, 3)）。")


# 6.5-3 -------------------------------------------------------------------------------
# smap の中の grad: 複製した引数の勾配は自動で psum される

@functools.lru_cache(maxsize=None)
def _q3_outcomes(n: int) -> dict[str, Outcome]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P

    mesh = _mesh()
    w3 = jnp.array([1.0, -2.0])
    x_np = np.arange(4.0 * n, dtype=np.float32).reshape(2 * n, 2)
    x3 = jax.device_put(x_np, NamedSharding(mesh, P("data")))

    def local_loss(w, x):
        return jnp.mean((x @ w) ** 2)

    per_device = np.stack([np.asarray(jax.grad(local_loss)(w3, x_np[2 * i:2 * i + 2])) for i in range(n)])
    try:
        with jax.set_mesh(mesh):
            got = np.asarray(jax.smap(lambda w, x: jax.grad(local_loss)(w, x), in_axes=(None, 0), out_axes=None,
                                      axis_name="data")(w3, x3))
    except Exception as exc:
        return {"d": Outcome(True, f"{type(exc).__name__} になります")}

    def close(want):
        return bool(np.allclose(got, want, rtol=1e-5))

    return {"a": Outcome(close(per_device[0]), ""), "b": Outcome(close(per_device.sum(0)), ""),
            "c": Outcome(close(per_device.mean(0)), ""), "d": Outcome(False, "")}


@exercise("6.5-3", "q3")
def check_q3(fn):
    out = _q3_outcomes(_n_devices())
    why = {
        "a": "w は in_axes=None で渡した、全デバイスで同じ（不変な）値です。不変な値の勾配が、"
             "1 つのデバイスのデータだけで決まることはありません（6.3c の 5 節の落とし穴）。",
        "b": "全デバイスの和ではありません。値にどんな集団通信が入るかを見直しましょう。",
        "c": "平均にはなりません。grad が pmean を入れることはありません。"
             "不変な入力の勾配に JAX が自動で入れる集団通信は何か、6.3c の 5 節で確かめましょう。",
        "d": "エラーにはなりません。jax.typeof で見ると勾配には {V:data} の印がなく、"
             "全デバイスで同じ値だと型からわかるので、out_axes=None で返せます。",
    }
    return _grade(fn, {k for k, o in out.items() if o.ok}, why,
                  "w は複製（不変）の値なので、grad が全デバイスの勾配を自動で psum します。"
                  "pmap の勾配の pmean をそのまま写すと、更新がデバイスの数の倍になります（6.3c の 5 節）。")


# 6.5-4 -------------------------------------------------------------------------------
# どの device_put が通るか（割り切れる次元だけを分けられる、メッシュ軸は 1 回だけ）

Q4_OPTIONS = {
    "a": 'jax.device_put(x4, NamedSharding(mesh, P("data", None)))',
    "b": 'jax.device_put(x4, NamedSharding(mesh, P(None, "data")))',
    "c": 'jax.device_put(x4, NamedSharding(mesh, P("data", "data")))',
}


@functools.lru_cache(maxsize=None)
def _q4_outcomes(n: int) -> dict[str, Outcome]:
    import jax.numpy as jnp

    ns = _jax_namespace() | {"mesh": _mesh(), "x4": jnp.ones((3 * n + 1, 2 * n))}
    out = {k: _run(lambda s=s: _eval(s, ns), lambda r: Outcome(True, "エラーなく置けます"))
           for k, s in Q4_OPTIONS.items()}
    out["d"] = Outcome(not any(o.ok for o in out.values()), "")
    return out


@exercise("6.5-4", "q4")
def check_q4(fn):
    out = _q4_outcomes(_n_devices())
    why = {
        "a": "0 軸目の長さ 3 * n_devices + 1 は、data 軸の大きさ n_devices で割ると 1 余ります"
             "（デバイスが 2 個以上なら必ず）。分ける次元の長さは、軸の大きさで割り切れなければなりません。",
        "b": "それぞれの次元の長さを、data 軸の大きさで割ってみましょう。",
        "c": "1 つのメッシュ軸は、PartitionSpec の中で 1 回しか使えません（2 つの次元を同じ軸で分けることはできません）。",
        "d": "通るものが 1 つあります。それぞれの次元の長さを、data 軸の大きさで割ってみましょう。",
    }
    return _grade(fn, {k for k, o in out.items() if o.ok}, why,
                  "1 軸目の長さ 2 * n_devices は n_devices で割り切れるので、1 軸目を data で分けられます。", out)


# 6.5-5 -------------------------------------------------------------------------------
# vmap の出力の形（in_axes=2, out_axes=1）

Q5_SHAPES = {"a": (6, 2, 3), "b": (2, 6, 3), "c": (2, 3, 6)}  # "d" は「エラーになる」


@functools.lru_cache(maxsize=None)
def _q5_truth() -> frozenset:
    import jax
    import jax.numpy as jnp

    def f(x, w):  # x: (2, 5), w: (5, 3) -> (2, 3)
        return x @ w

    X = jax.ShapeDtypeStruct((2, 5, 6), jnp.float32)
    w = jax.ShapeDtypeStruct((5, 3), jnp.float32)
    try:
        shape = tuple(jax.eval_shape(jax.vmap(f, in_axes=(2, None), out_axes=1), X, w).shape)
    except Exception:
        return frozenset({"d"})
    return frozenset(k for k, s in Q5_SHAPES.items() if s == shape)


@exercise("6.5-5", "q5")
def check_q5(fn):
    why = {
        "a": "(6, 2, 3) はバッチ軸を先頭に置いたとき（out_axes=0、既定）の形です。out_axes が何を指定しているか見直しましょう。",
        "b": "(2, 6, 3) ではありません。1 サンプル分の出力の形と、バッチ軸を差し込む位置をもう一度確かめましょう。",
        "c": "(2, 3, 6) はバッチ軸を最後に置いたとき（out_axes=2 または -1）の形です。",
        "d": "in_axes=2 は X の 2 軸目（大きさ 6）を指し、X は 3 次元なので有効です。エラーにはなりません。",
    }
    return _grade(fn, set(_q5_truth()), why, "1 サンプルの出力 (2, 3) の 1 軸目に大きさ 6 のバッチ軸が入ります。")


# 6.5-6 -------------------------------------------------------------------------------
# shard_map の出力の形（keepdims=True の平均を out_specs でつなぐ）

def _q6_shapes(n: int) -> dict[str, tuple]:
    return {"a": (1, 6), "b": (n, 6), "c": (2 * n, 6), "d": (6,)}


@functools.lru_cache(maxsize=None)
def _q6_truth(n: int) -> frozenset:
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    mesh = _mesh()
    x = jax.device_put(jnp.ones((2 * n, 6)), NamedSharding(mesh, P("data", None)))
    f = jax.shard_map(lambda b: b.mean(axis=0, keepdims=True), mesh=mesh,
                      in_specs=P("data", None), out_specs=P("data", None))
    shape = tuple(f(x).shape)
    return frozenset(k for k, s in _q6_shapes(n).items() if s == shape)


@exercise("6.5-6", "q6")
def check_q6(fn):
    n = _n_devices()
    why = {
        "a": "(1, 6) は 1 デバイスの関数が返す形です。out_specs=P('data', None) は各デバイスの結果を data 軸に沿って"
             "つなぎ合わせるので、全体の形はそれより大きくなります。",
        "b": "(n_devices, 6) ではありません。1 デバイスが返す形と、out_specs が何をつなぐかを確かめましょう。",
        "c": "(2*n_devices, 6) は入力 x6 全体の形です。各デバイスは平均を取って 1 行にしています。",
        "d": "(6,) にはなりません。shard_map は次元の数を保ちます（keepdims=True で 1 デバイスの結果は 2 次元）。",
    }
    return _grade(fn, set(_q6_truth(n)), why,
                  f"各デバイスの (1, 6) が out_specs に従って {n} 個つながり、全体は ({n}, 6) です。")


# 6.5-7 -------------------------------------------------------------------------------
# out_specs=P() のエラーの直し方（Auto のメッシュ）

Q7_OPTIONS = {  # 問題文に載せる変更（表示用）
    "a": "jax.shard_map(..., check_vma=False)",
    "b": "jax.jit(total)",
    "c": 'return lax.psum(x_block.sum(), "data")',
    "d": "x_block.mean()",
}


@functools.lru_cache(maxsize=None)
def _q7_outcomes(n: int) -> dict[str, Outcome]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax
    from jax.sharding import PartitionSpec as P

    mesh = _auto_mesh()
    x = jnp.arange(4.0 * n)
    want = float(np.arange(4.0 * n).sum())

    def total(body, **kw):
        return jax.shard_map(body, mesh=mesh, in_specs=P("data"), out_specs=P(), **kw)

    def local_sum(x_block):
        return x_block.sum()

    runs = {
        "a": lambda: total(local_sum, check_vma=False)(x),
        "b": lambda: jax.jit(total(local_sum))(x),
        "c": lambda: total(lambda x_block: lax.psum(x_block.sum(), "data"))(x),
        "d": lambda: total(lambda x_block: x_block.mean())(x),
    }

    def judge(r):
        got = float(np.asarray(r))
        if abs(got - want) <= 1e-4 * max(1.0, abs(want)):
            return Outcome(True, f"全体の合計 {fmt(want)} が返ります")
        return Outcome(False, f"エラーは出ず、全体の合計 {fmt(want)} ではなく {fmt(got)} が返ります")

    return {k: _run(run, judge) for k, run in runs.items()}


@exercise("6.5-7", "q7")
def check_q7(fn):
    out = _q7_outcomes(_n_devices())
    why = {
        "a": "check_vma=False は検査を止めるだけです。各デバイスの値は違う部分和のままなので、"
             "1 つのデバイスの部分和が「全デバイスで同じ値」として返り、結果が間違います。",
        "c": "各デバイスの値がどうなれば P() で返せるかを見直しましょう。",
        "b": "jit で包んでも、shard_map の中の値がデバイスごとに違うことは変わりません。",
        "d": "mean に変えても、各デバイスが見ているのは自分のブロックだけで、値はデバイスごとに違います。",
    }
    return _grade(fn, {k for k, o in out.items() if o.ok}, why,
                  "デバイスごとに違う部分和を全デバイスで足し合わせると、全デバイスで同じ値になり P() で返せます。", out)


# 6.5-8 -------------------------------------------------------------------------------
# どの集団通信になるか（縮約する軸が分割されている）

_COLLECTIVE_CHOICE = {"none": "a", "all-reduce": "b", "all-gather": "c", "all-to-all": "d"}


def _collective_choices(counts: dict[str, int]) -> set[str]:
    """count_collectives の結果 -> 当てはまる選択肢の集合。"""
    if not counts:
        return {"a"}
    out = {_COLLECTIVE_CHOICE[k] for k in counts if k in _COLLECTIVE_CHOICE}
    if not out:  # 選択肢にない集団通信（reduce-scatter など）: 問題の前提が崩れている
        raise RuntimeError(f"unexpected collectives {counts}")
    return out


def _measured(n: int, correct: set[str], rule: str) -> tuple[set[str], str]:
    """デバイス 1 個では通信が起きないので、2 個以上での規則で採点する（そう明記する）。"""
    if n == 1:
        return {rule}, "（デバイスが 1 個では通信が起きず実測できないため、2 個以上での規則で採点しました）"
    return correct, f"（いまのデバイス {n} 個でコンパイルして確かめました）"


@functools.lru_cache(maxsize=None)
def _q8_truth(n: int) -> frozenset:
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    from ..hlo import count_collectives

    mesh = _auto_mesh()
    x = jax.device_put(jnp.ones((8, 4 * n)), NamedSharding(mesh, P(None, "data")))
    w = jax.device_put(jnp.ones((4 * n, 16)), NamedSharding(mesh, P("data", None)))
    f = jax.jit(lambda x, w: x @ w, out_shardings=NamedSharding(mesh, P()))
    return frozenset(_collective_choices(count_collectives(f, x, w)))


@exercise("6.5-8", "q8")
def check_q8(fn):
    n = _n_devices()
    correct, note = _measured(n, set(_q8_truth(n)), "b")
    why = {
        "a": "各デバイスが持つのは縮約する軸（x8 の列、w8 の行）の一部だけなので、手元の積は部分和です。"
             "全体の積にするには、デバイスの間で足し合わせる通信が要ります。",
        "b": "all-reduce ではありません。縮約する軸がどう分割されているかを見直しましょう。",
        "c": "all-gather は分割された配列を全デバイスに集める通信です。ここでは各デバイスが既に同じ形 (8, 16) の部分和を"
             "持っているので、集めるのではなく足し合わせる必要があります。",
        "d": "all-to-all は分割する軸を入れ替える（転置のような）通信で、部分和を足し合わせることはしません。",
    }
    return _grade(fn, correct, why, "縮約する軸が分割されていると各デバイスの積は部分和になり、all-reduce で合計されます"
                  + note + "。")


# 6.5-9 -------------------------------------------------------------------------------
# どの集団通信になるか（w の列が足りない）

@functools.lru_cache(maxsize=None)
def _q9_truth(n: int) -> frozenset:
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    from ..hlo import count_collectives

    mesh = _auto_mesh()
    x = jax.device_put(jnp.ones((8 * n, 16)), NamedSharding(mesh, P("data", None)))
    w = jax.device_put(jnp.ones((16, 4 * n)), NamedSharding(mesh, P(None, "data")))
    f = jax.jit(lambda x, w: x @ w, out_shardings=NamedSharding(mesh, P("data", None)))
    return frozenset(_collective_choices(count_collectives(f, x, w)))


@exercise("6.5-9", "q9")
def check_q9(fn):
    n = _n_devices()
    correct, note = _measured(n, set(_q9_truth(n)), "c")
    why = {
        "a": "出力は各デバイスが x9 の自分の行を持ち、列は全部そろった形 P('data', None) です。ところが w9 は列で分割されていて、"
             "各デバイスには w9 の一部の列しかありません。足りない列を手に入れる通信が要ります。",
        "b": "all-reduce は部分和を足し合わせる通信です。ここでは縮約する軸（x9 の列、w9 の行）は分割されていないので、"
             "部分和は生まれません。",
        "c": "all-gather ではありません。各デバイスが持っているもの、足りないものを書き出してみましょう。",
        "d": "all-to-all は分割する軸を入れ替える通信です。ここで必要なのは、足りない w9 の列を全デバイスに配ることです。",
    }
    return _grade(fn, correct, why, "各デバイスは x9 の自分の行を持ち、列で分割された w9 を all-gather で集めてから掛けます"
                  + note + "。")


# 6.5-10 ------------------------------------------------------------------------------
# FSDP の勾配: 足し合わせながら自分のシャードだけを受け取る（reduce-scatter）

Q10_OPTIONS = {
    "a": 'lax.pmean(g, "data")',
    "b": 'lax.psum_scatter(g, "data", scatter_dimension=0, tiled=True) / n_devices',
    "c": 'lax.all_gather(g, "data", axis=0, tiled=True)',
    "d": 'lax.psum_scatter(g, "data", scatter_dimension=1, tiled=True) / n_devices',
}


@functools.lru_cache(maxsize=None)
def _q10_outcomes(n: int) -> dict[str, Outcome]:
    import jax
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P

    mesh = _mesh()
    rows = 4 * n                                           # W 全体の行数（1 デバイスのシャードは 4 行）
    rng = np.random.default_rng(65_010)
    per_device = rng.normal(size=(n, rows, 3)).astype(np.float32)   # デバイス i が求めた、W 全体の形の勾配
    want = per_device.mean(axis=0)                          # 全デバイスの平均（W 全体の形）
    stacked = jax.device_put(per_device.reshape(n * rows, 3), NamedSharding(mesh, P("data")))
    ns = _jax_namespace()

    def build(source):
        body = _eval("lambda g: " + source, ns)
        return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("data"), out_specs=P("data", None)))

    def judge(out):
        shape = tuple(out.shape)
        if shape != want.shape:
            return Outcome(False, f"全体の形が W の {fmt(want.shape)} ではなく {fmt(shape)} になります")
        if not np.allclose(np.asarray(out), want, rtol=1e-4, atol=1e-5):
            return Outcome(False, "形は W と同じですが、全デバイスの平均になりません")
        return Outcome(True, "各デバイスが自分のシャードの平均の勾配を受け取ります")

    return {k: _run(lambda s=s: build(s)(stacked), judge) for k, s in Q10_OPTIONS.items()}


@exercise("6.5-10", "q10")
def check_q10(fn):
    out = _q10_outcomes(_n_devices())
    why = {
        "b": "どの軸を分けて持っているか、足し合わせるかどうかを見直しましょう。",
        "a": "pmean は all-reduce で、どのデバイスも平均の「全体」(4 * n_devices, 3) を受け取ります。"
             "勾配の全体を全デバイスが持つのはデータ並列と同じで、FSDP で勾配を分けて持つ意味がなくなります。",
        "c": "all_gather は足し合わせません。各デバイスの勾配を並べて集めるだけなので、平均になりません。",
        "d": "scatter_dimension=1 は W の列（大きさ 3）で分けます。W のシャードは行（0 軸目）で分けているので、"
             "受け取る部分がシャードと合いません。",
    }
    return _grade(fn, {k for k, o in out.items() if o.ok}, why,
                  "psum_scatter（reduce-scatter）は全デバイスの勾配を足しながら、0 軸目の自分のシャードの分だけを配ります。"
                  "デバイスの数で割れば平均です（6.4 の 5.2 節）。", out)
