"""6.3b shard_map と集団通信の演習チェック。

問題 1, 2, 4, 5 では、学習者は「1 つのデバイスが実行する関数」を書きます。チェックはそれを
``jax.shard_map``（メッシュの軸名は ``"x"``）で包み、``jax.jit`` して、その場で作る隠し入力
（デバイス数から決めた形と、ノートブックにない乱数）で呼びます。問題 3 では学習者が shard_map
の呼び出しまで書き、チェックはメッシュを渡します。

値を NumPy の参照と比べたあと、「作り方」を 2 通りで確かめます。

- jaxpr のプリミティブ: 意図した集団通信（psum / ppermute / reduce_scatter …）を使い、
  使ってはいけないもの（たとえば all_gather）を使っていないか。デバイス数によらず同じ結果になります。
  同じ演算の別名（check_vma のもとでの ``psum_invariant`` など）は同じものとして数えます。
- コンパイル済み HLO（``ch6.hlo.count_collectives``）: 2 デバイス以上のときだけ、all-gather などが
  こっそり入っていないか。1 デバイスでは XLA が通信を省くことがあるので見ません。

各問題で「必ず守ること」と「自由なこと」は、演習ノートブックの問題文に書いてあるとおりです
（書いてある制約はすべてここで確かめ、書いていないことは確かめません）。
"""
from __future__ import annotations

import numpy as np

from .._core import Fail, LearnerError, call, exercise, expect_close, expect_shape, jaxpr_primitives, jaxpr_size
from .._core import _walk
from .._core import f32 as _f32, hidden_rng, n_devices as _n
from .. import meshes
from ..show import collectives_line

AXIS = "x"

# jaxpr での名前（同じ演算に別名があるものはまとめる）
PSUM = {"psum", "psum_invariant", "unreduced_psum", "psum_start", "psum_invariant_start"}
GATHER = {"all_gather", "all_gather_invariant", "all_gather_reduced", "all_gather_start"}
SCATTER = {"reduce_scatter", "unreduced_reduce_scatter", "reduce_scatter_start"}
PERMUTE = {"ppermute", "ppermute_start"}
ALL_TO_ALL = {"all_to_all", "ragged_all_to_all", "all_to_all_start"}
MAXMIN = {"pmax", "pmin"}
LOOPS = {"scan", "while"}


def _rng(tag: int) -> np.random.Generator:
    return hidden_rng(63_200 + tag)


def _mesh():
    return meshes.mesh_1d(AXIS)


def _put(mesh, a, spec):
    import jax
    from jax.sharding import NamedSharding

    return jax.device_put(a, NamedSharding(mesh, spec))


def _wrap(fn, mesh, in_specs, out_specs, *, stack: bool = False):
    """学習者の 1 デバイス分の関数を shard_map + jit で包む。
    stack=True なら、デバイス i の結果を出力の i 番目に積む（複製でない結果も全デバイス分見られる）。"""
    import jax
    from jax.sharding import PartitionSpec as P

    _need_callable(fn)
    body = fn
    if stack:
        def body(*blocks):
            import jax.numpy as jnp

            return jnp.asarray(fn(*blocks))[None]
        out_specs = P(AXIS)
    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs))


def _need_callable(fn) -> None:
    if not callable(fn):
        raise Fail(f"関数を渡してください（受け取ったのは {type(fn).__name__} です）。")


