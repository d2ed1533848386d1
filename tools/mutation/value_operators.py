"""変異の演算子のうち、値を壊すもの（範囲・軸・集団通信・比較・戻り値 …）。登録の並びは意味を持ちます（下の注）。"""
from __future__ import annotations

import ast

from .ast_edits import (
    LOOP_CAP,
    STRICTNESS,
    add_kw,
    append_break,
    cap_range,
    clear_args,
    dotted,
    drop_jit,
    drop_kw,
    drop_kw_elt,
    drop_last_pair,
    flip_sign,
    flip_strictness,
    func_name,
    is_bool_expr,
    is_empty_spec,
    is_lax,
    is_numpy,
    is_pair,
    keep_arg,
    loop_text,
    move_arg,
    names,
    negate_return,
    pairs,
    replace_func,
    set_arg,
    set_attr,
    set_const,
    set_dict_value,
    set_kw,
    set_kw_elt,
    set_kw_elt_node,
    set_kw_node,
    shift_arg,
    shift_index,
    shift_kw,
    small,
    snippet,
    spec_call,
    swap_eq,
    swap_kw_elts,
    swap_pair,
    swap_returned,
)
from .registry import operator

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


# ---------------------------------------------------------------- 変異の演算子: 値を壊す
# 並びは意味を持ちます: 2 つの演算子が同じ変異体を作ったときは、先の演算子の説明が残ります
# （tools/mutants_equivalent.txt の説明と合わせるため、新しい演算子は後ろに足します）。

@operator(ast.Call)
def range_bounds(node, ctx):
    """range(...) の始まりと終わりを 1 つずらす（off-by-one）。"""
    if func_name(node.func) == "range" and isinstance(node.func, ast.Name):
        which = ["終わり"] if len(node.args) == 1 else ["始まり", "終わり"]
        for i, what in enumerate(which):
            for d in (-1, 1):
                yield f"range の{what}を {d:+d}（{snippet(node)}）", shift_arg(i, d)


@operator(ast.Call)
def local_reduce_swap(node, ctx):
    """jnp の縮約を取り違える（sum ↔ mean、max ↔ min）。"""
    name = func_name(node.func)
    if name in LOCAL_REDUCE and is_numpy(node.func):
        yield f"{name} → {LOCAL_REDUCE[name]}（{snippet(node)}）", set_attr(LOCAL_REDUCE[name])


@operator(ast.Call)
def builtin_min_max(node, ctx):
    """組み込みの max と min を入れ替える。"""
    name = func_name(node.func)
    if name in ("max", "min") and isinstance(node.func, ast.Name) and node.args:
        other = "min" if name == "max" else "max"
        yield f"組み込みの {name} → {other}（{snippet(node)}）", replace_func(other)


@operator(ast.Call)
def drop_collective(node, ctx):
    """集団通信を外す（通信しない）、引数で受け取った軸の名前を決め打ちの文字列にする。"""
    name = func_name(node.func)
    if name in DROPPABLE and is_lax(node.func) and node.args:
        yield f"{name} を外す（通信しない）", keep_arg(0)
        if len(node.args) > 1 and isinstance(node.args[1], ast.Name):
            yield f"{name}: 軸の名前 {node.args[1].id} を決め打ちの文字列に", set_arg(1, node.args[1].id)


@operator(ast.Call)
def drop_out_sharding(node, ctx):
    """out_sharding= を外す。"""
    if any(kw.arg == "out_sharding" for kw in node.keywords):
        yield f"{func_name(node.func)}: out_sharding= を外す", drop_kw("out_sharding")


@operator(ast.Call)
def clamp_bounds(node, ctx):
    """切り詰めの境目: minimum ↔ maximum、floor ↔ ceil、定数の境目を外す。"""
    name = func_name(node.func)
    if name in BOUNDS and is_numpy(node.func):
        yield f"{name} → {BOUNDS[name]}（{snippet(node)}）", set_attr(BOUNDS[name])
        if name in ("minimum", "maximum") and len(node.args) == 2:
            for i, a in enumerate(node.args):
                if isinstance(a, ast.Constant):  # minimum(1.0, r) -> r
                    yield f"境目 {ast.unparse(a)} を外す（{snippet(node)}）", keep_arg(1 - i)


