#!/usr/bin/env python3
"""チェックのミューテーションテスト: 解答例を少しずつ壊した「変異体」を作り、チェックが見抜くかを数える。

solutions/ の各ノートブックのコードセルを 1 つの名前空間で上から実行し（``ch6.check`` は何もしない）、
``### BEGIN SOLUTION`` の入ったセルごとに、解答ブロックの中（と、解答を持つ関数の引数の既定値）を
変異の演算子（``OPERATORS``）で 1 か所ずつ変えます。演算子の一覧は ``python tools/mutate.py --operators``。
演算子は 2 種類です。

- 値を壊す演算子: 軸、集団通信の取り違え、範囲と添字の off-by-one、切り詰めの境目、spec、向き、答えの記号、
  返す真偽、絶対値の書き忘れ、1 回で抜けるループ、小さな上限で打ち切る探索 …
- 値を保ったまま、演習が教える「手段」だけを変える演算子: 集団通信を別の通信で作る（psum → all_gather + 和、
  psum_scatter → psum + 切り出し、ppermute → all_gather + 添字 …）、vmap / scan を Python のループや lax.map に、
  jit を呼ぶたびに作り直す・引数を静的にする。手段を確かめないチェックは、これらを見逃します。

変異体をセルごと実行して、登録されたチェック（``ch6.run_check``）に渡します。✅ 以外なら「見抜いた」。
見抜けなくても正しい変異体（等価変異体）は ``tools/mutants_equivalent.txt`` に理由つきで書きます。
スコア = 見抜いた数 / (全体 − 等価)。表は演習ごとに「見抜いた数 / 数えた変異体の数」を示します。
変異体が MIN_MUTANTS（5）より少ない演習は、演算子を足すか、同じファイルに「演習 | (few mutants) | 理由」と書きます。

    python tools/mutate.py                  # すべての解答ノートブック（表とスコアを表示）
    python tools/mutate.py solutions/6_1_vmap.ipynb --min-score 0.95
    python tools/mutate.py --operators      # 演算子の一覧（名前、節の種類、説明）
    python tools/mutate.py solutions/6_3b_shard_map.ipynb --exercise 6.3b-2 --verbose   # 1 つの演習の変異体だけ
    python tools/mutate.py solutions/6_3b_shard_map.ipynb --fewer   # 8 で見抜いた変異体を 3 と 1 デバイスでも試す
    python tools/mutate.py solutions/6_2_pmap.ipynb --devices 3     # 3 デバイスで（JAX を読み込む前に設定）

8 デバイスで見抜いた変異体が少ないデバイスで生き残ってよいのは、そのときの ✅ の行が ``ch6.checking.cannot_tell``
の句（``CANNOT_TELL``）で確かめられないと断るときか、等価の表に「演習 @数」で書いたときだけです。

演算子を足すには、「変異の演算子」の節に ``@operator(節の型)`` をつけた関数を 1 つ書きます（CONTRIBUTING.md）。
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import dataclasses
import functools
import inspect
import io
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT_FILE = ROOT / "tools" / "mutants_equivalent.txt"
SWAP_TO = {"psum": ("pmean", "pmax"), "pmean": ("psum", "pmax"), "pmax": ("psum", "pmean"),
           "psum_scatter": ("psum",), "all_gather": ("psum",), "pmin": ("pmax",)}
PERM_NAMES = {"i", "me", "shift", "k", "src", "dst", "idx"}
AXIS_KWARGS = ("axis", "scatter_dimension", "split_axis", "concat_axis")
REDUCTIONS = {"sum", "mean", "max", "min", "var", "std", "prod", "argmax", "argmin", "logsumexp", "cumsum",
              "all", "any", "median", "softmax", "log_softmax", "norm", "nansum", "nanmean", "average"}
SIZE_KWARGS = ("bins", "length", "size", "num_segments", "minlength", "num")
TILED = ("all_gather", "psum_scatter")
BOUNDS = {"minimum": "maximum", "maximum": "minimum", "floor": "ceil", "ceil": "floor"}
LOCAL_REDUCE = {"sum": "mean", "mean": "sum", "max": "min", "min": "max"}  # jnp の縮約の取り違え
DROPPABLE = ("psum", "pmean", "pmax", "pmin", "all_gather", "psum_scatter", "ppermute")  # 通信を書き忘れる
LR_NAMES = {"lr", "learning_rate", "eta"}
LOOP_CAP = 4  # range_cap: 探索を打ち切る回数（手元で試した小さな例の大きさ）
BOOL_CALLS = ("all", "any", "isinstance", "callable", "hasattr", "bool")  # 真偽を返す組み込み
CHECK = re.compile(r"""ch6\.check\(\s*["']([\w.-]+)["']\s*,\s*(\w+)\s*\)""")


# ---------------------------------------------------------------- 演算子の登録

@dataclasses.dataclass(frozen=True)
class Operator:
    """変異の演算子 1 つ: nodes の型の節を受け取り、(説明, 変える関数) を 0 個以上返す。"""

    name: str
    doc: str
    nodes: tuple[type, ...]
    make: Callable[[ast.AST, Context], Iterable[tuple[str, Callable]]]
    signature: bool = False  # 解答を持つ関数の def（解答ブロックの外）にも当てる（引数の既定値）


OPERATORS: list[Operator] = []


def operator(*nodes: type, signature: bool = False):
    """演算子を登録するデコレータ。関数の docstring の 1 行目が説明（``--operators`` の表）になる。"""
    def register(make):
        doc = inspect.getdoc(make) or ""
        if not doc.strip():
            raise ValueError(f"operator {make.__name__} needs a one-line docstring")
        OPERATORS.append(Operator(make.__name__, doc.splitlines()[0], nodes, make, signature))
        return make
    return register


@dataclasses.dataclass
class Context:
    """1 つのセルについて、演算子が参照できること。"""

    tree: ast.AST
    lines: range  # 解答ブロックの行
    axis_names: list[str]  # 解答ブロックの P("...") に書かれた軸の名前（最初のもの）
    has_ppermute: bool
    functions: dict[str, ast.FunctionDef]  # セルで定義された関数（名前 → 定義）
    lowered: set[int] = dataclasses.field(default_factory=set)  # .lower / .trace するだけの呼び出し（節の id）


@dataclasses.dataclass
class Site:
    """変異を入れる 1 か所。index は ast.walk の順番（コピーした木でも同じ節を指す）。"""

    index: int
    label: str
    apply: Callable  # (node) -> 置き換え後の節（None なら節をその場で変えた）
    operator: str = ""


# ---------------------------------------------------------------- 変異の演算子: 値を壊す
# 並びは意味を持ちます: 2 つの演算子が同じ変異体を作ったときは、先の演算子の説明が残ります
# （tools/mutants_equivalent.txt の説明と合わせるため、新しい演算子は後ろに足します）。

@operator(ast.Call)
def range_bounds(node, ctx):
    """range(...) の始まりと終わりを 1 つずらす（off-by-one）。"""
    if _name(node.func) == "range" and isinstance(node.func, ast.Name):
        which = ["終わり"] if len(node.args) == 1 else ["始まり", "終わり"]
        for i, what in enumerate(which):
            for d in (-1, 1):
                yield f"range の{what}を {d:+d}（{_text(node)}）", _shift_arg(i, d)


@operator(ast.Call)
def local_reduce_swap(node, ctx):
    """jnp の縮約を取り違える（sum ↔ mean、max ↔ min）。"""
    name = _name(node.func)
    if name in LOCAL_REDUCE and _is_numpy(node.func):
        yield f"{name} → {LOCAL_REDUCE[name]}（{_text(node)}）", _set_attr(LOCAL_REDUCE[name])


@operator(ast.Call)
def builtin_min_max(node, ctx):
    """組み込みの max と min を入れ替える。"""
    name = _name(node.func)
    if name in ("max", "min") and isinstance(node.func, ast.Name) and node.args:
        other = "min" if name == "max" else "max"
        yield f"組み込みの {name} → {other}（{_text(node)}）", _replace_func(other)


@operator(ast.Call)
def drop_collective(node, ctx):
    """集団通信を外す（通信しない）、引数で受け取った軸の名前を決め打ちの文字列にする。"""
    name = _name(node.func)
    if name in DROPPABLE and _is_lax(node.func) and node.args:
        yield f"{name} を外す（通信しない）", _keep_arg(0)
        if len(node.args) > 1 and isinstance(node.args[1], ast.Name):
            yield f"{name}: 軸の名前 {node.args[1].id} を決め打ちの文字列に", _set_arg(1, node.args[1].id)


@operator(ast.Call)
def drop_out_sharding(node, ctx):
    """out_sharding= を外す。"""
    if any(kw.arg == "out_sharding" for kw in node.keywords):
        yield f"{_name(node.func)}: out_sharding= を外す", _drop_kw("out_sharding")


@operator(ast.Call)
def clamp_bounds(node, ctx):
    """切り詰めの境目: minimum ↔ maximum、floor ↔ ceil、定数の境目を外す。"""
    name = _name(node.func)
    if name in BOUNDS and _is_numpy(node.func):
        yield f"{name} → {BOUNDS[name]}（{_text(node)}）", _set_attr(BOUNDS[name])
        if name in ("minimum", "maximum") and len(node.args) == 2:
            for i, a in enumerate(node.args):
                if isinstance(a, ast.Constant):  # minimum(1.0, r) -> r
                    yield f"境目 {ast.unparse(a)} を外す（{_text(node)}）", _keep_arg(1 - i)


@operator(ast.Call)
def clip_bounds(node, ctx):
    """clip の上限・下限を外す。"""
    if _name(node.func) != "clip":
        return
    for i, what in ((1, "下限"), (2, "上限")):
        if len(node.args) > i and not (isinstance(node.args[i], ast.Constant) and node.args[i].value is None):
            yield f"clip の{what}を外す（{_text(node)}）", _set_arg(i, None)
    for kw in node.keywords:
        if kw.arg in ("min", "max", "a_min", "a_max"):
            yield f"clip の {kw.arg}= を外す（{_text(node)}）", _drop_kw(kw.arg)


@operator(ast.Call)
def axis_kwargs(node, ctx):
    """どの呼び出しでも axis= / scatter_dimension= / split_axis= / concat_axis= を 1 つずらす、縮約の軸を外す・1 つ落とす。"""
    name = _name(node.func)
    for kw in node.keywords:
        if kw.arg not in AXIS_KWARGS:
            continue
        v = kw.value
        if isinstance(v, ast.Constant) and isinstance(v.value, int) and not isinstance(v.value, bool):
            k = v.value
            for new in dict.fromkeys([k + 1, k - 1 if k > 0 else -1]):
                yield f"{name}: {kw.arg}={k} → {new}", _set_kw(kw.arg, new)
            if kw.arg == "axis" and name in REDUCTIONS:
                yield f"{name}: axis={k} を外す（全体で縮約）", _drop_kw("axis")
        elif isinstance(v, ast.Tuple) and all(isinstance(e, ast.Constant) for e in v.elts) and len(v.elts) >= 2:
            for i, e in enumerate(v.elts):
                yield f"{name}: {kw.arg}={ast.unparse(v)} から {e.value} を落とす", _drop_kw_elt(kw.arg, i)
            if name in REDUCTIONS:
                yield f"{name}: {kw.arg}={ast.unparse(v)} を外す（全体で縮約）", _drop_kw(kw.arg)


@operator(ast.Call)
def keepdims(node, ctx):
    """keepdims=True を外す。"""
    for kw in node.keywords:
        if kw.arg == "keepdims" and isinstance(kw.value, ast.Constant) and kw.value.value is True:
            yield f"{_name(node.func)}: keepdims=True を外す", _drop_kw("keepdims")


@operator(ast.Call)
def size_kwargs(node, ctx):
    """bins= / length= / size= / num_segments= など大きさの引数を 1 つずらす。"""
    for kw in node.keywords:
        if kw.arg in SIZE_KWARGS:
            for d in (-1, 1):
                yield f"{_name(node.func)}: {kw.arg} を {d:+d}", _shift_kw(kw.arg, d)


@operator(ast.Call)
def tiled_flag(node, ctx):
    """all_gather / psum_scatter の tiled= を逆にする（書いていなければ tiled=True を足す）。"""
    name = _name(node.func)
    if name in TILED and _is_lax(node.func):
        tiled = next((kw for kw in node.keywords if kw.arg == "tiled"), None)
        if tiled is None:
            yield f"{name}: tiled=True を足す", _add_kw("tiled", True)
        elif isinstance(tiled.value, ast.Constant) and isinstance(tiled.value.value, bool):
            yield f"{name}: tiled={tiled.value.value} → {not tiled.value.value}", _set_kw("tiled", not tiled.value.value)


@operator(ast.Call)
def spec_entries(node, ctx):
    """in_specs / out_specs の 2 つの項目を入れ替える、P() の項目を分割にする。"""
    axis = ctx.axis_names[:1]
    for kw in node.keywords:
        if kw.arg not in ("in_specs", "out_specs"):
            continue
        v = kw.value
        entries = v.elts if isinstance(v, (ast.Tuple, ast.List)) else None
        if entries:
            for i, j in _pairs(entries):
                yield f"{kw.arg} の {i} 番目と {j} 番目を入れ替える", _swap_kw_elts(kw.arg, i, j)
            for i, e in enumerate(entries):
                if _is_empty_spec(e) and axis:
                    yield f"{kw.arg}[{i}]: P() → P({axis[0]!r})", _set_kw_elt_node(kw.arg, i, _spec_call(axis[0]))
        elif _is_empty_spec(v) and axis:
            yield f"{kw.arg}: P() → P({axis[0]!r})", _set_kw_node(kw.arg, _spec_call(axis[0]))


@operator(ast.Call)
def vmap_axes(node, ctx):
    """vmap / pmap / smap の in_axes / out_axes を入れ替える・書き換える。"""
    for kw in node.keywords:
        if kw.arg not in ("in_axes", "out_axes"):
            continue
        v = kw.value
        if isinstance(v, ast.Tuple):
            for i, j in _pairs(v.elts):
                yield f"{kw.arg} の {i} 番目と {j} 番目を入れ替える", _swap_kw_elts(kw.arg, i, j)
            for i, e in enumerate(v.elts):
                if isinstance(e, ast.Constant) and e.value in (0, 1, None):
                    new = {0: None, 1: 0, None: 0}[e.value]
                    yield f"{kw.arg}[{i}]: {e.value} → {new}", _set_kw_elt(kw.arg, i, new)
        elif isinstance(v, ast.Constant) and v.value in (0, 1, None):
            new = {0: 1, 1: 0, None: 0}[v.value]
            yield f"{kw.arg}: {v.value} → {new}", _set_kw(kw.arg, new)


@operator(ast.Call)
def swap_collective(node, ctx):
    """集団通信を値の違う別の集団通信にする（psum → pmean / pmax など）。"""
    name = _name(node.func)
    if name in SWAP_TO and _is_lax(node.func):
        for other in SWAP_TO[name]:
            yield f"{name} → {other}", _set_attr(other)


@operator(ast.Call)
def vmap_to_loop(node, ctx):
    """jax.vmap(f)(xs) を、バッチを 1 件ずつ回す Python のループ（jnp.stack([f(x) for x in xs])）にする。"""
    if _dotted(node.func) == "jax.vmap":
        yield "vmap → Python のループ", _replace_func("loop_vmap")


@operator(ast.Call)
def partition_spec(node, ctx):
    """P(...) の軸の名前を None にする・別の位置へ動かす、P()（複製）にする。"""
    if _name(node.func) not in ("P", "PartitionSpec") or not node.args:
        return
    args, text = node.args, ast.unparse(node)
    for i, a in enumerate(args):
        if isinstance(a, ast.Constant) and isinstance(a.value, str):
            yield f"{text}: {a.value!r} → None", _set_arg(i, None)
            for j in range(len(args)):
                if j != i:
                    yield f"{text}: {a.value!r} を {j} 番目の軸へ", _move_arg(i, j)
            if len(args) == 1:
                yield f"{text}: {a.value!r} を 1 番目の軸へ", _move_arg(0, 1)
    if any(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in args):
        yield f"{text} → P()（複製）", _clear_args


@operator(ast.Call)
def axis_index_zero(node, ctx):
    """lax.axis_index を 0 にする（全デバイスが 0 番のつもり）。"""
    if _dotted(node.func) in ("lax.axis_index", "jax.lax.axis_index"):
        yield "axis_index を 0 に（全デバイスが 0 番のつもり）", lambda n: ast.Constant(0)


@operator(ast.Call)
def jit_per_call(node, ctx):
    """jax.jit(f, ...) を、呼ぶたびに新しい関数を jit し直すもの（毎回トレースとコンパイル）にする。"""
    if _dotted(node.func) == "jax.jit" and node.args and id(node) not in ctx.lowered:  # jax.jit(f).lower(…) は呼ばない
        yield f"jit を呼ぶたびに作り直す（{_text(node)}）", _replace_func("rejit_each_call")


@operator(ast.Subscript)
def index_shift(node, ctx):
    """整数の添字を 1 つずらす（shape[0] → shape[1] など。負にはしない）。"""
    s = node.slice
    if isinstance(s, ast.Constant) and isinstance(s.value, int) and not isinstance(s.value, bool) and s.value >= 0:
        for d in (-1, 1):
            if s.value + d >= 0:
                yield f"添字を {d:+d}（{_text(node)}）", _shift_index(d)


@operator(ast.ListComp)
def ppermute_pairs(node, ctx):
    """ppermute の組: 送信元と送信先を入れ替える、組を 1 つ落とす。"""
    if ctx.has_ppermute and _is_pair(node.elt):
        yield f"ppermute の組の送信元と送信先を入れ替える（{_text(node)}）", _swap_pair
        yield f"ppermute の組を 1 つ落とす（{_text(node)}）", _drop_last_pair


@operator(ast.UnaryOp)
def drop_sign(node, ctx):
    """名前につけた負の符号を外す（-x → x）。"""
    if isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Name):
        yield f"符号を外す（{ast.unparse(node)}）", lambda n: n.operand


@operator(ast.BinOp)
def update_direction(node, ctx):
    """更新 p - lr * g の向きを逆にする。"""
    if (isinstance(node.op, ast.Sub) and isinstance(node.right, ast.BinOp) and isinstance(node.right.op, ast.Mult)
            and _names(node.right) & LR_NAMES):
        yield f"更新の向きを逆にする（{_text(node)}）", _flip_sign


@operator(ast.BinOp)
def drop_division(node, ctx):
    """割り算を消す（a / b → a）。"""
    if isinstance(node.op, ast.Div):
        yield f"割り算を消す（{_text(node)}）", lambda n: n.left


@operator(ast.BinOp)
def drop_small_term(node, ctx):
    """小さな定数（eps など）の足し算を消す。"""
    if isinstance(node.op, ast.Add) and _small(node.right):
        yield f"小さな項を消す（{_text(node)}）", lambda n: n.left


@operator(ast.BinOp)
def ring_direction(node, ctx):
    """デバイスの番号の足し引き（i + shift など）の向きを逆にする、1 つ余分にずらす。"""
    if isinstance(node.op, (ast.Add, ast.Sub)) and _names(node) & PERM_NAMES:
        yield f"向きを逆にする（{_text(node)}）", _flip_sign
        yield f"1 つ余分にずらす（{_text(node)}）", lambda n: ast.BinOp(left=n, op=ast.Add(), right=ast.Constant(1))


@operator(ast.Compare)
def negate_compare(node, ctx):
    """== と != を入れ替える。"""
    if len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
        yield f"条件を逆にする（{_text(node)}）", _negate_compare


@operator(ast.Compare)
def compare_strictness(node, ctx):
    """境目の比較を入れ替える（< ↔ <=、> ↔ >=）。"""
    if len(node.ops) == 1 and isinstance(node.ops[0], tuple(_STRICTNESS)):
        yield f"境目を入れ替える（{_text(node)}）", _flip_strictness


@operator(ast.FunctionDef)
def drop_jit_decorator(node, ctx):
    """@jax.jit を外す。"""
    if any(ast.unparse(d) == "jax.jit" for d in node.decorator_list):
        yield f"@jax.jit を外す（{node.name}）", _drop_jit


@operator(ast.Return)
def swap_return(node, ctx):
    """返すタプルの最初の 2 つを入れ替える。"""
    if isinstance(node.value, ast.Tuple) and len(node.value.elts) >= 2:
        yield "返すタプルの順番を入れ替える", _swap_return


@operator(ast.Return)
def other_answer(node, ctx):
    """選択式の答え（'a'〜'd'）を別の記号にする。"""
    if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
        for other in "abcd":
            if other != node.value.value:
                yield f"答え {node.value.value!r} → {other!r}", _set_const(other)


@operator(ast.Dict)
def dict_answers(node, ctx):
    """辞書の答え（文字列の値）を、同じ辞書のほかの値にする。"""
    values = {v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)}
    for k, v in enumerate(node.values):
        if isinstance(v, ast.Constant) and isinstance(v.value, str):
            for other in sorted(values - {v.value}):
                yield f"{ast.unparse(node.keys[k])}: {v.value!r} → {other!r}", _set_dict_value(k, other)