def _run(g, *args, replicated_hint: str = "", spec_hint: str = ""):
    """g を呼ぶ。shard_map がよく出すエラーは、原因を言い当てる 1 行に直す。"""
    try:
        return call(g, *args)
    except LearnerError as exc:
        msg = str(exc.exc)
        if "unbound axis name" in msg or _bad_axis_assert(exc.exc):
            raise Fail(f"JAX の中で {type(exc.exc).__name__} が起きました。集団通信に渡した軸の名前がメッシュにないとき"
                       f"に起きるエラーです。メッシュの軸名は '{AXIS}' です。") from None
        if "require replication" in msg or "could not infer replication" in msg:
            raise Fail("out_specs=P() は「全デバイスで同じ値」の約束ですが、出力がデバイスごとに違う値のままです"
                       f"（check_vma のエラー）。{replicated_hint}"
                       "all_gather の結果も、デバイスごとに違う値として扱われます。") from None
        if "does not match the specs of the input" in msg or "not evenly divisible" in msg:
            raise Fail("shard_map の in_specs が、渡された配列の分割と合っていません。"
                       f"{spec_hint or 'チェックが渡す配列の分割をそのまま in_specs に書きましょう。'}") from None
        if "shard_map in_specs" in msg and "list" in msg and "tuple" in msg:
            raise Fail("in_specs をリスト [...] で書いていませんか？ in_specs は引数の並びと同じ形のタプル"
                       "（P(...), P(...)）で書きます。") from None
        if "out_specs" in msg and "too long" in msg:
            raise Fail("出力の次元が out_specs より少なくなっています。shard_map は次元を保つので、"
                       "各デバイスのブロックは入力と同じ次元数のまま返します。") from None
        raise


def _bad_axis_assert(err: BaseException) -> bool:
    """psum などに知らない軸名を渡すと、JAX 0.12 は中身のない AssertionError（pvary の中）を出す。
    JAX の内部フレームはトレースバックから消されるので、「中身が空」で見分ける。"""
    return isinstance(err, AssertionError) and not str(err).strip()


def _collectives(g, *args) -> dict[str, int]:
    from ..hlo import count_collectives

    try:
        return count_collectives(g, *args)
    except Exception as exc:  # 呼び出しは通ったのでここで落ちることはまずない
        raise LearnerError(exc) from exc


def _gathered_sizes(g, *args) -> list[int]:
    """jaxpr の all_gather が集めている値の、1 デバイス分の要素数（統計量か、データそのものかを見分ける）。
    g は同じ引数で一度トレースできているので、ここで学習者のコードが新しく失敗することはない。"""
    import jax

    try:
        jaxpr = jax.make_jaxpr(g)(*args).jaxpr
    except Exception as exc:
        raise LearnerError(exc) from exc
    return [int(np.prod(getattr(eqn.invars[0].aval, "shape", ()) or (1,)))
            for eqn in _walk(jaxpr) if eqn.primitive.name in GATHER and eqn.invars]


def _close(a, b, rtol=1e-4, atol=1e-4) -> bool:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a.shape == b.shape and bool(np.all(np.isfinite(a))) and np.allclose(a, b, rtol=rtol, atol=atol)


def _expect_no_row_loop(make_call, sizes=(2, 5), what="行数"):
    """行数を変えても jaxpr の式の数が変わらず、scan / while もないこと。"""
    counts = [jaxpr_size(*make_call(s)) for s in sizes]
    if counts[0] != counts[1]:
        raise Fail(f"{what}を {sizes[0]} → {sizes[1]} にすると jaxpr の式の数が {counts[0]} → {counts[1]} と増えました。"
                   "行を Python のループで 1 つずつ処理していませんか？ ブロック全体を一度に計算しましょう。")
    prims = jaxpr_primitives(*make_call(sizes[1]))
    if prims & LOOPS:
        raise Fail(f"jaxpr に {', '.join(sorted(prims & LOOPS))} があります: 行を 1 つずつ回しています。"
                   "ブロック全体を一度に計算しましょう。")


def _forbid(prims: set[str], names: set[str], message: str) -> None:
    if prims & names:
        raise Fail(message)


def _gather_message(sizes: list[int], stat_size: int, data_msg: str, stat_msg: str) -> str:
    """all_gather を使った答えへの 1 行: データそのものを集めたのか、小さな統計量を集めたのか。"""
    return data_msg if any(s > stat_size for s in sizes) else stat_msg


