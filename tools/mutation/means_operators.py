"""変異の演算子のうち、値を保って手段を変えるもの。値を壊す演算子（value_operators）の後ろに登録します：
2 つの演算子が同じ変異体を作ったときは先の演算子の説明が残るので、並びは意味を持ちます。"""
from __future__ import annotations

import ast

from . import value_operators  # noqa: F401  値を壊す演算子を先に登録する（並びは意味を持つ）
from .ast_edits import (
    add_kw_node,
    dotted,
    func_name,
    is_lax,
    kw_true,
    per_call_decorator,
    replace_func,
    set_default,
    snippet,
)
from .registry import operator

# ---------------------------------------------------------------- 変異の演算子: 値を保って手段を変える
# 結果の値は解答例と同じで、演習が教える手段（どの集団通信か、vmap / scan か、jit を 1 度だけ作るか）だけが違う。
# 置き換え先は runtime.py の「同じ値を別の手段で作る関数」（RUNTIME）で、変異体の名前空間に入れてから実行します。
# pmean ↔ psum / n の演算子はありません: lax.pmean は jaxpr でも psum と割り算なので、どのチェックにも見分けられず、
# どの問題もどちらかを禁じられません（作っても等価変異体が増えるだけです）。

@operator(ast.Call)
def collective_by_gather(node, ctx):
    """psum / pmean / pmax を、all_gather で集めてから各デバイスで足す・平均する・最大を取る形にする。"""
    name = func_name(node.func)
    if name in ("psum", "pmean", "pmax") and is_lax(node.func):
        what = {"psum": "和", "pmean": "平均", "pmax": "最大"}[name]
        yield f"{name} → all_gather + 各デバイスで{what}（{snippet(node)}）", replace_func(f"{name}_by_all_gather")


@operator(ast.Call)
def scatter_by_reduce(node, ctx):
    """psum_scatter を、psum（または all_gather + 和）してから受け持つ部分を切り出す形にする。"""
    if func_name(node.func) == "psum_scatter" and is_lax(node.func):
        yield f"psum_scatter → psum + 受け持つ部分の切り出し（{snippet(node)}）", replace_func("psum_scatter_by_psum")
        yield f"psum_scatter → all_gather + 和 + 受け持つ部分の切り出し（{snippet(node)}）", replace_func("psum_scatter_by_all_gather")


@operator(ast.Call)
def ppermute_by_gather(node, ctx):
    """ppermute を、all_gather で全部集めてから送信元の行を添字で選ぶ形にする。"""
    if func_name(node.func) == "ppermute" and is_lax(node.func):
        yield f"ppermute → all_gather + 送信元の添字（{snippet(node)}）", replace_func("ppermute_by_all_gather")


@operator(ast.Call)
def all_to_all_by_gather(node, ctx):
    """all_to_all（tiled=True）を、all_gather で集めてから受け持つ部分を切り出す形にする。"""
    if func_name(node.func) == "all_to_all" and is_lax(node.func) and kw_true(node, "tiled"):
        yield f"all_to_all → all_gather + 受け持つ部分の切り出し（{snippet(node)}）", replace_func("all_to_all_by_all_gather")


@operator(ast.Call)
def gather_by_psum(node, ctx):
    """all_gather を、自分の位置にだけ値を置いた配列の psum にする。"""
    if func_name(node.func) == "all_gather" and is_lax(node.func):
        yield f"all_gather → 自分の位置に置いて psum（{snippet(node)}）", replace_func("all_gather_by_psum")


@operator(ast.Call)
def vmap_to_lax_map(node, ctx):
    """jax.vmap(f) を lax.map（バッチを 1 件ずつ回す scan）にする。"""
    if dotted(node.func) == "jax.vmap":
        yield f"vmap → lax.map（{snippet(node)}）", replace_func("map_vmap")


@operator(ast.Call)
def scan_to_loop(node, ctx):
    """lax.scan を Python のループ（ステップの数だけ書き下したプログラム）にする。"""
    if dotted(node.func) in ("lax.scan", "jax.lax.scan"):
        yield f"scan → Python のループ（{snippet(node)}）", replace_func("loop_scan")


@operator(ast.Call)
def jit_static_arg(node, ctx):
    """jax.jit(f) の f の最後の引数を静的にする（値が変わるたびにコンパイルし直す）。"""
    if dotted(node.func) != "jax.jit" or not node.args or not isinstance(node.args[0], ast.Name):
        return
    fn = ctx.functions.get(node.args[0].id)
    if fn is None or len(fn.args.args) < 2 or any(kw.arg in ("static_argnums", "static_argnames")
                                                   for kw in node.keywords):
        return
    last = len(fn.args.args) - 1
    yield (f"jit: 引数 {fn.args.args[last].arg} を静的にする（値ごとにコンパイル）",
           add_kw_node("static_argnums", ast.Tuple([ast.Constant(last)], ast.Load())))


@operator(ast.FunctionDef)
def jit_decorator_per_call(node, ctx):
    """@jax.jit を、呼ぶたびに新しい関数を jit し直すデコレータにする。"""
    if any(ast.unparse(d) == "jax.jit" for d in node.decorator_list):
        yield f"@jax.jit を呼ぶたびに作り直す（{node.name}）", per_call_decorator


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
        yield f"既定値 {arg.arg}={v!r} → {new!r}", set_default(field, i, new)