@operator(ast.Return)
def flip_bool_return(node, ctx):
    """返す真偽を逆にする（return True ↔ False、比較や and / or を返すなら not をつける。== と != は negate_compare）。"""
    v = node.value
    if isinstance(v, ast.Constant) and isinstance(v.value, bool):
        yield f"return {v.value} → return {not v.value}", _set_const(not v.value)
    elif _is_bool_expr(v):
        yield f"返す真偽を逆にする（{_text(v)}）", _negate_return


@operator(ast.Call)
def drop_abs(node, ctx):
    """絶対値を外す（abs(x)、jnp.abs(x)、np.abs(x) → x: 差の向きを一方だけ考えてしまう）。"""
    name = _name(node.func)
    builtin = name == "abs" and isinstance(node.func, ast.Name)
    if len(node.args) == 1 and (builtin or (name in ("abs", "absolute") and _is_numpy(node.func))):
        yield f"絶対値を外す（{_text(node)}）", _keep_arg(0)


@operator(ast.For, ast.While)
def loop_once(node, ctx):
    """ループを 1 回目の終わりで抜ける（return や break をループの本体の中に書いてしまう）。"""
    yield f"ループを 1 回で抜ける（{_loop_text(node)}）", _append_break


@operator(ast.For)
def range_cap(node, ctx):
    """for … in range(…) の探索を 4 回（LOOP_CAP）で打ち切る（手元の小さな例の大きさまでしか調べない）。"""
    it = node.iter
    if (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
            and 1 <= len(it.args) <= 2 and not it.keywords and not isinstance(it.args[-1], ast.Constant)):
        yield f"ループを {LOOP_CAP} 回で打ち切る（{_text(it)}）", _cap_range