# 6.3b-1 ------------------------------------------------------------------------------
# 必須: 集団通信は psum（pmean も可）だけ、all_gather なし、行の Python ループなし、結果は全デバイスで同じ値。
# 自由: 和と個数を 1 回の psum にまとめるか 2 回か、mask @ x か sum(x * mask)。

def _mean_data(rng, n, rows, k=3):
    x = _f32(rng.normal(size=(n * rows, k)) + 2.0)
    mask = np.zeros(n * rows, np.float32)
    for d in range(n):  # デバイスごとに有効な行の数を変える（1, 2, …, rows, 1, 2, …）
        keep = rng.permutation(rows)[: d % rows + 1]
        mask[d * rows + keep] = 1.0
    return x, mask


@exercise("6.3b-1", "masked_mean")
def check_masked_mean(fn):
    from jax.sharding import PartitionSpec as P

    n, mesh, rows, k, rng = _n(), _mesh(), 6, 3, _rng(1)
    x, mask = _mean_data(rng, n, rows, k)
    specs = (P(AXIS, None), P(AXIS))
    g = _wrap(fn, mesh, specs, P())
    args = (_put(mesh, x, specs[0]), _put(mesh, mask, specs[1]))
    got = _run(g, *args, replicated_hint="psum で全デバイスの和を取ると、全員が同じ値を持ちます。")

    want = (x * mask[:, None]).sum(0) / mask.sum()
    blocks = [slice(d * rows, (d + 1) * rows) for d in range(n)]
    local = [(x[b] * mask[b, None]).sum(0) / mask[b].sum() for b in blocks]
    expect_shape(got, want.shape, "masked_mean の結果", "列ごとの平均 (k,) を返します。")
    if n > 1 and _close(got, np.mean(local, 0)) and not _close(got, want):
        raise Fail("デバイスごとの平均をさらに平均しています（平均の平均）。有効な行の数はデバイスごとに違うので、"
                   "局所的な「和」と「個数」をそれぞれ psum してから、最後に割りましょう。")
    if _close(got, x.mean(0)) and not _close(got, want):
        raise Fail("mask を無視して全部の行の平均を取っています。mask が 1 の行だけを足し、個数も mask の和にします。")
    expect_close(got, want, "masked_mean の結果",
                 hint="和 = psum(sum(x * mask[:, None], 0))、個数 = psum(sum(mask)) として 和 / 個数 です。")

    prims = jaxpr_primitives(g, *args)
    _forbid(prims, GATHER, "all_gather で集めています。この問題の集団通信は psum です。局所的な和と個数（小さな値）だけを "
                           "psum すれば、データ本体も各デバイスの値の一覧も送らずに済みます。")
    if not prims & PSUM:
        raise Fail("jaxpr に psum が見つかりません。局所的な和と個数を lax.psum(…, 'x') で全デバイス分足しましょう。")

    def make(r):
        xr, mr = _mean_data(_rng(11), n, r, k)
        return g, _put(mesh, xr, specs[0]), _put(mesh, mr, specs[1])

    _expect_no_row_loop(make)
    return f"隠し入力（{n} デバイス × {rows} 行、有効な行の数はデバイスごとに違う）で一致し、psum で和と個数を集めています。"


# 6.3b-2 ------------------------------------------------------------------------------
# 必須: 集団通信は ppermute だけ（all_gather も psum なども使わない）、全デバイスが全体を列の順に持つ。
# 自由: 送る向き（右隣でも左隣でも）、受け取ったブロックの置き方（dynamic_update_slice、並べ替えて concatenate …）。

