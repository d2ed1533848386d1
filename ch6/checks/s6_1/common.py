"""6.1 の演習チェックで共有する道具: 隠し乱数、形の見張り（guard）、vmap のエラーの日本語化、pytree の比較。"""
from __future__ import annotations

import numpy as np

from ... import explain
from ...checking import Fail, LearnerError, expect_close, fmt, hidden_rng


def exercise_rng(tag: int) -> np.random.Generator:
    return hidden_rng(61_000 + tag)


def shape_of(x) -> tuple | None:
    try:
        return tuple(np.shape(x))
    except Exception:
        return None


class Spy:
    """隠し関数の呼ばれた回数（渡した関数を使っているか）を数える。"""

    def __init__(self):
        self.calls = 0


def guard(fn_name: str, arg: str, value, want: tuple, hint: str) -> None:
    """隠し関数の引数が 1 サンプル分の形でなければ、何が来たかを示して不合格にする。"""
    got = shape_of(value)
    if got != want:
        raise Fail(f"{fn_name} の引数 {arg} は形 {fmt(want)} のはずが、形 {fmt(got)} で渡されました。{hint}")


def sizes_fail(exc: LearnerError, hint) -> None:
    """in_axes の誤りでよく出る 2 つの vmap のエラー（軸の長さがそろわない、軸の番号が次元を超える）を、
    どの引数のどの軸の長さがいくつかを残した日本語と、この演習のヒントにする。"""
    err = exc.exc
    if isinstance(err, ValueError) and "rank should be at least" in str(err):
        said = explain.explain(err).removeprefix(f"{type(err).__name__}: ")
        raise Fail(f"{said.split('。')[0]}。{hint(set())}") from None
    if isinstance(err, ValueError) and "inconsistent sizes" in str(err):
        parts = explain.vmap_sizes(str(err))
        listed = explain.vmap_sizes_text(str(err))
        names = {n.split("[")[0] for n, *_ in parts}
        raise Fail(f"vmap でバッチにする軸の長さがそろっていません（{listed or '長さの違う軸があります'}）。"
                   f"{hint(names)}") from None


def expect_used(fn_name: str, spy: Spy) -> None:
    if spy.calls == 0:
        raise Fail(f"チェックが渡した別の {fn_name} が一度も呼ばれていません。"
                   f"例の式を写さず、引数の {fn_name} を vmap で包んで使ってください。")


def tree_close(got, want) -> bool:
    import jax

    try:
        if jax.tree.structure(got) != jax.tree.structure(want):
            return False
        return all(np.allclose(np.asarray(g, np.float64), w, rtol=1e-4, atol=1e-6)
                   for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)))
    except Exception:
        return False


def expect_tree(got, want, what: str, hint: str = "") -> None:
    """pytree の構造（辞書のキーと入れ子）を比べ、葉ごとに expect_close（どの葉かを示す）。"""
    import jax

    want_def = jax.tree.structure(want)
    try:
        got_def = jax.tree.structure(got)
    except Exception:
        got_def = None
    if got_def != want_def:
        raise Fail(f"{what}は params と同じ構造（{_describe(want)}）のはずが、{_describe(got)}でした。"
                   "jax.tree.map を使うと構造はそのまま残ります。")
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(want)[0]]
    for path, g, w in zip(paths, jax.tree.leaves(got), jax.tree.leaves(want)):
        expect_close(g, w, f"{what}の {path} ", rtol=1e-4, atol=1e-6, hint=hint)


def _describe(tree) -> str:
    if isinstance(tree, dict):
        return "辞書 {" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in tree.items()) + "}"
    if isinstance(tree, (list, tuple)):
        return f"{type(tree).__name__}（要素 {len(tree)} 個）"
    shape = getattr(tree, "shape", None)
    return f"形 {fmt(tuple(shape))} の配列" if shape is not None else f"{type(tree).__name__} の値"