# ---------------------------------------------------------------- 変異の演算子: 値を保って手段を変える
# 結果の値は解答例と同じで、演習が教える手段（どの集団通信か、vmap / scan か、jit を 1 度だけ作るか）だけが違う。
# 置き換え先は下の「同じ値を別の手段で作る関数」（RUNTIME）で、変異体の名前空間に入れてから実行します。
# pmean ↔ psum / n の演算子はありません: lax.pmean は jaxpr でも psum と割り算なので、どのチェックにも見分けられず、
# どの問題もどちらかを禁じられません（作っても等価変異体が増えるだけです）。

@operator(ast.Call)
def collective_by_gather(node, ctx):
    """psum / pmean / pmax を、all_gather で集めてから各デバイスで足す・平均する・最大を取る形にする。"""
    name = _name(node.func)
    if name in ("psum", "pmean", "pmax") and _is_lax(node.func):
        what = {"psum": "和", "pmean": "平均", "pmax": "最大"}[name]
        yield f"{name} → all_gather + 各デバイスで{what}（{_text(node)}）", _replace_func(f"{name}_by_all_gather")


@operator(ast.Call)
def scatter_by_reduce(node, ctx):
    """psum_scatter を、psum（または all_gather + 和）してから受け持つ部分を切り出す形にする。"""
    if _name(node.func) == "psum_scatter" and _is_lax(node.func):
        yield f"psum_scatter → psum + 受け持つ部分の切り出し（{_text(node)}）", _replace_func("psum_scatter_by_psum")
        yield f"psum_scatter → all_gather + 和 + 受け持つ部分の切り出し（{_text(node)}）", _replace_func("psum_scatter_by_all_gather")