@exercise("6.3b-2", "ring_all_gather")
def check_ring_all_gather(fn):
    from jax.sharding import PartitionSpec as P

    n, mesh, rng = _n(), _mesh(), _rng(2)
    r, c = 3, 2
    x = _f32(rng.normal(size=(r, n * c)))
    g = _wrap(fn, mesh, P(None, AXIS), None, stack=True)
    xs = _put(mesh, x, P(None, AXIS))
    got = _run(g, xs)

    if n > 1 and tuple(getattr(got, "shape", ())) == (n, n, r, c):
        raise Fail(f"各デバイスの結果の形が {(n, r, c)} です（tiled=False の形）。受け取ったブロックは "
                   f"列方向（axis=1）につないで ({r}, {n * c}) にします。")
    if n > 1 and tuple(getattr(got, "shape", ())) == (n, n * r, c):
        raise Fail(f"各デバイスの結果の形が {(n * r, c)} です。ブロックを行方向（axis=0）につないでいます。"
                   f"この問題のブロックは列の塊なので、列方向（axis=1）につないで ({r}, {n * c}) にします。")
    expect_shape(got, (n, r, n * c), f"全デバイスの結果を積んだもの（{n} デバイス分）",
                 f"各デバイスは自分のブロック ({r}, {c}) から、列方向につないだ全体 ({r}, {n * c}) を返します。")
    got = np.asarray(got)
    blocks = [x[:, j * c:(j + 1) * c] for j in range(n)]
    for d in range(n):
        if _close(got[d], x):
            continue
        pieces = [got[d][:, j * c:(j + 1) * c] for j in range(n)]
        owners = [next((k for k, b in enumerate(blocks) if _close(p, b)), None) for p in pieces]
        if None not in owners and sorted(owners) == list(range(n)):
            raise Fail(f"デバイス {d} の結果は、ブロックはそろっていますが並び順が違います（位置 0.. に "
                       f"デバイス {owners} のブロック）。右隣へ送るリングなら、k 回目に受け取るブロックの持ち主は "
                       "(自分の番号 - k) % n です。その持ち主の番号 × c の列に置きましょう。")
        expect_close(got[d], x, f"デバイス {d} の結果",
                     hint="all_gather(block, 'x', axis=1, tiled=True) と同じものを ppermute だけで作ります。")

    prims = jaxpr_primitives(g, xs)
    _forbid(prims, GATHER, "all_gather を使っています。この問題では ppermute で隣から受け取る手順を n-1 回繰り返します。")
    used = sorted(prims & (PSUM | SCATTER | ALL_TO_ALL | MAXMIN))
    if used:
        raise Fail(f"ppermute 以外の集団通信（{', '.join(used)}）を使っています。"
                   "リング all-gather は隣への送受信 (ppermute) だけで作ります。")
    if n > 1 and not prims & PERMUTE:
        raise Fail("jaxpr に ppermute が見つかりません。lax.ppermute(block, 'x', perm) で隣のデバイスへ送ります。")
    counts = _collectives(g, xs) if n > 1 else {}
    if "all-gather" in counts:
        raise Fail(f"コンパイル結果に all-gather が {counts['all-gather']} 個あります。ppermute だけで組み立てましょう。")
    detail = f"HLO の集団通信は {collectives_line(counts)} だけです" if n > 1 else "ppermute だけで組み立てています"
    return f"隠し入力（ブロック ({r}, {c}) × {n} デバイス）で全デバイスが全体を持ち、{detail}。"


# 6.3b-3 ------------------------------------------------------------------------------
# Megatron 式の MLP（1 層目は列、2 層目は行で分けた重み）にバイアスを足す。
# 必須: jax.shard_map を自分で呼ぶ、x と w1・w2 を集めない（all_gather なし）、通信は部分積の psum 1 回だけ、
#       結果は全デバイスに複製（out_specs=P()）、check_vma を切らない、行の Python ループなし。
# 自由: in_specs を書くか省くか（Explicit のメッシュでは入力の型から決まる）、@ か einsum か、
#       jax.nn.relu か jnp.maximum(…, 0) か、b2 を psum の後で 1 回足すか、b2 / n を各部分積に足してから psum するか。

