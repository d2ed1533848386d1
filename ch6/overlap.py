"""通信と計算を重ねる部品（6.11 節）: collective matmul と、勾配のバケットごとの all-reduce。

レッスンとテストが同じものを使います。集団通信を使う関数は ``jax.shard_map`` の中で呼び、``axis`` はメッシュの
軸名です。軸の大きさを n とします。

- :func:`allgather_matmul`: 行で分割した x を all-gather してから w を掛ける計算を、``lax.all_gather`` を使わずに
  書いたもの。x のシャードをリングの隣へ ``lax.ppermute`` で送りながら、届いたシャードから順に掛けます。
  ``direction="two"`` はシャードの半分を右回り、残りを左回りに送ります（双方向。ステップが約半分になります）
- :func:`matmul_reducescatter`: ``lax.psum_scatter(x @ w)`` を、部分和をリングで送りながら足していく形に
  書いたもの
- :func:`bucketed_psum`: 勾配の木の葉を、連続する葉ごとのバケットにまとめ、バケットごとに 1 回の ``lax.psum``
  で足す。:func:`buckets` はそのまとめ方（純粋な Python）、:func:`leaf_buckets` は木の葉への当てはめ
- :func:`schedule`: 各ステップで各デバイスが掛けるシャードと送るシャード（純粋な Python。図とテストのため）。
  :func:`trace` は同じリングにデバイスの番号を流し、コードが実際に掛けたシャードを返す
- :func:`uncombined_text`: all-reduce をまとめる XLA のパスを止めてコンパイルした HLO。XLA は小さな all-reduce を
  1 つにまとめる（コンパイラが行うバケット化）ので、既定の HLO ではバケットの数だけの all-reduce は見えません

リングの各ステップで送るのは、そのステップで掛けているのと同じシャード（または前のステップまでの部分和）です。
送信と行列積の間に依存関係がないので、XLA のスケジューラは 2 つを同時に進められます。one（一方向）では
n 回の行列積の間に n − 1 回の ``ppermute`` が入り、all-gather の通信は最初の行列積の裏から始まります。
秒の見積もりは :func:`ch6.cost.collective_matmul_times` と :func:`ch6.cost.bucketed_allreduce_time` です。

形の約束（all-gather の形）::

    x: (m, K)      このデバイスのシャード（全体 (n·m, K) の行 d·m から (d + 1)·m）
    w: (K, N/n)    このデバイスが持つ w の列のシャード
    戻り値: (n·m, N/n) = all_gather(x, tiled=True) @ w

reduce-scatter の形::

    x: (M, K/n)、w: (K/n, N)。戻り値: (M/n, N) = psum_scatter(x @ w, scatter_dimension=0, tiled=True)
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple

Direction = Literal["one", "two"]
Form = Literal["allgather", "reducescatter"]


class Step(NamedTuple):
    """リングの 1 ステップ（すべてのデバイスが同時に進む）。"""

    multiply: tuple[tuple[int, ...], ...]          # multiply[d]: デバイス d がこのステップで掛けるシャードの番号
    send: tuple[tuple[tuple[int, int], ...], ...]  # send[d]: このステップの間に送る (シャードの番号, 送信先) の並び


def ring_counts(n: int, direction: Direction = "one") -> tuple[int, int]:
    """各デバイスに右回り・左回りで届くシャードの数 (R, L)。R + L = n − 1。

    one: (n − 1, 0)。two: R = ⌈(n − 1)/2⌉、L = ⌊(n − 1)/2⌋。n が偶数のとき、ちょうど反対側のシャードは右回りで
    届きます（左回りのリンクは最後のステップで空きます）。ステップの数は R + 1、``ppermute`` は R + L 回。"""
    if int(n) != n or n < 1:
        raise ValueError(f"デバイスの数 n は 1 以上の整数です: {n!r}")
    if direction == "one":
        return n - 1, 0
    if direction == "two":
        return n // 2, (n - 1) // 2
    raise ValueError(f"direction は 'one' か 'two' です: {direction!r}")


def schedule(n: int, direction: Direction = "one", form: Form = "allgather") -> list[Step]:
    """リングのステップごとに、各デバイスが掛けるシャードと送るシャード（JAX を使わない）。

    ``"allgather"``（:func:`allgather_matmul`）: ステップ s（0 始まり）でデバイス d が持つのは、右回りで届いた
    シャード (d − s) mod n と、s ≤ L なら左回りで届いた (d + s) mod n（s = 0 は d のシャードだけ）。掛けると同時に、
    同じシャードを次のデバイスへ送ります（右回りは s < R の間、左回りは s < L の間）。

    ``"reducescatter"``（:func:`matmul_reducescatter`、one だけ）: ステップ s でデバイス d は、出力の行のシャード
    c = (d − 1 − s) mod n への寄与（x の行 c と w の積）を計算し、届いた部分和に足して d + 1 へ送ります。
    送るのは足した後の値なので、この送信は次のステップの行列積と重なります。最後のステップ（s = n − 1）では
    c = d になり、送りません。"""
    right, left = ring_counts(n, direction)
    if form == "reducescatter":
        if direction != "one":
            raise ValueError("reducescatter の形は direction='one' だけです")
        return [Step(tuple(((d - 1 - s) % n,) for d in range(n)),
                     tuple(((((d - 1 - s) % n), (d + 1) % n),) if s < n - 1 else () for d in range(n)))
                for s in range(n)]
    if form != "allgather":
        raise ValueError(f"form は 'allgather' か 'reducescatter' です: {form!r}")
    steps = []
    for s in range(right + 1):
        multiply, send = [], []
        for d in range(n):
            held = [d] if s == 0 else [(d - s) % n] + ([(d + s) % n] if s <= left else [])
            out = [((d - s) % n, (d + 1) % n)] if s < right else []
            if s < left:
                out.append(((d + s) % n, (d - 1) % n))
            multiply.append(tuple(held))
            send.append(tuple(out))
        steps.append(Step(tuple(multiply), tuple(send)))
    return steps


def _shift(n: int, by: int) -> list[tuple[int, int]]:
    """``lax.ppermute`` の perm: 各デバイス j が (j + by) mod n へ送る。"""
    return [(j, (j + by) % n) for j in range(n)]


def _ring_gather(x, axis: str, direction: Direction, visit) -> None:
    """x のシャードを :func:`schedule` のとおりに送り、掛けるシャードごとに visit(s, shard, c) を呼ぶ。

    c はそのシャードの番号（送信元のデバイスの番号）。次のシャードの ``ppermute`` は前のシャードだけに依存し、
    visit の結果には依存しません。"""
    from jax import lax

    n = lax.axis_size(axis)
    me = lax.axis_index(axis)
    right_n, left_n = ring_counts(n, direction)
    visit(0, x, me)
    right = left = x
    for s in range(1, right_n + 1):
        right = lax.ppermute(right, axis, _shift(n, 1))
        visit(s, right, (me - s) % n)
        if s <= left_n:
            left = lax.ppermute(left, axis, _shift(n, -1))
            visit(s, left, (me + s) % n)


def allgather_matmul(x, w, axis: str, direction: Direction = "one"):
    """``all_gather(x, axis, tiled=True) @ w`` を、all-gather を使わずに計算する（``jax.shard_map`` の中で呼ぶ）。

    x: (m, K) はこのデバイスの行のシャード、w: (K, N/n) はこのデバイスの列のシャード。戻り値は (n·m, N/n)
    （出力の列のシャード。行は全体）。届いたシャード c と w の積を、出力の行 c·m から (c + 1)·m に書きます。
    direction="one" は n 回の行列積と n − 1 回の一方向の ``ppermute``。"two" は右回りと左回りに送り、
    ステップは ⌈(n − 1)/2⌉ + 1 回、そのうち送信のあるステップは ⌈(n − 1)/2⌉ 回（n が偶数なら n/2 回、
    :func:`schedule`）。n = 1 なら ``ppermute`` はなく x @ w だけです。"""
    import jax.numpy as jnp
    from jax import lax

    m = x.shape[0]
    n = lax.axis_size(axis)
    out = jnp.zeros((n * m, w.shape[1]), jnp.result_type(x, w))

    def place(s, shard, c):
        nonlocal out
        out = lax.dynamic_update_slice_in_dim(out, shard @ w, c * m, axis=0)

    _ring_gather(x, axis, direction, place)
    return out


def _ring_reduce(axis: str, part, visit=None):
    """出力の行のシャード c への寄与 part(c) を、部分和をリングで右へ送りながら足す。最後の和を返す。

    ステップ s の寄与 part(c) は届いた部分和に依存しないので、送信（``ppermute``）と同時に計算できます。"""
    from jax import lax

    n = lax.axis_size(axis)
    me = lax.axis_index(axis)
    acc = part((me - 1) % n)
    if visit is not None:
        visit(0, acc, (me - 1) % n)
    for s in range(1, n):
        c = (me - 1 - s) % n
        acc = lax.ppermute(acc, axis, _shift(n, 1)) + part(c)
        if visit is not None:
            visit(s, acc, c)
    return acc


def matmul_reducescatter(x, w, axis: str):
    """``lax.psum_scatter(x @ w, axis, scatter_dimension=0, tiled=True)`` を、部分和をリングで送って計算する。

    ``jax.shard_map`` の中で呼びます。x: (M, K/n) と w: (K/n, N) は縮約する軸 K で分割したシャード。
    戻り値は (M/n, N)（x @ w の全デバイスの和のうち、行 d·M/n から (d + 1)·M/n）。ステップ s で x の行の
    シャード c = (d − 1 − s) mod n と w の積を計算し、左隣から届いた部分和に足して右隣へ送ります（n − 1 回の
    ``ppermute``、:func:`schedule` の reducescatter）。M は n の倍数でなければなりません。"""
    from jax import lax

    n = lax.axis_size(axis)
    if x.shape[0] % n:
        raise ValueError(f"x の行の数 {x.shape[0]} が軸の大きさ {n} の倍数ではありません")
    m = x.shape[0] // n
    return _ring_reduce(axis, lambda c: lax.dynamic_slice_in_dim(x, c * m, m, axis=0) @ w)


def trace(axis: str, direction: Direction = "one", form: Form = "allgather"):
    """``jax.shard_map`` の中で呼び、:func:`schedule` と比べられる、コードが実際に行ったことを返す。

    ``"allgather"``: :func:`allgather_matmul` と同じリングに、シャードの代わりにデバイスの番号を流します。
    戻り値は 2 つの int32 の配列 (届いた番号, 書いた位置)、どちらも形 (ステップの数, 2)（掛けないところは −1）。
    届いた番号は ``ppermute`` で実際に運ばれた値、書いた位置はコードが出力の行を選ぶのに使った番号です。

    ``"reducescatter"``（one）: 寄与を、行のシャード c の one-hot（長さ n）にして足します。戻り値は形 (n, n) の
    float32 で、行 s はステップ s の後の部分和。正しい経路なら、行 s は (s + 1)·one_hot(c) です（同じ c への寄与だけが
    s + 1 個足されている）。"""
    import jax.numpy as jnp
    from jax import lax

    n = lax.axis_size(axis)
    if form == "reducescatter":
        if direction != "one":
            raise ValueError("reducescatter の形は direction='one' だけです")
        rows = []
        _ring_reduce(axis, lambda c: jnp.zeros(n, jnp.float32).at[c].set(1.0),
                     lambda s, acc, c: rows.append(acc))
        return jnp.stack(rows)
    if form != "allgather":
        raise ValueError(f"form は 'allgather' か 'reducescatter' です: {form!r}")
    right_n, _ = ring_counts(n, direction)
    arrived = [[] for _ in range(right_n + 1)]
    placed = [[] for _ in range(right_n + 1)]

    def visit(s, shard, c):
        arrived[s].append(shard[0])
        placed[s].append(jnp.asarray(c, jnp.int32))

    _ring_gather(lax.axis_index(axis).astype(jnp.int32)[None], axis, direction, visit)
    minus = jnp.asarray(-1, jnp.int32)

    def table(rows):
        return jnp.stack([jnp.stack(r + [minus] * (2 - len(r))) for r in rows])

    return table(arrived), table(placed)


def buckets(sizes_in_bytes: Sequence[int], bucket_bytes: int) -> list[list[int]]:
    """連続する葉をバケットにまとめる（葉の番号のリストのリスト）。JAX を使わない。

    前から順に、作っているバケットに足しても bucket_bytes を超えないなら足し、超えるなら新しいバケットを始めます。
    bucket_bytes より大きい葉は、それだけで 1 つのバケットになります。葉の順は変えません。"""
    if not bucket_bytes > 0:
        raise ValueError(f"bucket_bytes は正の数です: {bucket_bytes!r}")
    out: list[list[int]] = []
    current: list[int] = []
    total = 0
    for i, size in enumerate(sizes_in_bytes):
        if size < 0:
            raise ValueError(f"葉 {i} のバイト数が負です: {size!r}")
        if current and total + size > bucket_bytes:
            out.append(current)
            current, total = [], 0
        current.append(i)
        total += size
    if current:
        out.append(current)
    return out


def leaf_buckets(tree, bucket_bytes: int) -> list[list[int]]:
    """木の葉（``jax.tree.leaves`` の順）を :func:`buckets` でまとめる。dtype が変わるところでもバケットを切ります
    （1 つのバケットは 1 つの平らな配列につなぐので、dtype は 1 つ）。葉は配列でも ``jax.ShapeDtypeStruct`` でもよい。"""
    import jax
    import numpy as np

    leaves = jax.tree.leaves(tree)
    dtypes = [np.dtype(leaf.dtype) for leaf in leaves]
    sizes = [int(np.prod(leaf.shape)) * dt.itemsize for leaf, dt in zip(leaves, dtypes)]
    out: list[list[int]] = []
    start = 0
    for i in range(1, len(leaves) + 1):
        if i == len(leaves) or dtypes[i] != dtypes[start]:
            out += [[start + j for j in b] for b in buckets(sizes[start:i], bucket_bytes)]
            start = i
    return out


def bucketed_psum(grads, axis: str, bucket_bytes: int):
    """``lax.psum(grads, axis)`` と同じ木を、バケットごとに 1 回の ``lax.psum`` で求める（``jax.shard_map`` の中で）。

    葉を :func:`leaf_buckets` でまとめ、バケットの葉を平らにつないだ 1 つの配列を ``lax.psum`` で足し、元の形に
    戻します。all-reduce の数はバケットの数です。逆伝播が勾配を作った順に葉を並べておけば、最初のバケットの
    all-reduce は残りの逆伝播と重ねられます（1 回の all-reduce を最後に行うと、重ねる相手がありません）。
    XLA は既定のコンパイルで小さな all-reduce をまとめることがあります（:func:`uncombined_text`）。"""
    import jax
    import jax.numpy as jnp
    from jax import lax

    leaves, treedef = jax.tree.flatten(grads)
    leaves = [jnp.asarray(leaf) for leaf in leaves]
    out = list(leaves)
    for group in leaf_buckets(leaves, bucket_bytes):
        flat = jnp.concatenate([leaves[i].ravel() for i in group])
        total = lax.psum(flat, axis)
        offset = 0
        for i in group:
            size = leaves[i].size
            out[i] = total[offset:offset + size].reshape(leaves[i].shape)
            offset += size
    return jax.tree.unflatten(treedef, out)


#: 小さな all-reduce を 1 つにまとめる XLA のパスの名前（CPU、GPU、XLA に共通のもの）。TPU のコンパイラの中の
#: パスの名前は公開されていないので、TPU ではまとめられたままのことがあります。
COMBINER_PASSES = ("cpu-all-reduce-combiner", "gpu-all-reduce-combiner", "all-reduce-combiner")


def uncombined_text(f, *args) -> str:
    """all-reduce をまとめるパス（:data:`COMBINER_PASSES`）を止めて f をコンパイルした、最適化後の HLO テキスト。

    既定のコンパイルでは、XLA が同じ軸の all-reduce を 1 つのタプルの all-reduce にまとめます。
    止めると、プログラムが書いた ``lax.psum`` の数だけ all-reduce が残ります。"""
    import jax

    jitted = f if hasattr(f, "lower") else jax.jit(f)
    options = {"xla_disable_hlo_passes": ",".join(COMBINER_PASSES)}
    return jitted.lower(*args).compile(compiler_options=options).as_text()