@operator(ast.Call)
def ppermute_by_gather(node, ctx):
    """ppermute を、all_gather で全部集めてから送信元の行を添字で選ぶ形にする。"""
    if _name(node.func) == "ppermute" and _is_lax(node.func):
        yield f"ppermute → all_gather + 送信元の添字（{_text(node)}）", _replace_func("ppermute_by_all_gather")


@operator(ast.Call)
def all_to_all_by_gather(node, ctx):
    """all_to_all（tiled=True）を、all_gather で集めてから受け持つ部分を切り出す形にする。"""
    if _name(node.func) == "all_to_all" and _is_lax(node.func) and _kw_true(node, "tiled"):
        yield f"all_to_all → all_gather + 受け持つ部分の切り出し（{_text(node)}）", _replace_func("all_to_all_by_all_gather")


@operator(ast.Call)
def gather_by_psum(node, ctx):
    """all_gather を、自分の位置にだけ値を置いた配列の psum にする。"""
    if _name(node.func) == "all_gather" and _is_lax(node.func):
        yield f"all_gather → 自分の位置に置いて psum（{_text(node)}）", _replace_func("all_gather_by_psum")


@operator(ast.Call)
def vmap_to_lax_map(node, ctx):
    """jax.vmap(f) を lax.map（バッチを 1 件ずつ回す scan）にする。"""
    if _dotted(node.func) == "jax.vmap":
        yield f"vmap → lax.map（{_text(node)}）", _replace_func("map_vmap")


@operator(ast.Call)
def scan_to_loop(node, ctx):
    """lax.scan を Python のループ（ステップの数だけ書き下したプログラム）にする。"""
    if _dotted(node.func) in ("lax.scan", "jax.lax.scan"):
        yield f"scan → Python のループ（{_text(node)}）", _replace_func("loop_scan")


@operator(ast.Call)
def jit_static_arg(node, ctx):
    """jax.jit(f) の f の最後の引数を静的にする（値が変わるたびにコンパイルし直す）。"""
    if _dotted(node.func) != "jax.jit" or not node.args or not isinstance(node.args[0], ast.Name):
        return
    fn = ctx.functions.get(node.args[0].id)
    if fn is None or len(fn.args.args) < 2 or any(kw.arg in ("static_argnums", "static_argnames")
                                                   for kw in node.keywords):
        return
    last = len(fn.args.args) - 1
    yield (f"jit: 引数 {fn.args.args[last].arg} を静的にする（値ごとにコンパイル）",
           _add_kw_node("static_argnums", ast.Tuple([ast.Constant(last)], ast.Load())))


@operator(ast.FunctionDef)
def jit_decorator_per_call(node, ctx):
    """@jax.jit を、呼ぶたびに新しい関数を jit し直すデコレータにする。"""
    if any(ast.unparse(d) == "jax.jit" for d in node.decorator_list):
        yield f"@jax.jit を呼ぶたびに作り直す（{node.name}）", _per_call_decorator


@operator(ast.FunctionDef, ast.Lambda, signature=True)
def default_values(node, ctx):
    """引数の既定値（定数）を変える: 整数は +1、小数は 0（0 なら 1）、真偽は逆、文字列は空に。"""
    args = node.args
    positional = (args.posonlyargs + args.args)[len(args.posonlyargs + args.args) - len(args.defaults):]
    named = [(a, d, ("defaults", i)) for i, (a, d) in enumerate(zip(positional, args.defaults))]
    named += [(a, d, ("kw_defaults", i)) for i, (a, d) in enumerate(zip(args.kwonlyargs, args.kw_defaults))
              if d is not None]
    for arg, default, (field, i) in named:
        if not isinstance(default, ast.Constant) or default.value is None:
            continue
        v = default.value
        if isinstance(v, bool):
            new = not v
        elif isinstance(v, int):
            new = v + 1
        elif isinstance(v, float):
            new = 0.0 if v else 1.0
        elif isinstance(v, str):
            new = ""
        else:
            continue
        yield f"既定値 {arg.arg}={v!r} → {new!r}", _set_default(field, i, new)


# ---------------------------------------------------------------- 節を調べる・変える小道具

def _name(func) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _dotted(func) -> str:
    return ast.unparse(func)


def _text(node) -> str:
    return ast.unparse(node)[:40]


def _is_lax(func) -> bool:
    return _dotted(func).startswith(("lax.", "jax.lax."))


def _is_numpy(func) -> bool:
    return _dotted(func).startswith(("jnp.", "np.", "jax.numpy."))


def _kw_true(node, name) -> bool:
    return any(kw.arg == name and isinstance(kw.value, ast.Constant) and kw.value.value is True
               for kw in node.keywords)


def _pairs(elts):
    for i in range(len(elts)):
        for j in range(i + 1, len(elts)):
            if ast.unparse(elts[i]) != ast.unparse(elts[j]):
                yield i, j


def _is_empty_spec(node) -> bool:
    return isinstance(node, ast.Call) and _name(node.func) in ("P", "PartitionSpec") and not node.args


def _spec_call(axis: str) -> ast.Call:
    return ast.Call(func=ast.Name("P", ast.Load()), args=[ast.Constant(axis)], keywords=[])


def _is_pair(node) -> bool:
    return isinstance(node, ast.Tuple) and len(node.elts) == 2


def _small(node) -> bool:
    if isinstance(node, ast.Name) and node.id in ("eps", "epsilon"):
        return True
    return isinstance(node, ast.Constant) and isinstance(node.value, float) and 0 < abs(node.value) < 1e-2


