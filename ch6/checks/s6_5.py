"""6.5 まとめの小テスト（選択式）のチェック。

学習者は ``def q1(): return "b"`` のように、選択肢の記号を返す関数を書きます。
チェックは記号を受け取り、違っていれば「その選択肢がなぜ違うのか」を 1 行で説明します
（正解そのものは言いません）。問 5・6・8・9 はコードの結果を問う問題で、正解はチェックの
その場で JAX を実際に動かして（いまのデバイス数で）求めます。
"""
from __future__ import annotations

import functools

from .._core import Fail, call, exercise, fmt

CHOICES = ("a", "b", "c", "d")


# ---------------------------------------------------------------- 共通部品

def _choice(fn) -> str:
    """学習者の関数を呼び、選択肢の記号（小文字 1 文字）に直す。おかしな値は Fail。"""
    got = call(fn)
    if isinstance(got, bool) or not isinstance(got, str):
        shown = fmt(got) if not isinstance(got, str) else repr(got)
        raise Fail(f"選択肢の記号を文字列で返してください（例: return \"a\"）。"
                   f"受け取ったのは {type(got).__name__} の {shown[:40]} です。")
    key = got.strip().lower()
    if key not in CHOICES:
        raise Fail(f"選択肢は \"a\"〜\"d\" のどれか 1 つです（受け取ったのは {got[:20]!r}）。"
                   "記号を 1 文字だけ返してください。")
    return key


def _grade(fn, correct: set[str], why: dict[str, str], ok: str) -> str:
    """correct に入っていれば ok を返し、違えば選んだ選択肢の誤りの理由で Fail。"""
    key = _choice(fn)
    if key in correct:
        return ok
    raise Fail(f"「{key}」は違います。{why[key]}")


def _n_devices() -> int:
    import jax

    return jax.device_count()


def _auto_mesh():
    import jax
    from jax.sharding import AxisType

    return jax.make_mesh((_n_devices(),), ("data",), axis_types=(AxisType.Auto,))


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
    """1 台では通信が起きないので、2 台以上での規則で採点する（そう明記する）。"""
    if n == 1:
        return {rule}, "（デバイス 1 台では通信が起きないため実測できず、2 台以上での規則で採点しました）"
    return correct, f"（いまの {n} デバイスでコンパイルして確かめました）"


# 6.5-1 -------------------------------------------------------------------------------

@exercise("6.5-1", "q1")
def check_q1(fn):
    why = {
        "a": "pmap は配列の先頭軸をデバイスに 1 つずつ割り当てます。デバイス 1 台では先頭軸が 1 でないと動かず、"
             "サンプルごとの勾配を作る道具でもありません。",
        "c": "vmap(loss) はサンプルごとの損失のベクトルを返すので、grad は「スカラー出力しか微分できない」"
             "という TypeError になります。平均してから grad すると、今度はバッチ平均の勾配 1 つになります。",
        "d": "shard_map はデータを複数デバイスに分けて各台の関数を動かす道具です。1 台の中でサンプルごとに"
             "微分を分けるのは別の変換の仕事です。",
    }
    return _grade(fn, {"b"}, why, "1 サンプルの損失を grad してから vmap すると、サンプルごとの勾配がバッチ軸付きで得られます。")


# 6.5-2 -------------------------------------------------------------------------------

@exercise("6.5-2", "q2")
def check_q2(fn):
    why = {
        "a": "pmap でも書けますが、いまの JAX では旧式の API です（内部は jit + shard_map で実装）。"
             "先頭軸 = デバイス数という制約もあり、新しいコードには勧められません。",
        "b": "vmap は 1 台の中でバッチ化するだけで、配列を複数デバイスに分けません。",
        "d": "shard_map でも書けますが、各台の関数と集団通信（pmean など）を自分で書くことになります。"
             "問題は「通信はコンパイラに任せたい」場合を聞いています。",
    }
    return _grade(fn, {"c"}, why, "配列に NamedSharding を付けて jit すれば、必要な通信はコンパイラが入れます。")


# 6.5-3 -------------------------------------------------------------------------------

@exercise("6.5-3", "q3")
def check_q3(fn):
    why = {
        "b": "jit + sharding では、どの集団通信をどの順で使うかはコンパイラ（XLA）が決めます。"
             "ppermute のリングを自分の手順で組むことはできません。",
        "c": "vmap の axis_name で使う集団演算は 1 台の中のバッチ軸に対する計算で、デバイス間の通信ではありません。",
        "d": "pmap でも ppermute は使えますが、旧式の API です。新しいコードで各台の手順を書くなら別の道具が勧められています。",
    }
    return _grade(fn, {"a"}, why, "shard_map なら各台の処理と ppermute の順番を自分で書けます。")


# 6.5-4 -------------------------------------------------------------------------------

@exercise("6.5-4", "q4")
def check_q4(fn):
    why = {
        "a": "vmap は 1 台の中のバッチ化で、配列をデバイスにどう分けるかは変えません。割り切れない問題は残ります。",
        "b": "1 つのメッシュ軸は PartitionSpec の中で 1 回しか使えません（別のエラーになります）。",
        "c": "check_vma は shard_map の出力の検査を切り替える引数で、device_put の分割とは関係ありません。",
    }
    return _grade(fn, {"d"}, why, "分割する次元の大きさはメッシュ軸の大きさで割り切れる必要があります。")


