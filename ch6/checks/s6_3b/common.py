"""6.3b のチェックで共有するもの: 軸名、集団通信の名前の集合、隠し入力、shard_map で包む・呼ぶ、判定の小道具。"""
from __future__ import annotations

import numpy as np

from ... import meshes
from ...checking import Fail, LearnerError, call, hidden_rng, jaxpr_primitives, jaxpr_size, walk

AXIS = "x"

# jaxpr での名前（同じ演算に別名があるものはまとめる）
GATHER = {"all_gather", "all_gather_invariant", "all_gather_reduced", "all_gather_start"}
SCATTER = {"reduce_scatter", "unreduced_reduce_scatter", "reduce_scatter_start"}
PERMUTE = {"ppermute", "ppermute_start"}
ALL_TO_ALL = {"all_to_all", "ragged_all_to_all", "all_to_all_start"}
MAXMIN = {"pmax", "pmin"}
LOOPS = {"scan", "while"}


def exercise_rng(tag: int) -> np.random.Generator:
    return hidden_rng(63_200 + tag)


def section_mesh():
    return meshes.mesh_1d(AXIS)


def put(mesh, a, spec):
    import jax
    from jax.sharding import NamedSharding

    return jax.device_put(a, NamedSharding(mesh, spec))


def wrap(fn, mesh, in_specs, out_specs, *, stack: bool = False, check_vma: bool = True):
    """学習者の 1 デバイス分の関数を shard_map + jit で包む。
    stack=True なら、デバイス i の結果を出力の i 番目に積む（複製でない結果も全デバイス分見られる）。
    check_vma=False は、check_vma のエラーの後で中身を調べ直すため（何を使ったかを言うのに使う）。"""
    import jax
    from jax.sharding import PartitionSpec as P

    need_callable(fn)
    body = fn
    if stack:
        def body(*blocks):
            import jax.numpy as jnp

            return jnp.asarray(fn(*blocks))[None]
        out_specs = P(AXIS)
    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=check_vma))


def need_callable(fn) -> None:
    if not callable(fn):
        raise Fail(f"関数のはずの値が {type(fn).__name__} でした。関数そのものを渡してください。")


def run_learner(g, *args, replicated_hint: str = "", spec_hint: str = "", loose=None):
    """g を呼ぶ。shard_map がよく出すエラーは、原因を言い当てる 1 行に直す。
    loose は同じ関数を check_vma=False で包んだもの: 複製のエラーのとき、中に all_gather があるかを調べ直す。"""
    try:
        return call(g, *args)
    except LearnerError as exc:
        msg = str(exc.exc)
        if "unbound axis name" in msg or _bad_axis_assert(exc.exc):
            raise Fail(f"集団通信に渡した軸の名前がメッシュにないので、JAX が {type(exc.exc).__name__} を出しました。"
                       f"メッシュの軸の名前は '{AXIS}' です。") from None
        if "require replication" in msg or "could not infer replication" in msg:
            if loose is not None and _uses_gather(loose, args):
                raise Fail("all_gather の結果もデバイスごとに違う値として扱われるので、out_specs=P() の出力に"
                           f" check_vma がエラーを出しました。{replicated_hint}") from None
            raise Fail("out_specs=P() は「全デバイスで同じ値」という指定なのに、出力がデバイスごとに違う値のままなので、"
                       f"check_vma がエラーにしました。{replicated_hint}") from None
        if "does not match the specs of the input" in msg or "not evenly divisible" in msg:
            raise Fail("shard_map の in_specs が、渡された配列のシャーディングと合っていません。"
                       f"{spec_hint or 'チェックが渡す配列のシャーディングをそのまま in_specs に書いてください。'}") from None
        if "shard_map in_specs" in msg and "list" in msg and "tuple" in msg:
            raise Fail("in_specs がリスト [...] なので、shard_map が受け付けません。引数の並びと同じ形のタプル（P(...), P(...)）で書きます。") from None
        if "out_specs" in msg and "too long" in msg:
            raise Fail("出力の次元が out_specs より少なくなっています。shard_map は次元を保つので、シャードは入力と同じ次元数で返します。") from None
        raise


def without_vma_check(f):
    """f を呼ぶ間だけ jax.shard_map の check_vma を既定で False にした版（学習者が自分で shard_map を呼ぶ問題で、
    check_vma のエラーの後に中身を調べ直すため。学習者が check_vma を渡していれば、それを使う）。"""
    import functools

    import jax

    def relaxed(*args):
        real = jax.shard_map

        @functools.wraps(real)
        def loose_map(*a, **kw):
            kw.setdefault("check_vma", False)
            return real(*a, **kw)

        jax.shard_map = loose_map
        try:
            return f(*args)
        finally:
            jax.shard_map = real

    return relaxed


def _uses_gather(loose, args) -> bool:
    """check_vma=False で包んだ学習者の関数の jaxpr に all_gather があるか（調べられなければ False）。"""
    try:
        return bool(jaxpr_primitives(loose, *args) & GATHER)
    except Exception:
        return False


def _bad_axis_assert(err: BaseException) -> bool:
    """psum などに知らない軸名を渡すと、JAX 0.12 は中身のない AssertionError（pvary の中）を出す。
    JAX の内部フレームはトレースバックから消されるので、「中身が空」で見分ける。"""
    return isinstance(err, AssertionError) and not str(err).strip()


def collectives_of(g, *args) -> dict[str, int]:
    from ...hlo import count_collectives

    try:
        return count_collectives(g, *args)
    except Exception as exc:  # 呼び出しは通ったのでここで落ちることはまずない
        raise LearnerError(exc) from exc


def gathered_sizes(g, *args) -> list[int]:
    """jaxpr の all_gather が集めている値の、1 デバイス分の要素数（統計量か、データそのものかを見分ける）。
    g は同じ引数で一度トレースできているので、ここで学習者のコードが新しく失敗することはない。"""
    import jax

    try:
        jaxpr = jax.make_jaxpr(g)(*args).jaxpr
    except Exception as exc:
        raise LearnerError(exc) from exc
    return [int(np.prod(getattr(eqn.invars[0].aval, "shape", ()) or (1,)))
            for eqn in walk(jaxpr) if eqn.primitive.name in GATHER and eqn.invars]


def expect_no_row_loop(make_call, sizes=(2, 5), what="行数"):
    """行数を変えても jaxpr の式の数が変わらず、scan / while もないこと。"""
    counts = [jaxpr_size(*make_call(s)) for s in sizes]
    if counts[0] != counts[1]:
        raise Fail(f"{what}を {sizes[0]} から {sizes[1]} にすると jaxpr の式の数が {counts[0]} から {counts[1]} に増えたので、"
                   "行を Python のループで処理しています。シャード全体を一度に計算してください。")
    prims = jaxpr_primitives(*make_call(sizes[1]))
    if prims & LOOPS:
        raise Fail(f"jaxpr に {', '.join(sorted(prims & LOOPS))} があるので、行を 1 つずつ回しています。"
                   "シャード全体を一度に計算してください。")


def forbid(prims: set[str], names: set[str], message: str) -> None:
    if prims & names:
        raise Fail(message)


def gather_message(sizes: list[int], stat_size: int, data_msg: str, stat_msg: str) -> str:
    """all_gather を使った答えへの 1 行: データそのものを集めたのか、小さな統計量を集めたのか。"""
    return data_msg if any(s > stat_size for s in sizes) else stat_msg