def _names(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _kw(n, name):
    return next(k for k in n.keywords if k.arg == name)


def _plus(node, d):
    return ast.BinOp(left=node, op=ast.Add() if d > 0 else ast.Sub(), right=ast.Constant(abs(d)))


def _swap_pair(n):
    n.elt.elts.reverse()


def _drop_last_pair(n):
    return ast.Subscript(value=n, slice=ast.Slice(upper=ast.Constant(-1)), ctx=ast.Load())


def _shift_arg(i, d):
    def f(n):
        n.args[i] = _plus(n.args[i], d)
    return f


def _keep_arg(i):
    return lambda n: n.args[i]


def _set_arg(i, value):
    def f(n):
        n.args[i] = ast.Constant(value)
    return f


def _move_arg(i, j):
    def f(n):
        args = list(n.args)
        while len(args) <= j:
            args.append(ast.Constant(None))
        args[i], args[j] = args[j], args[i]
        n.args = args
    return f


def _clear_args(n):
    n.args = []


def _shift_kw(name, d):
    def f(n):
        kw = _kw(n, name)
        kw.value = _plus(kw.value, d)
    return f


def _shift_index(d):
    def f(n):
        n.slice = ast.Constant(n.slice.value + d)
    return f


def _drop_kw(name):
    def f(n):
        n.keywords = [k for k in n.keywords if k.arg != name]
    return f


def _add_kw(name, value):
    return _add_kw_node(name, ast.Constant(value))


def _add_kw_node(name, node):
    def f(n):
        n.keywords.append(ast.keyword(arg=name, value=node))
    return f


def _set_kw(name, value):
    return _set_kw_node(name, ast.Constant(value))


def _set_kw_node(name, node):
    def f(n):
        _kw(n, name).value = node
    return f


def _drop_kw_elt(name, i):
    def f(n):
        del _kw(n, name).value.elts[i]
    return f


def _set_kw_elt(name, i, value):
    return _set_kw_elt_node(name, i, ast.Constant(value))


def _set_kw_elt_node(name, i, node):
    def f(n):
        _kw(n, name).value.elts[i] = node
    return f


def _swap_kw_elts(name, i, j):
    def f(n):
        e = _kw(n, name).value.elts
        e[i], e[j] = e[j], e[i]
    return f


def _set_attr(new):
    def f(n):
        n.func.attr = new
    return f


def _replace_func(name):
    def f(n):
        n.func = ast.Name(id=name, ctx=ast.Load())
    return f


def _flip_sign(n):
    n.op = ast.Sub() if isinstance(n.op, ast.Add) else ast.Add()


def _negate_compare(n):
    n.ops = [ast.NotEq() if isinstance(n.ops[0], ast.Eq) else ast.Eq()]


_STRICTNESS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}


def _flip_strictness(n):
    n.ops = [_STRICTNESS[type(n.ops[0])]()]


def _is_bool_expr(node) -> bool:
    """Python の真偽を返す式（比較、and / or、not、all / any など）。== と != だけの比較は negate_compare が逆にする。"""
    if isinstance(node, ast.Compare):
        return not (len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)))
    if isinstance(node, ast.BoolOp) or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)):
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BOOL_CALLS


def _negate_return(n):
    n.value = ast.UnaryOp(op=ast.Not(), operand=n.value)


def _loop_text(node) -> str:
    head = (f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}" if isinstance(node, ast.For)
            else f"while {ast.unparse(node.test)}")
    return head[:40]


def _append_break(n):
    n.body.append(ast.Break())


def _cap_range(n):
    """range(stop) → range(min(stop, LOOP_CAP))、range(start, stop) → range(start, min(stop, start + LOOP_CAP))。"""
    args = n.iter.args
    cap = (ast.Constant(LOOP_CAP) if len(args) == 1
           else ast.BinOp(left=copy.deepcopy(args[0]), op=ast.Add(), right=ast.Constant(LOOP_CAP)))
    args[-1] = ast.Call(func=ast.Name("min", ast.Load()), args=[args[-1], cap], keywords=[])


def _drop_jit(n):
    n.decorator_list = [d for d in n.decorator_list if ast.unparse(d) != "jax.jit"]


def _per_call_decorator(n):
    n.decorator_list = [ast.Name("rejit_each_call", ast.Load()) if ast.unparse(d) == "jax.jit" else d
                        for d in n.decorator_list]


def _swap_return(n):
    e = n.value.elts
    e[0], e[1] = e[1], e[0]


def _set_const(value):
    def f(n):
        n.value = ast.Constant(value)
    return f


def _set_dict_value(k, value):
    def f(n):
        n.values[k] = ast.Constant(value)
    return f


def _set_default(field, i, value):
    def f(n):
        getattr(n.args, field)[i] = ast.Constant(value)
    return f


# ---------------------------------------------------------------- 変異体を作る

def _in_block(node, lines: range) -> bool:
    return getattr(node, "lineno", None) in lines


def _context(tree: ast.AST, lines: range) -> tuple[Context, ast.AST | None]:
    block = [n for n in ast.walk(tree) if _in_block(n, lines)]
    axis_names = [a.value for n in block if isinstance(n, ast.Call) and _name(n.func) in ("P", "PartitionSpec")
                  for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    has_ppermute = any(isinstance(n, ast.Call) and _name(n.func) == "ppermute" for n in block)
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    holder = None  # 解答ブロックを持つ、いちばん内側の関数（その def の既定値も変異の対象）
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef) and n.lineno < lines.start and (n.end_lineno or 0) >= lines.stop - 1:
            if holder is None or n.lineno > holder.lineno:
                holder = n
    lowered = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in ("lower", "trace")}
    return Context(tree, lines, axis_names, has_ppermute, functions, lowered), holder


def _sites(tree: ast.AST, lines: range) -> list[Site]:
    ctx, holder = _context(tree, lines)
    sites: list[Site] = []
    for index, node in enumerate(ast.walk(tree)):
        inside = _in_block(node, lines)
        if not inside and node is not holder:
            continue
        for op in OPERATORS:
            if isinstance(node, op.nodes) and (inside or op.signature):
                sites += [Site(index, label, apply, op.name) for label, apply in op.make(node, ctx)]
    return sites


def _mutants(source: str) -> Iterator[tuple[str, str, str, int]]:
    """セルのソース -> (演算子, 説明, 変異体のソース, 変えた行のセルの中の番号)。解答と同じソースや、前と同じ変異体は作らない。"""
    lines = source.splitlines()
    begin = next(i for i, ln in enumerate(lines, 1) if "### BEGIN SOLUTION" in ln)
    end = next(i for i, ln in enumerate(lines, 1) if "### END SOLUTION" in ln)
    tree = ast.parse(source)
    seen, made = {ast.unparse(tree)}, []
    for site in _sites(tree, range(begin + 1, end)):
        new = copy.deepcopy(tree)
        node = next(n for k, n in enumerate(ast.walk(new)) if k == site.index)
        replaced = site.apply(node)
        if replaced is not None:
            _replace(new, node, replaced)
        text = ast.unparse(ast.fix_missing_locations(new))
        if text not in seen:
            seen.add(text)
            made.append((site, text))
    # 同じ説明の変異体が 2 つ以上あれば、ソースの順に 2 番目から「（k 番目）」をつける（等価変異体の表で区別できるように）
    nodes = list(ast.walk(tree))
    position = {site.index: (getattr(nodes[site.index], "lineno", 0), getattr(nodes[site.index], "col_offset", 0))
                for site, _ in made}
    number: dict[int, str] = {}
    for label in {site.label for site, _ in made}:
        same = sorted((position[site.index], k) for k, (site, _) in enumerate(made) if site.label == label)
        number.update({k: f"（{i} 番目）" for i, (_, k) in enumerate(same[1:], start=2)})
    for k, (site, text) in enumerate(made):
        yield site.operator, site.label + number.get(k, ""), text, position[site.index][0]


def mutants(source: str) -> list[tuple[str, str]]:
    """セルのソース -> [(説明, 変異体のソース)]。解答ブロックの行（と、解答を持つ関数の既定値）だけを変える。"""
    return [(label, text) for _, label, text, _ in _mutants(source)]


def mutants_by_operator(source: str) -> list[tuple[str, str, str]]:
    """セルのソース -> [(演算子の名前, 説明, 変異体のソース)]。"""
    return [(op, label, text) for op, label, text, _ in _mutants(source)]


def _replace(tree, old, new):
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list):
                for k, v in enumerate(value):
                    if v is old:
                        value[k] = new
                        return
    raise ValueError("node not found")


def operator_table() -> str:
    """演算子の一覧（名前、当てる節の型、説明）。"""
    rows = []
    for op in OPERATORS:
        nodes = "/".join(t.__name__ for t in op.nodes) + ("+def" if op.signature else "")
        rows.append(f"{op.name:24s} {nodes:22s} {op.doc}")
    return "\n".join(rows)


# ---------------------------------------------------------------- 同じ値を別の手段で作る関数（変異体の中で呼ぶ）
# どれも元の API と同じ引数を受け取り、同じ値を返します。tests/tools/test_mutate.py が元の演算と比べます。