@operator(ast.Call)
def clip_bounds(node, ctx):
    """clip の上限・下限を外す。"""
    if func_name(node.func) != "clip":
        return
    for i, what in ((1, "下限"), (2, "上限")):
        if len(node.args) > i and not (isinstance(node.args[i], ast.Constant) and node.args[i].value is None):
            yield f"clip の{what}を外す（{snippet(node)}）", set_arg(i, None)
    for kw in node.keywords:
        if kw.arg in ("min", "max", "a_min", "a_max"):
            yield f"clip の {kw.arg}= を外す（{snippet(node)}）", drop_kw(kw.arg)


@operator(ast.Call)
def axis_kwargs(node, ctx):
    """どの呼び出しでも axis= / scatter_dimension= / split_axis= / concat_axis= を 1 つずらす、縮約の軸を外す・1 つ落とす。"""
    name = func_name(node.func)
    for kw in node.keywords:
        if kw.arg not in AXIS_KWARGS:
            continue
        v = kw.value
        if isinstance(v, ast.Constant) and isinstance(v.value, int) and not isinstance(v.value, bool):
            k = v.value
            for new in dict.fromkeys([k + 1, k - 1 if k > 0 else -1]):
                yield f"{name}: {kw.arg}={k} → {new}", set_kw(kw.arg, new)
            if kw.arg == "axis" and name in REDUCTIONS:
                yield f"{name}: axis={k} を外す（全体で縮約）", drop_kw("axis")
        elif isinstance(v, ast.Tuple) and all(isinstance(e, ast.Constant) for e in v.elts) and len(v.elts) >= 2:
            for i, e in enumerate(v.elts):
                yield f"{name}: {kw.arg}={ast.unparse(v)} から {e.value} を落とす", drop_kw_elt(kw.arg, i)
            if name in REDUCTIONS:
                yield f"{name}: {kw.arg}={ast.unparse(v)} を外す（全体で縮約）", drop_kw(kw.arg)


@operator(ast.Call)
def keepdims(node, ctx):
    """keepdims=True を外す。"""
    for kw in node.keywords:
        if kw.arg == "keepdims" and isinstance(kw.value, ast.Constant) and kw.value.value is True:
            yield f"{func_name(node.func)}: keepdims=True を外す", drop_kw("keepdims")


@operator(ast.Call)
def size_kwargs(node, ctx):
    """bins= / length= / size= / num_segments= など大きさの引数を 1 つずらす。"""
    for kw in node.keywords:
        if kw.arg in SIZE_KWARGS:
            for d in (-1, 1):
                yield f"{func_name(node.func)}: {kw.arg} を {d:+d}", shift_kw(kw.arg, d)


@operator(ast.Call)
def tiled_flag(node, ctx):
    """all_gather / psum_scatter の tiled= を逆にする（書いていなければ tiled=True を足す）。"""
    name = func_name(node.func)
    if name in TILED and is_lax(node.func):
        tiled = next((kw for kw in node.keywords if kw.arg == "tiled"), None)
        if tiled is None:
            yield f"{name}: tiled=True を足す", add_kw("tiled", True)
        elif isinstance(tiled.value, ast.Constant) and isinstance(tiled.value.value, bool):
            yield f"{name}: tiled={tiled.value.value} → {not tiled.value.value}", set_kw("tiled", not tiled.value.value)


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
            for i, j in pairs(entries):
                yield f"{kw.arg} の {i} 番目と {j} 番目を入れ替える", swap_kw_elts(kw.arg, i, j)
            for i, e in enumerate(entries):
                if is_empty_spec(e) and axis:
                    yield f"{kw.arg}[{i}]: P() → P({axis[0]!r})", set_kw_elt_node(kw.arg, i, spec_call(axis[0]))
        elif is_empty_spec(v) and axis:
            yield f"{kw.arg}: P() → P({axis[0]!r})", set_kw_node(kw.arg, spec_call(axis[0]))


@operator(ast.Call)
def vmap_axes(node, ctx):
    """vmap / pmap / smap の in_axes / out_axes を入れ替える・書き換える。"""
    for kw in node.keywords:
        if kw.arg not in ("in_axes", "out_axes"):
            continue
        v = kw.value
        if isinstance(v, ast.Tuple):
            for i, j in pairs(v.elts):
                yield f"{kw.arg} の {i} 番目と {j} 番目を入れ替える", swap_kw_elts(kw.arg, i, j)
            for i, e in enumerate(v.elts):
                if isinstance(e, ast.Constant) and e.value in (0, 1, None):
                    new = {0: None, 1: 0, None: 0}[e.value]
                    yield f"{kw.arg}[{i}]: {e.value} → {new}", set_kw_elt(kw.arg, i, new)
        elif isinstance(v, ast.Constant) and v.value in (0, 1, None):
            new = {0: 1, 1: 0, None: 0}[v.value]
            yield f"{kw.arg}: {v.value} → {new}", set_kw(kw.arg, new)