def _mlp_data(rng, n, rows, d=5, h_per=3, f=4):
    x = _f32(rng.normal(size=(rows, d)))
    w1 = _f32(rng.normal(size=(d, n * h_per)))
    b1 = _f32(rng.normal(size=(n * h_per,)))  # 1 層目の出力の約半分が負（ReLU が効く）
    w2 = _f32(rng.normal(size=(n * h_per, f)))
    b2 = _f32(3.0 + rng.normal(size=(f,)))  # 大きめ（n 回足すと見える）
    return x, w1, b1, w2, b2


def _relu(a):
    return np.maximum(a, 0.0)


@exercise("6.3b-3", "megatron_mlp")
def check_megatron_mlp(fn):
    import jax
    from jax.sharding import PartitionSpec as P

    n, mesh, rng = _n(), _mesh(), _rng(3)
    rows, h_per = 4, 3
    data = _mlp_data(rng, n, rows, h_per=h_per)
    x, w1, b1, w2, b2 = data
    specs = (P(), P(None, AXIS), P(AXIS), P(AXIS, None), P())
    _need_callable(fn)
    g = jax.jit(lambda *a: fn(*a, mesh))
    args = tuple(_put(mesh, a, s) for a, s in zip(data, specs))
    got = _run(g, *args, replicated_hint="部分積を lax.psum(…, 'x') で足し合わせてから返しましょう。",
               spec_hint="x と b2 は複製 P()、w1 は列で P(None, 'x')、b1 は w1 の列と同じく P('x')、"
                         "w2 は行で P('x', None) に分けて渡しています。")

    pre = x @ w1 + b1
    want = _relu(pre) @ w2 + b2
    shape = tuple(getattr(got, "shape", ()) or ())
    if n > 1 and shape == (n * rows, want.shape[1]):
        raise Fail(f"出力の形が {shape} で、各デバイスの部分積が縦に並んでいます。部分積は足し合わせるもの"
                   "なので、psum してから out_specs=P() で返しましょう。")
    expect_shape(got, want.shape, "megatron_mlp(x, w1, b1, w2, b2, mesh) の結果")
    cols = slice(0, h_per)
    if n > 1 and (_close(got, _relu(pre[:, cols]) @ w2[cols] + b2) or _close(got, _relu(pre[:, cols]) @ w2[cols])):
        raise Fail("デバイス 0 の部分積だけが返っています（check_vma=False で psum を省いていませんか？）。"
                   "部分積は lax.psum で全デバイス分足します。")
    if n > 1 and _close(got, _relu(pre) @ w2 + n * b2):
        raise Fail(f"バイアス b2 が {n} 回足されています。各デバイスの部分積に b2 を足してから psum すると、"
                   "デバイスの数だけ重なります。b2 は psum の後で 1 回だけ足しましょう。")
    if _close(got, _relu(pre) @ w2) and not _close(got, want):
        raise Fail("バイアス b2 が足されていません。")
    if _close(got, _relu(x @ w1) @ w2 + b2) and not _close(got, want):
        raise Fail("バイアス b1 が足されていません。b1 は 1 層目の出力 x @ w1 の列に合わせて分かれているので、"
                   "各デバイスで自分の列の分を ReLU の前に足します。")
    if _close(got, pre @ w2 + b2) and not _close(got, want):
        raise Fail("ReLU がかかっていません。1 層目の出力（自分の列の分）に jax.nn.relu をかけてから w2 と掛けます。")
    if _close(got, _relu(pre @ w2 + b2)) or _close(got, _relu(pre @ w2) + b2):
        raise Fail("ReLU を psum の後（2 層目の出力）にかけています。ReLU は 1 層目の出力 h にかけるもので、"
                   "h は列で分かれているので、各デバイスで通信なしにかけられます。")
    expect_close(got, want, "megatron_mlp(x, w1, b1, w2, b2, mesh) の結果", rtol=1e-4, atol=1e-4,
                 hint="各デバイスで h = relu(x @ w1_blk + b1_blk)、部分積 h @ w2_blk を lax.psum(…, 'x') で足し、最後に b2 を足します。")
    sharding = getattr(got, "sharding", None)
    if sharding is not None and not sharding.is_fully_replicated:
        raise Fail(f"結果が全デバイスに複製されていません（spec {getattr(sharding, 'spec', sharding)}）。"
                   "out_specs=P() で返しましょう。")

    prims = jaxpr_primitives(g, *args)
    if "shard_map" not in prims:
        raise Fail("shard_map が見つかりません。この問題は jax.shard_map の中で部分積を作って psum する練習です。")
    _forbid(prims, GATHER, "all_gather で重みか入力を集めています。列で分けた w1 と行で分けた w2 なら、"
                           "何も集めずに、最後の部分積を psum するだけで済みます。")
    if not prims & PSUM:
        raise Fail("jaxpr に psum が見つかりません。部分積は lax.psum(…, 'x') で足し合わせます。")
    counts = _collectives(g, *args) if n > 1 else {}
    extra = sorted(set(counts) - {"all-reduce"})
    if extra or counts.get("all-reduce", 0) > 1:
        raise Fail(f"コンパイル結果の集団通信が {collectives_line(counts)} です。Megatron 式の MLP で必要な通信は、"
                   "2 層目の部分積を足す all-reduce（psum）1 回だけです。")

    def make(r):
        d = _mlp_data(_rng(13), n, r, h_per=h_per)
        return (g,) + tuple(_put(mesh, a, s) for a, s in zip(d, specs))

    _expect_no_row_loop(make)
    detail = f"HLO の集団通信は {collectives_line(counts)} だけ" if counts else "jaxpr の集団通信は psum だけ"
    return f"隠し入力 x {x.shape}、w1 {w1.shape}、w2 {w2.shape} で一致し、結果は複製、{detail}です。"