def loop_vmap(fn, in_axes=0, out_axes=0, **_):
    """jax.vmap と同じ結果を、バッチを 1 件ずつ Python で回して作る（チェックが見抜くべき書き方）。"""
    import jax
    import jax.numpy as jnp

    def run(*args):
        axes = in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
        sizes = [jax.tree.leaves(a)[0].shape[ax] for a, ax in zip(args, axes) if ax is not None]
        outs = []
        for b in range(sizes[0]):
            picked = [a if ax is None else jax.tree.map(lambda v, ax=ax: jnp.take(v, b, axis=ax), a)  # noqa: B023  その回のうちに使う
                      for a, ax in zip(args, axes)]
            outs.append(fn(*picked))
        return jax.tree.map(lambda *vs: jnp.stack(vs, axis=out_axes), *outs)

    return run


def map_vmap(fn, in_axes=0, out_axes=0, **_):
    """jax.vmap と同じ結果を、lax.map（バッチを 1 件ずつ回す scan）で作る。"""
    import jax
    import jax.numpy as jnp

    def run(*args):
        axes = in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
        mapped = tuple(jax.tree.map(lambda v, ax=ax: jnp.moveaxis(v, ax, 0), a)
                       for a, ax in zip(args, axes) if ax is not None)

        def one(xs):
            it = iter(xs)
            return fn(*[a if ax is None else next(it) for a, ax in zip(args, axes)])

        out = jax.lax.map(one, mapped)
        return jax.tree.map(lambda v: jnp.moveaxis(v, 0, out_axes), out)

    return run


def loop_scan(f, init, xs=None, length=None, reverse=False, unroll=1, **_):
    """lax.scan と同じ結果を、Python のループで 1 ステップずつ書き下して作る。"""
    import jax
    import jax.numpy as jnp

    n = length if xs is None else jax.tree.leaves(xs)[0].shape[0]
    carry, ys = init, []
    for i in (reversed(range(n)) if reverse else range(n)):
        carry, y = f(carry, None if xs is None else jax.tree.map(lambda v: v[i], xs))  # noqa: B023
        ys.append(y)
    if reverse:
        ys.reverse()
    return carry, jax.tree.map(lambda *vs: jnp.stack(vs), *ys)


class rejit_each_call:  # jax.jit と同じ書き方で使うので小文字
    """jax.jit と同じ使い方で、呼ぶたびに新しい関数を jit する（毎回トレースとコンパイルをし直す）。"""

    def __init__(self, fun=None, **options):
        self.fun, self.options = fun, options
        if fun is not None:
            functools.update_wrapper(self, fun)

    def _fresh(self):
        import jax

        fun = self.fun

        def fresh(*args, **kwargs):
            return fun(*args, **kwargs)

        with contextlib.suppress(AttributeError, TypeError):
            functools.update_wrapper(fresh, fun)
        return jax.jit(fresh, **self.options)

    def __call__(self, *args, **kwargs):
        return self._fresh()(*args, **kwargs)

    def lower(self, *args, **kwargs):
        return self._fresh().lower(*args, **kwargs)

    def trace(self, *args, **kwargs):
        return self._fresh().trace(*args, **kwargs)


def _gather(x, axis_name, **kw):
    """all_gather。全デバイスで同じ値の型になる形（to="invarying"）が使えればそれで（shard_map の out_specs=P() のため）。"""
    from jax import lax

    try:
        return lax.all_gather(x, axis_name, to="invarying", **kw)
    except Exception:  # pmap / vmap の軸など: ふつうの all_gather
        return lax.all_gather(x, axis_name, **kw)


def _tree(fn, x):
    import jax

    return jax.tree.map(fn, x)


def psum_by_all_gather(x, axis_name, **_):
    """lax.psum と同じ値を、all_gather で集めてから各デバイスで足して作る。"""
    import jax.numpy as jnp

    return _tree(lambda v: jnp.sum(_gather(v, axis_name), axis=0), x)


def pmean_by_all_gather(x, axis_name, **_):
    """lax.pmean と同じ値を、all_gather で集めてから各デバイスで平均して作る。"""
    import jax.numpy as jnp

    return _tree(lambda v: jnp.mean(_gather(v, axis_name), axis=0), x)


def pmax_by_all_gather(x, axis_name, **_):
    """lax.pmax と同じ値を、all_gather で集めてから各デバイスで最大を取って作る。"""
    import jax.numpy as jnp

    return _tree(lambda v: jnp.max(_gather(v, axis_name), axis=0), x)


def _own_part(total, axis_name, scatter_dimension, tiled):
    from jax import lax

    n, me = lax.axis_size(axis_name), lax.axis_index(axis_name)
    size = total.shape[scatter_dimension] // n
    part = lax.dynamic_slice_in_dim(total, me * size, size, axis=scatter_dimension)
    return part if tiled else part.squeeze(scatter_dimension)


def psum_scatter_by_psum(x, axis_name, *, scatter_dimension=0, tiled=False, **_):
    """lax.psum_scatter と同じ値を、psum で全体を足してから受け持つ部分を切り出して作る。"""
    from jax import lax

    return _own_part(lax.psum(x, axis_name), axis_name, scatter_dimension, tiled)


def psum_scatter_by_all_gather(x, axis_name, *, scatter_dimension=0, tiled=False, **_):
    """lax.psum_scatter と同じ値を、all_gather して各デバイスで足し、受け持つ部分を切り出して作る。"""
    import jax.numpy as jnp

    return _own_part(jnp.sum(_gather(x, axis_name), axis=0), axis_name, scatter_dimension, tiled)


def ppermute_by_all_gather(x, axis_name, perm):
    """lax.ppermute と同じ値を、all_gather で全部集めてから送信元の行を選んで作る（送信元のないデバイスは 0）。"""
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    n, me = lax.axis_size(axis_name), lax.axis_index(axis_name)
    source = np.full(n, -1)
    for s, d in perm:
        source[d] = s
    src = jnp.asarray(source)[me]

    def pick(v):
        g = lax.all_gather(v, axis_name)
        return jnp.where(src >= 0, g[jnp.maximum(src, 0)], jnp.zeros_like(v))

    return _tree(pick, x)


def all_to_all_by_all_gather(x, axis_name, split_axis, concat_axis, *, tiled=False, **_):
    """lax.all_to_all（tiled=True）と同じ値を、concat_axis に all_gather してから split_axis の受け持つ部分を切り出して作る。"""
    from jax import lax

    n, me = lax.axis_size(axis_name), lax.axis_index(axis_name)
    g = lax.all_gather(x, axis_name, axis=concat_axis, tiled=True)
    size = x.shape[split_axis] // n
    return lax.dynamic_slice_in_dim(g, me * size, size, axis=split_axis)


def all_gather_by_psum(x, axis_name, *, axis=0, tiled=False, **_):
    """lax.all_gather と同じ値を、自分の位置にだけ値を置いた (n, ...) の配列を psum して作る。"""
    import jax.numpy as jnp
    from jax import lax

    n, me = lax.axis_size(axis_name), lax.axis_index(axis_name)

    def gather(v):
        mine = (jnp.arange(n) == me).reshape((n,) + (1,) * v.ndim)
        stacked = lax.psum(jnp.where(mine, v[None], jnp.zeros_like(v)[None]), axis_name)
        out = jnp.moveaxis(stacked, 0, axis)
        if tiled:
            out = out.reshape(v.shape[:axis] + (n * v.shape[axis],) + v.shape[axis + 1:])
        return out

    return _tree(gather, x)


RUNTIME = {f.__name__: f for f in (
    loop_vmap, map_vmap, loop_scan, rejit_each_call, psum_by_all_gather, pmean_by_all_gather, pmax_by_all_gather,
    psum_scatter_by_psum, psum_scatter_by_all_gather, ppermute_by_all_gather,
    all_to_all_by_all_gather, all_gather_by_psum)}


# ---------------------------------------------------------------- 実行

