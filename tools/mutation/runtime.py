"""同じ値を別の手段で作る関数（値を保つ演算子の置き換え先。変異体の名前空間に ``RUNTIME`` を入れてから実行します）。"""
from __future__ import annotations

import contextlib
import functools

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