@operator(ast.Call)
def swap_collective(node, ctx):
    """集団通信を値の違う別の集団通信にする（psum → pmean / pmax など）。"""
    name = func_name(node.func)
    if name in SWAP_TO and is_lax(node.func):
        for other in SWAP_TO[name]:
            yield f"{name} → {other}", set_attr(other)


@operator(ast.Call)
def vmap_to_loop(node, ctx):
    """jax.vmap(f)(xs) を、バッチを 1 件ずつ回す Python のループ（jnp.stack([f(x) for x in xs])）にする。"""
    if dotted(node.func) == "jax.vmap":
        yield "vmap → Python のループ", replace_func("loop_vmap")


@operator(ast.Call)
def partition_spec(node, ctx):
    """P(...) の軸の名前を None にする・別の位置へ動かす、P()（複製）にする。"""
    if func_name(node.func) not in ("P", "PartitionSpec") or not node.args:
        return
    args, text = node.args, ast.unparse(node)
    for i, a in enumerate(args):
        if isinstance(a, ast.Constant) and isinstance(a.value, str):
            yield f"{text}: {a.value!r} → None", set_arg(i, None)
            for j in range(len(args)):
                if j != i:
                    yield f"{text}: {a.value!r} を {j} 番目の軸へ", move_arg(i, j)
            if len(args) == 1:
                yield f"{text}: {a.value!r} を 1 番目の軸へ", move_arg(0, 1)
    if any(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in args):
        yield f"{text} → P()（複製）", clear_args


@operator(ast.Call)
def axis_index_zero(node, ctx):
    """lax.axis_index を 0 にする（全デバイスが 0 番のつもり）。"""
    if dotted(node.func) in ("lax.axis_index", "jax.lax.axis_index"):
        yield "axis_index を 0 に（全デバイスが 0 番のつもり）", lambda n: ast.Constant(0)


@operator(ast.Call)
def jit_per_call(node, ctx):
    """jax.jit(f, ...) を、呼ぶたびに新しい関数を jit し直すもの（毎回トレースとコンパイル）にする。"""
    if dotted(node.func) == "jax.jit" and node.args and id(node) not in ctx.lowered:  # jax.jit(f).lower(…) は呼ばない
        yield f"jit を呼ぶたびに作り直す（{snippet(node)}）", replace_func("rejit_each_call")


@operator(ast.Subscript)
def index_shift(node, ctx):
    """整数の添字を 1 つずらす（shape[0] → shape[1] など。負にはしない）。"""
    s = node.slice
    if isinstance(s, ast.Constant) and isinstance(s.value, int) and not isinstance(s.value, bool) and s.value >= 0:
        for d in (-1, 1):
            if s.value + d >= 0:
                yield f"添字を {d:+d}（{snippet(node)}）", shift_index(d)


@operator(ast.ListComp)
def ppermute_pairs(node, ctx):
    """ppermute の組: 送信元と送信先を入れ替える、組を 1 つ落とす。"""
    if ctx.has_ppermute and is_pair(node.elt):
        yield f"ppermute の組の送信元と送信先を入れ替える（{snippet(node)}）", swap_pair
        yield f"ppermute の組を 1 つ落とす（{snippet(node)}）", drop_last_pair


@operator(ast.UnaryOp)
def drop_sign(node, ctx):
    """名前につけた負の符号を外す（-x → x）。"""
    if isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Name):
        yield f"符号を外す（{ast.unparse(node)}）", lambda n: n.operand


@operator(ast.BinOp)
def update_direction(node, ctx):
    """更新 p - lr * g の向きを逆にする。"""
    if (isinstance(node.op, ast.Sub) and isinstance(node.right, ast.BinOp) and isinstance(node.right.op, ast.Mult)
            and names(node.right) & LR_NAMES):
        yield f"更新の向きを逆にする（{snippet(node)}）", flip_sign


@operator(ast.BinOp)
def drop_division(node, ctx):
    """割り算を消す（a / b → a）。"""
    if isinstance(node.op, ast.Div):
        yield f"割り算を消す（{snippet(node)}）", lambda n: n.left