@dataclasses.dataclass
class Outcome:
    exercise: str
    label: str
    status: str
    message: str
    equivalent: str | None = None
    operator: str = ""
    seconds: float = 0.0  # CPU の秒（変異体の定義とチェック）
    line: int = 0  # 変えた行（セルの中の行番号）

    @property
    def killed(self) -> bool:
        return self.status != "pass"


MIN_MUTANTS = 5  # 演習ごとの最少の変異体の数（これより少ない演習は理由を書く）
FEW = "(few mutants)"  # tools/mutants_equivalent.txt で「変異体が少ない理由」を書く行の印


SCORE_DEVICES = 8  # スコアを測るデバイスの数（これより少ない数では、8 で見抜いた変異体をもう一度試す）


def _table(path: Path) -> list[tuple[str, frozenset[int] | None, str, str]]:
    """(演習, デバイスの数の組 | None, 変異の説明, 理由)。演習の欄の「@1,3」は、その数のデバイスでだけ等価という印。"""
    rows = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            ex, label, reason = (part.strip() for part in line.split("|", 2))
            counts = None
            if "@" in ex:
                ex, _, at = (part.strip() for part in ex.partition("@"))
                counts = frozenset(int(c) for c in at.split(","))
            rows.append((ex, counts, label, reason))
    return rows


def load_equivalent(path: Path = EQUIVALENT_FILE, devices: int = SCORE_DEVICES) -> dict[tuple[str, str], str]:
    """「演習 | 変異の説明 | 理由」の行（# から後は注釈）のうち、devices 個のデバイスで等価なもの（@ のない行は
    どの数でも、「演習 @1,3」の行はその数でだけ）。変異体が少ない理由の行（FEW）は含めない。"""
    return {(ex, label): reason for ex, counts, label, reason in _table(path)
            if label != FEW and (counts is None or devices in counts)}


def load_equivalent_at_fewer(path: Path = EQUIVALENT_FILE) -> dict[tuple[str, str, int], str]:
    """「演習 @1,3 | 変異の説明 | 理由」の行: (演習, 説明, デバイスの数) -> 理由（8 で見抜き、その数では等価）。"""
    return {(ex, label, n): reason for ex, counts, label, reason in _table(path) if counts for n in counts}


def load_few(path: Path = EQUIVALENT_FILE) -> dict[str, str]:
    """「演習 | (few mutants) | 理由」の行: 変異体が MIN_MUTANTS より少なくてよい演習と、その理由。"""
    return {ex: reason for ex, _, label, reason in _table(path) if label == FEW}


def per_exercise(outcomes: list[Outcome]) -> dict[str, list[Outcome]]:
    """演習ごとの結果（演習の番号の順）。"""
    from collections import defaultdict

    per = defaultdict(list)
    for o in outcomes:
        per[o.exercise].append(o)
    return {ex: per[ex] for ex in sorted(per, key=_order)}


def _order(ex: str):
    return [(0, int(x), "") if x.isdigit() else (1, 0, x) for x in re.findall(r"\d+|[a-z]+", ex)]


def too_few(outcomes: list[Outcome], few: dict[str, str] | None = None) -> dict[str, int]:
    """数えた変異体が MIN_MUTANTS より少なく、理由も書いていない演習 -> 変異体の数。"""
    few = load_few() if few is None else few
    counts = {ex: sum(o.status != "broken" for o in os_) for ex, os_ in per_exercise(outcomes).items()}
    return {ex: n for ex, n in counts.items() if n < MIN_MUTANTS and ex not in few}


def run_notebook(path: Path, equivalent: dict | None = None, only: set[tuple[str, str]] | None = None,
                 exercises: set[str] | None = None) -> list[Outcome]:
    """解答ノートブック 1 冊の全変異体をチェックに通す（1 つのインタプリタで、ノートブックは 1 度だけ実行）。
    only: (演習, 変異の説明) の組のものだけ、exercises: その演習のものだけを試す。等価の表は今のデバイスの数で読む。"""
    os.environ["CH6_GRADING"] = "1"  # ノートブックの ch6.check は何もしない
    ns: dict = {"__name__": "__main__"}
    results: list[Outcome] = []
    try:
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink):
            cells = code_cells(path)
            for src in cells:
                try:
                    exec(compile(_python(src), f"<{path.name}>", "exec"), ns)
                except Exception:  # わざとエラーを出すセル（古い書き方）: 続ける
                    pass
            if equivalent is None:
                import jax

                equivalent = load_equivalent(devices=jax.device_count())
            for src in cells:
                if "### BEGIN SOLUTION" not in src:
                    continue
                ex_id, fn_name = CHECK.search(src).groups()
                made = [m for m in _mutants(src) if (exercises is None or ex_id in exercises)
                        and (only is None or (ex_id, m[1]) in only)]
                if not made:
                    continue
                base = _run(ns, src, ex_id, fn_name)
                if base.status != "pass":
                    raise RuntimeError(f"{path.name} {ex_id}: the reference itself does not pass: {base.message}")
                for op, label, text, line in made:
                    out = _run(ns, text, ex_id, fn_name)
                    out.label, out.operator, out.line = label, op, line
                    out.equivalent = equivalent.get((ex_id, label))
                    results.append(out)
    finally:
        os.environ.pop("CH6_GRADING", None)
    return results


def code_cells(path: Path) -> list[str]:
    """ノートブックのコードセルのソース（JSON を直接読む: nbformat は読み込むだけで数秒かかる）。"""
    import json

    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in nb["cells"] if c["cell_type"] == "code"]


def _python(src: str) -> str:
    """IPython のマジック（%、!）の行を取り除いた Python。"""
    return "\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!")))


def _run(ns: dict, src: str, ex_id: str, fn_name: str) -> Outcome:
    import ch6

    start = time.process_time()
    local = dict(ns)
    local.update(RUNTIME)
    try:
        exec(compile(_python(src), "<mutant>", "exec"), local)
    except Exception as exc:  # 変異体が定義の時点で壊れた（これも見抜いたことにはしない: 数えない）
        return Outcome(ex_id, "", "broken", f"{type(exc).__name__}: {exc}")
    res = ch6.run_check(ex_id, local[fn_name])
    return Outcome(ex_id, "", res.status, res.message, seconds=time.process_time() - start)


def weak_exercises(outcomes: list[Outcome], min_score: float) -> dict[str, float]:
    """自分の変異体だけで数えたスコアが min_score に届かない演習（新しい演習の生き残りが、節の全体のスコアに
    埋もれないように）。"""
    return {ex: s for ex, os_ in per_exercise(outcomes).items() if (s := score(os_)[3]) < min_score}


def score(outcomes: list[Outcome]) -> tuple[int, int, int, float]:
    counted = [o for o in outcomes if o.status != "broken"]
    eq = [o for o in counted if not o.killed and o.equivalent]
    killed = [o for o in counted if o.killed]
    denom = len(counted) - len(eq)
    return len(killed), len(counted), len(eq), (len(killed) / denom if denom else 1.0)


def report(outcomes: list[Outcome], few: dict[str, str] | None = None) -> str:
    """演習ごとの表（見抜いた数 / 数えた変異体の数）、生き残った変異体、全体のスコア。"""
    few = load_few() if few is None else few
    lines = [f"{'exercise':10s} {'killed/total':>12s} {'survived':>8s} {'equiv':>5s} {'broken':>6s}"]
    for ex, os_ in per_exercise(outcomes).items():
        total = sum(o.status != "broken" for o in os_)
        k = sum(o.killed and o.status != "broken" for o in os_)
        e = sum((not o.killed) and bool(o.equivalent) for o in os_)
        s = sum((not o.killed) and not o.equivalent for o in os_)
        b = sum(o.status == "broken" for o in os_)
        note = ""
        if total < MIN_MUTANTS:
            note = f"  few mutants: {few[ex]}" if ex in few else f"  FEW MUTANTS (< {MIN_MUTANTS}, no reason given)"
        lines.append(f"{ex:10s} {f'{k}/{total}':>12s} {s:8d} {e:5d} {b:6d}{note}")
    for o in outcomes:
        if not o.killed and not o.equivalent:
            lines.append(f"  SURVIVED {o.exercise} | {o.label}")
    killed, total, eq, sc = score(outcomes)
    lines.append(f"mutation score: {killed}/{total - eq} = {sc:.1%} (mutants {total}, equivalent {eq})")
    return "\n".join(lines)