# 6.5-5 -------------------------------------------------------------------------------

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
    correct = set(_q5_truth())
    if not correct:  # 選択肢のどれにも当たらない: 問題の前提が崩れている（チェッカー側の問題）
        raise RuntimeError("q5: no choice matches the computed shape")
    return _grade(fn, correct, why, "1 サンプルの出力 (2, 3) の 1 軸目に大きさ 6 のバッチ軸が入ります"
                                    "（jax.eval_shape で確かめました）。")


# 6.5-6 -------------------------------------------------------------------------------

def _q6_shapes(n: int) -> dict[str, tuple]:
    return {"a": (1, 6), "b": (n, 6), "c": (2 * n, 6), "d": (6,)}


@functools.lru_cache(maxsize=None)
def _q6_truth(n: int) -> frozenset:
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    mesh = _auto_mesh()
    x = jax.device_put(jnp.ones((2 * n, 6)), NamedSharding(mesh, P("data", None)))
    f = jax.shard_map(lambda b: b.mean(axis=0, keepdims=True), mesh=mesh,
                      in_specs=P("data", None), out_specs=P("data", None))
    shape = tuple(f(x).shape)
    # デバイス 1 台のときは (1, 6) と (n, 6) が同じ形になるので、どちらも正解
    return frozenset(k for k, s in _q6_shapes(n).items() if s == shape)


@exercise("6.5-6", "q6")
def check_q6(fn):
    n = _n_devices()
    why = {
        "a": "(1, 6) は 1 台の関数が返す形です。out_specs=P('data', None) は各台の結果を data 軸に沿って"
             "つなぎ合わせるので、全体の形はそれより大きくなります。",
        "b": "(n_devices, 6) ではありません。1 台が返す形と、out_specs が何をつなぐかを確かめましょう。",
        "c": "(2*n_devices, 6) は入力 x 全体の形です。各台は平均を取って 1 行にしています。",
        "d": "(6,) にはなりません。shard_map は次元の数を保ちます（keepdims=True で 1 台の結果は 2 次元）。",
    }
    correct = set(_q6_truth(n))
    if not correct:
        raise RuntimeError("q6: no choice matches the computed shape")
    same = "。1 台なので (1, 6) と (n_devices, 6) は同じ形です" if n == 1 else ""
    return _grade(fn, correct, why, f"各台の (1, 6) が out_specs に従って {n} 台分つながり、全体は ({n}, 6) です"
                                    f"（いまのデバイス数で実行して確かめました{same}）。")


# 6.5-7 -------------------------------------------------------------------------------

@exercise("6.5-7", "q7")
def check_q7(fn):
    why = {
        "a": "check_vma=False はエラーを黙らせるだけです。各台の値は違う部分和のままなので、どれか 1 台の部分和が"
             "「全台で同じ値」として返り、結果が間違います。",
        "b": "jit で包んでも shard_map の中の値が台ごとに違うことは変わらず、同じエラーになります。",
        "d": "mean に変えても各台が見ているのは自分のブロックだけで、値は台ごとに違います。エラーも消えません。",
    }
    return _grade(fn, {"c"}, why, "台ごとに違う部分和を全台で足し合わせると、全台で同じ値になり P() で返せます。")


# 6.5-8 -------------------------------------------------------------------------------

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
        "a": "各デバイスが持つのは縮約する軸（x の列、w の行）の一部だけなので、手元の積は部分和です。"
             "全体の積にするには台の間で足し合わせる通信が要ります。",
        "b": "all-reduce ではありません。縮約する軸がどう分割されているかを見直しましょう。",
        "c": "all-gather は分割された配列を全台に集める通信です。ここでは各台が既に同じ形 (8, 16) の部分和を"
             "持っているので、集めるのではなく足し合わせる必要があります。",
        "d": "all-to-all は分割する軸を入れ替える（転置のような）通信で、部分和を足し合わせることはしません。",
    }
    return _grade(fn, correct, why, "縮約する軸が分割されていると各台の積は部分和になり、all-reduce で合計されます" + note + "。")


# 6.5-9 -------------------------------------------------------------------------------

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
        "a": "出力は各台が x の自分の行を持ち、列は全部そろった形 P('data', None) です。ところが w は列で分割されていて、"
             "各台には w の一部の列しかありません。足りない列を手に入れる通信が要ります。",
        "b": "all-reduce は部分和を足し合わせる通信です。ここでは縮約する軸（x の列、w の行）は分割されていないので、"
             "部分和は生まれません。",
        "c": "all-gather ではありません。各台が持っているもの、足りないものを書き出してみましょう。",
        "d": "all-to-all は分割する軸を入れ替える通信です。ここで必要なのは、足りない w の列を全台に配ることです。",
    }
    return _grade(fn, correct, why, "各台は x の自分の行を持ち、列で分割された w を all-gather で集めてから掛けます" + note + "。")