@operator(ast.BinOp)
def drop_small_term(node, ctx):
    """小さな定数（eps など）の足し算を消す。"""
    if isinstance(node.op, ast.Add) and small(node.right):
        yield f"小さな項を消す（{snippet(node)}）", lambda n: n.left


@operator(ast.BinOp)
def ring_direction(node, ctx):
    """デバイスの番号の足し引き（i + shift など）の向きを逆にする、1 つ余分にずらす。"""
    if isinstance(node.op, (ast.Add, ast.Sub)) and names(node) & PERM_NAMES:
        yield f"向きを逆にする（{snippet(node)}）", flip_sign
        yield f"1 つ余分にずらす（{snippet(node)}）", lambda n: ast.BinOp(left=n, op=ast.Add(), right=ast.Constant(1))


@operator(ast.Compare)
def negate_compare(node, ctx):
    """== と != を入れ替える。"""
    if len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
        yield f"条件を逆にする（{snippet(node)}）", swap_eq


@operator(ast.Compare)
def compare_strictness(node, ctx):
    """境目の比較を入れ替える（< ↔ <=、> ↔ >=）。"""
    if len(node.ops) == 1 and isinstance(node.ops[0], tuple(STRICTNESS)):
        yield f"境目を入れ替える（{snippet(node)}）", flip_strictness


@operator(ast.FunctionDef)
def drop_jit_decorator(node, ctx):
    """@jax.jit を外す。"""
    if any(ast.unparse(d) == "jax.jit" for d in node.decorator_list):
        yield f"@jax.jit を外す（{node.name}）", drop_jit


@operator(ast.Return)
def swap_return(node, ctx):
    """返すタプルの最初の 2 つを入れ替える。"""
    if isinstance(node.value, ast.Tuple) and len(node.value.elts) >= 2:
        yield "返すタプルの順番を入れ替える", swap_returned


@operator(ast.Return)
def other_answer(node, ctx):
    """選択式の答え（'a'〜'd'）を別の記号にする。"""
    if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
        for other in "abcd":
            if other != node.value.value:
                yield f"答え {node.value.value!r} → {other!r}", set_const(other)


@operator(ast.Dict)
def dict_answers(node, ctx):
    """辞書の答え（文字列の値）を、同じ辞書のほかの値にする。"""
    values = {v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)}
    for k, v in enumerate(node.values):
        if isinstance(v, ast.Constant) and isinstance(v.value, str):
            for other in sorted(values - {v.value}):
                yield f"{ast.unparse(node.keys[k])}: {v.value!r} → {other!r}", set_dict_value(k, other)


@operator(ast.Return)
def flip_bool_return(node, ctx):
    """返す真偽を逆にする（return True ↔ False、比較や and / or を返すなら not をつける。== と != は negate_compare）。"""
    v = node.value
    if isinstance(v, ast.Constant) and isinstance(v.value, bool):
        yield f"return {v.value} → return {not v.value}", set_const(not v.value)
    elif is_bool_expr(v):
        yield f"返す真偽を逆にする（{snippet(v)}）", negate_return


@operator(ast.Call)
def drop_abs(node, ctx):
    """絶対値を外す（abs(x)、jnp.abs(x)、np.abs(x) → x: 差の向きを一方だけ考えてしまう）。"""
    name = func_name(node.func)
    builtin = name == "abs" and isinstance(node.func, ast.Name)
    if len(node.args) == 1 and (builtin or (name in ("abs", "absolute") and is_numpy(node.func))):
        yield f"絶対値を外す（{snippet(node)}）", keep_arg(0)


@operator(ast.For, ast.While)
def loop_once(node, ctx):
    """ループを 1 回目の終わりで抜ける（return や break をループの本体の中に書いてしまう）。"""
    yield f"ループを 1 回で抜ける（{loop_text(node)}）", append_break


@operator(ast.For)
def range_cap(node, ctx):
    """for … in range(…) の探索を 4 回（LOOP_CAP）で打ち切る（手元の小さな例の大きさまでしか調べない）。"""
    it = node.iter
    if (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
            and 1 <= len(it.args) <= 2 and not it.keywords and not isinstance(it.args[-1], ast.Constant)):
        yield f"ループを {LOOP_CAP} 回で打ち切る（{snippet(it)}）", cap_range