# ---------------------------------------------------------------- 少ないデバイスでもう一度（1 つの数に 1 プロセス）

FEWER_DEVICES = (3, 1)  # 8 で見抜いた変異体を、この数のデバイスでもう一度チェックに通す


def run_at(devices: int, paths: list[Path], only: set[tuple[str, str]] | None = None,
           jobs: int = 2) -> list[Outcome]:
    """子プロセス（JAX_NUM_CPU_DEVICES=devices）で paths の変異体をチェックに通す（only: その組だけ）。"""
    return run_at_counts([devices], paths, only, jobs)[devices]


def run_at_counts(counts: Iterable[int], paths: list[Path], only: set[tuple[str, str]] | None = None,
                  jobs: int = 2) -> dict[int, list[Outcome]]:
    """デバイスの数ごとに子プロセスを 1 つ（jobs 個まで同時に）起動して変異体を試し、数 -> 結果。"""
    import json
    import subprocess
    import tempfile

    counts = list(counts)
    results: dict[int, list[Outcome]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        chosen = Path(tmp) / "only.json"
        chosen.write_text(json.dumps(sorted(only or [])), encoding="utf-8")
        running: list[tuple[int, subprocess.Popen, Path]] = []

        def finish(count, proc, out):
            _, err = proc.communicate()
            if proc.returncode != 0:
                raise RuntimeError(f"tools/mutate.py --devices {count} failed:\n{err[-4000:]}")
            results[count] = [Outcome(**row) for row in json.loads(out.read_text(encoding="utf-8"))]

        for count in counts:
            out = Path(tmp) / f"at{count}.json"
            cmd = [sys.executable, str(Path(__file__).resolve()), *map(str, paths), "--devices", str(count),
                   "--json", str(out)] + (["--only", str(chosen)] if only is not None else [])
            if len(running) >= jobs:
                finish(*running.pop(0))
            running.append((count, subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                                    text=True, cwd=ROOT), out))
        for item in running:
            finish(*item)
    return results


@dataclasses.dataclass
class Survivor:
    """8 で見抜いたのに、少ないデバイスで ✅ になった変異体と、その扱い。"""

    devices: int
    outcome: Outcome
    why: str  # "said"（✅ の行が確かめられないと断る）、"equivalent"（その数で等価と表にある）、"" （説明なし）

    @property
    def explained(self) -> bool:
        return bool(self.why)


def fewer_devices_survivors(at: dict[int, list[Outcome]], equivalent_at: dict | None = None) -> list[Survivor]:
    """少ないデバイスで生き残った変異体: ✅ の行が CANNOT_TELL の句で断っているか、表に「演習 @数」で等価とあるか。"""
    from ch6.checking import CANNOT_TELL

    equivalent_at = load_equivalent_at_fewer() if equivalent_at is None else equivalent_at
    rows = []
    for devices, outcomes in sorted(at.items(), reverse=True):
        for o in outcomes:
            if o.killed:
                continue
            why = ("said" if CANNOT_TELL in o.message
                   else "equivalent" if (o.exercise, o.label, devices) in equivalent_at else "")
            rows.append(Survivor(devices, o, why))
    return rows


def fewer_devices_report(killed: int, at: dict[int, list[Outcome]], survivors: list[Survivor]) -> str:
    """演習ごとに、8 で見抜いて少ないデバイスで生き残った変異体（デバイスの数、演算子、行、説明、扱い）。"""
    counts = ", ".join(f"{n} devices: {sum(not o.killed for o in at[n])} survive" for n in sorted(at, reverse=True))
    lines = [f"mutants killed at {SCORE_DEVICES} devices, tried again at fewer: {killed} ({counts})"]
    by_ex: dict[str, list[Survivor]] = {}
    for s in survivors:
        by_ex.setdefault(s.outcome.exercise, []).append(s)
    for ex in sorted(by_ex, key=_order):
        rows = by_ex[ex]
        bad = sum(not s.explained for s in rows)
        lines.append(f"{ex:8s} {len(rows):3d} survive at fewer devices, {bad} unexplained")
        for s in rows:
            o = s.outcome
            mark = {"said": "said in ✅", "equivalent": "equivalent"}.get(s.why, "UNEXPLAINED")
            lines.append(f"  {mark:12s} {s.devices} dev | {o.exercise} | {o.operator} | line {o.line} | {o.label}")
    internal = [(n, o) for n, os_ in at.items() for o in os_ if o.status == "internal"]
    for n, o in internal:
        lines.append(f"  CHECKER ERROR at {n} devices | {o.exercise} | {o.label} :: {o.message[:120]}")
    return "\n".join(lines)


def main(argv=None) -> int:
    import json

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--min-score", type=float, default=0.95)
    ap.add_argument("--operators", action="store_true", help="print the operator table and exit")
    ap.add_argument("--verbose", action="store_true", help="print every mutant's status and the check's message")
    ap.add_argument("--exercise", action="append", help="only this exercise's mutants (repeatable), e.g. 6.3b-2")
    ap.add_argument("--devices", type=int, help="simulated CPU devices (JAX_NUM_CPU_DEVICES; default: the setup's 8)")
    ap.add_argument("--fewer", action="store_true",
                    help=f"then try the mutants killed here again at {', '.join(map(str, FEWER_DEVICES))} devices "
                         "(one process per count) and report the survivors by exercise")
    ap.add_argument("--only", type=Path, help="a JSON list of [exercise, label]: only those mutants (no score)")
    ap.add_argument("--json", type=Path, help="write every outcome to this JSON file")
    args = ap.parse_args(argv)
    if args.operators:
        print(operator_table())
        return 0
    if args.devices:  # JAX を読み込む前に（ノートブックの ch6.setup() は setdefault なので、これが勝つ）
        os.environ["JAX_NUM_CPU_DEVICES"] = str(args.devices)
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    paths = [Path(p) for p in args.paths] or sorted((ROOT / "solutions").glob("*.ipynb"))
    only = {tuple(pair) for pair in json.loads(args.only.read_text(encoding="utf-8"))} if args.only else None
    exercises = set(args.exercise) if args.exercise else None
    outcomes = []
    for p in paths:
        start = time.perf_counter()
        outcomes += run_notebook(p, only=only, exercises=exercises)
        print(f"{p.name}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(o) for o in outcomes], ensure_ascii=False),
                             encoding="utf-8")
    if args.verbose:
        for o in outcomes:
            print(f"{o.exercise:8s} {o.status:7s} {o.operator:22s} {o.label} :: {o.message[:150]}")
    if only is not None:  # 選んだ変異体だけ: スコアは数えない
        return 0
    print(report(outcomes))
    rc = 0
    if args.fewer:
        killed = {(o.exercise, o.label) for o in outcomes if o.killed and o.status != "broken"}
        start = time.perf_counter()
        at = run_at_counts(FEWER_DEVICES, paths, killed)
        print(f"fewer devices: {time.perf_counter() - start:.1f} s", file=sys.stderr)
        survivors = fewer_devices_survivors(at)
        print(fewer_devices_report(len(killed), at, survivors))
        rc = int(any(not s.explained for s in survivors))
    weak = weak_exercises(outcomes, args.min_score)
    if weak:
        print(f"exercises below {args.min_score:.0%} on their own: "
              + ", ".join(f"{ex} {s:.0%}" for ex, s in weak.items()), file=sys.stderr)
    return rc or (0 if score(outcomes)[3] >= args.min_score and not too_few(outcomes) and not weak else 1)


if __name__ == "__main__":
    sys.exit(main())