# 6.3b-4 ------------------------------------------------------------------------------
# 必須: 各行の本当の最大値を引いてから exp を取る（値の幅が広い入力でもあふれない）、集団通信は最大値の pmax と
#       和の psum だけ（all_gather・all_to_all なし）、行の Python ループなし。
# 自由: 分母を psum で作って割るか、log-sum-exp を作って exp(x - lse) にするか、keepdims の使い方。

def _softmax(z, axis=-1):
    z = np.asarray(z, np.float64)
    e = np.exp(z - z.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _wide_rows(rng, n, rows, f):
    """値の幅が広い行: ほとんどは 0 前後で、行ごとに 1 つのブロックだけに 300 前後の値が 2 つ。
    行全体の本当の最大値を引かないと exp があふれる（float32 の exp は 88.7 を超えると inf）。
    最大値の平均（pmean）を引くと、2 デバイスでも 300 - 151 ≈ 149 が残ってあふれる。"""
    x = 3.0 * rng.normal(size=(rows, n * f))
    for r in range(rows):
        blk = (r * 5 + 3) % n
        cols = blk * f + rng.permutation(f)[:2]
        x[r, cols] = [300.0, 298.0]  # 和は 1 に近い 2 つの値に分かれる（e^-2 ≈ 0.12 と 0.88）
    return _f32(x)


@exercise("6.3b-4", "sharded_softmax")
def check_sharded_softmax(fn):
    from jax.sharding import PartitionSpec as P

    n, mesh, rng = _n(), _mesh(), _rng(4)
    rows, f = 6, 3
    # 値が大きいので、最大値を引かないと exp があふれる（float32 は exp(89) で inf）
    x = _f32(100.0 + 6.0 * rng.normal(size=(rows, n * f)))
    g = _wrap(fn, mesh, P(None, AXIS), P(None, AXIS))
    xs = _put(mesh, x, P(None, AXIS))
    got = _run(g, xs)

    want = _softmax(x)
    expect_shape(got, want.shape, "sharded_softmax の結果（全体）", "各デバイスは自分の列ブロックと同じ形を返します。")
    g_np = np.asarray(got, np.float64)
    if not np.all(np.isfinite(g_np)):
        raise Fail("結果に NaN か inf があります。入力が大きい（100 前後）ので exp があふれています。"
                   "先に全体の最大値（lax.pmax(…, 'x')）を引いてから exp を取りましょう。")
    blocks = [slice(j * f, (j + 1) * f) for j in range(n)]
    local = np.concatenate([_softmax(x[:, b]) for b in blocks], axis=1)
    if n > 1 and _close(g_np, local):
        raise Fail("各デバイスの中だけで正規化しています（ブロックごとに和が 1）。分母の exp の和は "
                   "lax.psum で全デバイス分を足します。")
    if n > 1:
        shifted = np.concatenate([np.exp(x[:, b] - x[:, b].max(1, keepdims=True)) for b in blocks], axis=1)
        if _close(g_np, shifted / shifted.sum(1, keepdims=True)):
            raise Fail("引いている最大値がデバイスごとに違います。lax.pmax(…, 'x') で全体の最大値にそろえましょう。")
    expect_close(got, want, "sharded_softmax の結果", rtol=1e-4, atol=1e-6,
                 hint="m = pmax(局所の最大値)、e = exp(x - m)、分母 = psum(局所の和) で e / 分母 です。")

    # 値の幅が広い入力: 数式の上では同じ softmax でも、本当の最大値を引かないとあふれる
    xw = _wide_rows(_rng(24), n, rows, f)
    gw = np.asarray(_run(g, _put(mesh, xw, P(None, AXIS))), np.float64)
    if not np.all(np.isfinite(gw)):
        raise Fail("値の幅が広い隠し入力（行ごとに 1 か所だけ 300 前後、ほかは 0 前後）で NaN か inf が出ました。"
                   "exp(x - m) があふれないのは、m が行全体の本当の最大値のときだけです。最大値の平均（pmean）などは"
                   "数式の上では同じ softmax になりますが、x - m が 88 を超えると float32 の exp は inf です。"
                   "m は lax.pmax(…, 'x') で作りましょう。")
    expect_close(gw, _softmax(xw), "値の幅が広い隠し入力での結果", rtol=1e-4, atol=1e-6,
                 hint="m は行全体の最大値（lax.pmax）にします。")

    prims = jaxpr_primitives(g, xs)
    if prims & GATHER:
        raise Fail(_gather_message(
            _gathered_sizes(g, xs), rows,
            "all_gather で行の特徴そのものを集めています。最大値と和という小さな統計量だけを pmax / psum "
            "すれば、特徴は送らずに済みます。",
            "最大値か和を all_gather で集めてから計算しています。この問題の集団通信は、最大値の lax.pmax と"
            "和の lax.psum です（どちらも 1 回で全員に同じ値が届きます）。"))
    _forbid(prims, ALL_TO_ALL, "all_to_all でデータを並べ替えています。統計量だけを pmax / psum しましょう。")
    if not prims & PSUM:
        raise Fail("jaxpr に psum が見つかりません。分母（exp の和）は lax.psum(…, 'x') で全デバイス分足します。")
    if not prims & MAXMIN:
        raise Fail("jaxpr に pmax が見つかりません。行全体の最大値は lax.pmax(…, 'x') で作ります。")
    counts = _collectives(g, xs) if n > 1 else {}
    if "all-gather" in counts:
        raise Fail(f"コンパイル結果に all-gather が {counts['all-gather']} 個あります。統計量だけを集めましょう。")

    def make(r):
        xr = _f32(100.0 + 6.0 * _rng(14).normal(size=(r, n * f)))
        return g, _put(mesh, xr, P(None, AXIS))

    _expect_no_row_loop(make)
    return (f"隠し入力（{rows} 行 × {n * f} 特徴、値は 100 前後と、幅の広い 0〜300）で一致し、"
            "pmax と psum の統計量だけで計算しています。")


# 6.3b-5 ------------------------------------------------------------------------------
# 必須: 通信は reduce-scatter（psum_scatter）1 回だけ（psum・all_gather なし）、b は通信の後で自分の列の分だけ足す。
# 自由: b の切り出し方（dynamic_slice_in_dim、reshape して axis_index で選ぶ …）、@ か einsum か。

@exercise("6.3b-5", "rs_matmul_bias")
def check_rs_matmul_bias(fn):
    from jax.sharding import PartitionSpec as P

    n, mesh, rng = _n(), _mesh(), _rng(5)
    rows, d_per, f_per = 2 * n, 3, 2
    x = _f32(rng.normal(size=(rows, n * d_per)))
    w = _f32(rng.normal(size=(n * d_per, n * f_per)))
    b = _f32(rng.normal(size=(n * f_per,)) * 3.0)
    specs = (P(None, AXIS), P(AXIS, None), P())
    g = _wrap(fn, mesh, specs, P(None, AXIS))
    args = tuple(_put(mesh, a, s) for a, s in zip((x, w, b), specs))
    got = _run(g, *args)

    want = x @ w + b
    shape = tuple(getattr(got, "shape", ()) or ())
    if n > 1 and shape == (rows // n, n * want.shape[1]):
        raise Fail(f"出力の形が {shape} です。行（0 軸）で分けていませんか？ 出力は特徴（1 軸）で分けるので "
                   "psum_scatter(…, scatter_dimension=1, tiled=True) です。")
    expect_shape(got, want.shape, "rs_matmul_bias の結果（全体）",
                 f"各デバイスは ({rows}, {f_per}) の列ブロックを返します。")
    if n > 1 and _close(got, x @ w + n * b):
        raise Fail(f"バイアスが {n} 回足されています。足し合わせる前の部分積に b を足すと、reduce-scatter で "
                   "デバイスの数だけ重なります。b は通信の後で、自分の列の分だけ足しましょう。")
    if n > 1 and _close(got, x @ w + np.tile(b[:f_per], n)):
        raise Fail("どのデバイスも b の先頭の部分を足しています。自分の列に当たる部分を "
                   "lax.axis_index('x') から計算して切り出しましょう（lax.dynamic_slice_in_dim）。")
    if _close(got, x @ w) and not _close(got, want):
        raise Fail("バイアス b が足されていません。")
    expect_close(got, want, "rs_matmul_bias の結果", rtol=1e-4, atol=1e-4,
                 hint="部分積 x_blk @ w_blk を psum_scatter(…, scatter_dimension=1, tiled=True) し、自分の列の b を足します。")

    prims = jaxpr_primitives(g, *args)
    _forbid(prims, GATHER, "all_gather を使っています。この問題は何も集めずに、部分積を reduce-scatter するだけで作れます。")
    _forbid(prims, PSUM, "psum（all-reduce）で全体を足してから切り出しています。値は合いますが、通信量は "
                         "reduce-scatter の倍ほどになります。lax.psum_scatter を使いましょう。")
    if not prims & SCATTER:
        raise Fail("jaxpr に reduce_scatter が見つかりません。部分積は lax.psum_scatter(…, 'x', tiled=True) で足して配ります。")
    counts = _collectives(g, *args) if n > 1 else {}
    extra = sorted(set(counts) & {"all-gather", "all-reduce", "all-to-all"})
    if extra:
        raise Fail(f"コンパイル結果に {', '.join(extra)} があります（{collectives_line(counts)}）。"
                   "通信は reduce-scatter 1 回だけにしましょう。")
    detail = f"HLO の集団通信は {collectives_line(counts)}" if counts else "jaxpr の集団通信は reduce_scatter だけ"
    return f"隠し入力 x {x.shape}、w {w.shape}、b {b.shape} で一致し、{detail} です。"
