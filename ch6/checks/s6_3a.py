"""6.3a jit + sharding（Auto / Explicit）の演習チェック。

メッシュと隠し入力はチェックのたびに jax.device_count() から作ります（1〜8 台のどれでも動く）。
メッシュは ch6.meshes（ノートブックと同じ決め方: 2 次元は偶数台なら (n/2, 2)、奇数台なら (n, 1)）。
通信の有無はコンパイル済み HLO を ch6.hlo.count_collectives で数えて確かめます。
デバイスが 1 台のときは通信がそもそも現れないので、配置の指定（PartitionSpec）で判定し、
その旨をメッセージに書きます。
"""
from __future__ import annotations

import numpy as np

from .._core import Fail, LearnerError, call, exercise, expect_close
from .._core import f32 as _f32, hidden_rng, n_devices as _n
from .. import meshes

# ---------------------------------------------------------------- 共通の部品


def _rng(tag: int) -> np.random.Generator:
    return hidden_rng(63_100 + tag)


def _mesh_1d_auto():
    """全デバイスを 1 列に並べた 'data' メッシュ（Auto）。"""
    from jax.sharding import AxisType

    return meshes.mesh_1d("data", AxisType.Auto)


def norm_spec(spec) -> tuple:
    """PartitionSpec を比べやすい形に: 1 要素のタプルは名前に、末尾の None は落とす。"""
    out = []
    for e in tuple(spec):
        if isinstance(e, (tuple, list)):
            e = tuple(e)
            e = None if not e else (e[0] if len(e) == 1 else e)
        out.append(e)
    while out and out[-1] is None:
        out.pop()
    return tuple(out)


def show_spec(spec, ndim: int = 0) -> str:
    """表示用: 正規化して、ndim まで None で埋める（例: P('data', None)）。"""
    e = list(norm_spec(spec))
    if not e:
        return "P()"
    e += [None] * (ndim - len(e))
    return "P(" + ", ".join(repr(v) for v in e) + ")"


def _as_spec(x, what: str):
    """PartitionSpec か、そのつもりのタプル / None を PartitionSpec に。"""
    from jax.sharding import PartitionSpec as P

    if isinstance(x, P):
        return x
    if x is None:
        return P()
    if isinstance(x, (tuple, list)):
        return P(*x)
    raise Fail(f"{what} は PartitionSpec のはずですが、{type(x).__name__} が返りました。P('data', None) のように書きます。")


def _named_spec(arr, what: str, hint: str) -> tuple:
    """配列が NamedSharding で置かれていることを確かめ、正規化した spec を返す。"""
    from jax.sharding import NamedSharding

    sharding = getattr(arr, "sharding", None)
    if sharding is None:
        raise Fail(f"{what} がデバイス上の配列ではありません（{type(arr).__name__}）。{hint}")
    if not isinstance(sharding, NamedSharding):
        raise Fail(f"{what} の配置が NamedSharding ではありません（{type(sharding).__name__}）。{hint}")
    return norm_spec(sharding.spec)


def _comm(counts: dict) -> str:
    return "、".join(f"{k} ×{v}" for k, v in counts.items()) or "なし"


def _counts(f, *args) -> dict:
    from ..hlo import count_collectives

    return count_collectives(f, *args)


# 6.3a-1 ------------------------------------------------------------------------------

@exercise("6.3a-1", "place_batch")
def check_place_batch(fn):
    from jax.sharding import NamedSharding, PartitionSpec as P

    n = _n()
    rng = _rng(1)
    mesh = meshes.mesh_1d("data")
    x = _f32(rng.normal(size=(3 * n, 2 * n)))
    W = _f32(rng.normal(size=(2 * n, 4)))
    got = call(fn, x, W, mesh)
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        what = f"長さ {len(got)} の {type(got).__name__}" if isinstance(got, (tuple, list)) else type(got).__name__
        raise Fail(f"(x の配置, W の配置) の 2 つ組を返してください（返ったのは {what}）。")
    gx, gW = got
    if getattr(gx, "shape", None) == W.shape and getattr(gW, "shape", None) == x.shape:
        raise Fail("返す順番が逆です: (x, W) の順に返してください。")
    expect_close(gx, x, "x ", hint="device_put は値を変えません。")
    expect_close(gW, W, "W ", hint="device_put は値を変えません。")
    hint = "jax.device_put(x, NamedSharding(mesh, P('data', None))) のように置きます。"
    sx = _named_spec(gx, "x", hint)
    sW = _named_spec(gW, "W", hint)
    if sx == ():
        raise Fail("x が複製（P()）になっています: 全デバイスがバッチ全体を持ちます。"
                   "0 軸（バッチ）を 'data' で分けて P('data', None) にしましょう。")
    if sx != ("data",):
        raise Fail(f"x の spec が違います: 期待 P('data', None)、実際 {show_spec(gx.sharding.spec, 2)}。"
                   "分けるのは 0 軸（バッチ）で、特徴の軸は分けません。")
    if gx.sharding.mesh.shape != mesh.shape:
        raise Fail(f"x を置いたメッシュが違います（{dict(gx.sharding.mesh.shape)}）。引数の mesh を使ってください。")
    if not gx.sharding.is_equivalent_to(NamedSharding(mesh, P("data", None)), 2):
        raise Fail("x の配置が P('data', None) と同じになっていません。引数の mesh を使ってください。")
    if sW != () or not gW.sharding.is_fully_replicated:
        raise Fail(f"W は全デバイスに複製してください: 期待 P()、実際 {show_spec(gW.sharding.spec, 2) if sW else 'P()'}。"
                   "重みを分けると行列積のたびに通信が要ります。")
    rows = sorted({s.data.shape[0] for s in gx.addressable_shards})
    return f"隠し入力 x {x.shape} を {n} 台に {rows[0]} 行ずつ、W {W.shape} は全台に複製して置きました。"


# 6.3a-2 ------------------------------------------------------------------------------

# ノートブックに表として載せる 5 つのケース: y = a @ b、メッシュは 1 次元 'data'
PREDICT_CASES = {
    "A": (("data", None), (None, None), ("data", None)),
    "B": ((None, "data"), ("data", None), ()),
    "C": (("data", None), (None, None), ()),
    "D": (("data", None), (None, "data"), ("data", None)),
    "E": ((), (None, "data"), (None, "data")),
}
_ANSWER = {"A": "none", "B": "all-reduce", "C": "all-gather", "D": "all-gather", "E": "none"}
_CASE_HINT = {
    "A": "縮約する軸（a の 1 軸、b の 0 軸）はどちらも分かれていません。",
    "B": "両方の縮約軸が分かれていると、各デバイスは部分和しか作れません。",
    "C": "計算は手元でできますが、出力を P()（複製）にするには行を集める必要があります。",
    "D": "a の行と b の列が同じ 'data' 軸で分かれていて、出力は P('data', None) です。",
    "E": "a は複製、b は列で分かれ、出力も列で分かれます。",
}
VALID = ("none", "all-gather", "all-reduce", "reduce-scatter", "all-to-all")


def _norm_name(v) -> str | None:
    if v is None:
        return "none"
    if not isinstance(v, str):
        return None
    s = v.strip().lower().replace("_", "-").replace(" ", "-")
    s = {"なし": "none", "": "none", "allgather": "all-gather", "allreduce": "all-reduce",
         "psum": "all-reduce", "reducescatter": "reduce-scatter"}.get(s, s)
    return s


def case_arrays(n: int, seed: int = 2):
    rng = _rng(seed)
    a = _f32(rng.normal(size=(4 * n, 3 * n)))
    b = _f32(rng.normal(size=(3 * n, 2 * n)))
    return a, b


def compiled_case(case: str):
    """PREDICT_CASES の 1 つを、今のデバイス数でコンパイルして (結果, 集団通信の数) を返す。"""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    mesh = _mesh_1d_auto()
    sa, sb, so = (NamedSharding(mesh, P(*s)) for s in PREDICT_CASES[case])
    a, b = case_arrays(_n())
    a, b = jax.device_put(a, sa), jax.device_put(b, sb)
    f = jax.jit(lambda u, v: u @ v, out_shardings=so)
    return f(a, b), _counts(f, a, b)


@exercise("6.3a-2", "predict_collectives")
def check_predict(fn):
    got = call(fn)
    if not isinstance(got, dict):
        raise Fail(f"{{'A': 'none', ...}} のような辞書を返してください（返ったのは {type(got).__name__}）。")
    missing = [k for k in _ANSWER if k not in got]
    if missing:
        raise Fail(f"ケース {', '.join(missing)} の予想がありません。A から E まで 5 つ答えてください。")
    names = {k: _norm_name(got[k]) for k in _ANSWER}
    bad = [k for k, v in names.items() if v not in VALID]
    if bad:
        k = bad[0]
        raise Fail(f"ケース {k} の答え {got[k]!r} は通信の名前ではありません。"
                   f"{' / '.join(repr(v) for v in VALID)} から選んでください。")
    wrong = [k for k in _ANSWER if names[k] != _ANSWER[k]]
    if wrong:
        k = wrong[0]
        raise Fail(f"5 つ中 {5 - len(wrong)} つ正解です。ケース {k} は {names[k]!r} ではありません。"
                   f"ヒント: {_CASE_HINT[k]}")
    n = _n()
    if n == 1:
        return "A〜E の予想がすべて合っています（1 デバイスでは通信は現れないので、2 台以上で実際に確かめられます）。"
    return f"A〜E の予想は、{n} デバイスでコンパイルした HLO とすべて一致します。"


# 6.3a-3 ------------------------------------------------------------------------------

def needs_comm_by_rule(sx: tuple, sw: tuple, so: tuple) -> str:
    """1 次元メッシュ上の y = x @ w が通信なしで済むかを、配置の規則だけで判定する。

    通信なしで済む条件: 縮約軸（x の 1 軸、w の 0 軸）がどちらも分かれておらず、
    出力の spec が (x の 0 軸の spec, w の 1 軸の spec) に一致し、同じメッシュ軸を 2 回使わないこと。
    問題があれば理由の短い文を、なければ空文字を返す。
    """
    x = tuple(sx) + (None,) * (2 - len(sx))
    w = tuple(sw) + (None,) * (2 - len(sw))
    o = tuple(so) + (None,) * (2 - len(so))
    if x[1] is not None or w[0] is not None:
        return "縮約する軸（x の 1 軸 / w の 0 軸）が分かれているので、部分和を足し合わせる all-reduce か集め直しが要ります"
    if x[0] is not None and x[0] == w[1]:
        return "x の行と w の列が同じメッシュ軸で分かれていて、片方を集め直す all-gather が要ります"
    if o != (x[0], w[1]):
        return (f"各デバイスが作る出力の形は P({x[0]!r}, {w[1]!r}) なので、"
                f"{show_spec(so, 2)} にするには並べ替え（all-gather など）が要ります")
    return ""


@exercise("6.3a-3", "no_comm_specs")
def check_no_comm(fn):
    import jax
    from jax.sharding import NamedSharding

    got = call(fn)
    if not isinstance(got, (tuple, list)) or len(got) != 3:
        what = f"長さ {len(got)} の {type(got).__name__}" if isinstance(got, (tuple, list)) else type(got).__name__
        raise Fail(f"(x_spec, w_spec, out_spec) の 3 つ組を返してください（返ったのは {what}）。")
    specs = [_as_spec(s, w) for s, w in zip(got, ("x_spec", "w_spec", "out_spec"))]
    sx, sw, so = (norm_spec(s) for s in specs)
    for s, what in zip((sx, sw, so), ("x_spec", "w_spec", "out_spec")):
        if len(s) > 2 or any(e not in (None, "data") for e in s):
            raise Fail(f"{what} = {show_spec(s, 2) if len(s) <= 2 else show_spec(s)} は使えません。メッシュの軸は 'data' だけで、配列は 2 次元です。")
    if "data" not in sw:
        raise Fail(f"w_spec = {show_spec(sw, 2)} では w が全デバイスに複製されます。"
                   "この演習では w が大きいので、どこかの軸を 'data' で分けてください。")
    n = _n()
    mesh = _mesh_1d_auto()
    rng = _rng(3)
    x = _f32(rng.normal(size=(4 * n, 3 * n)))
    w = _f32(rng.normal(size=(3 * n, 2 * n)))
    shard = [NamedSharding(mesh, s) for s in specs]
    xs, ws = jax.device_put(x, shard[0]), jax.device_put(w, shard[1])
    f = jax.jit(lambda a, b: a @ b, out_shardings=shard[2])
    expect_close(f(xs, ws), x @ w, "x @ w の結果", rtol=1e-4, atol=1e-4)
    if n == 1:
        why = needs_comm_by_rule(sx, sw, so)
        if why:
            raise Fail(f"1 デバイスなので通信は現れませんが、2 台以上では{why}。")
        return "配置の規則では通信なしです（1 デバイスでは通信が現れないので、2 台以上で HLO を確かめられます）。"
    counts = _counts(f, xs, ws)
    if counts:
        why = needs_comm_by_rule(sx, sw, so)
        raise Fail(f"コンパイル済み HLO に通信が入りました: {_comm(counts)}。{why or '縮約軸と出力の spec を見直しましょう'}。")
    return (f"x {show_spec(sx, 2)}、w {show_spec(sw, 2)}、出力 {show_spec(so, 2)} で、"
            f"{n} デバイスの HLO に通信はありません。")


# 6.3a-4 ------------------------------------------------------------------------------

@exercise("6.3a-4", "fixed_layer")
def check_fixed_layer(fn):
    import jax
    from jax.sharding import PartitionSpec as P

    d, m = meshes.mesh_2d_shape()
    mesh = meshes.mesh_2d(("data", "model"))
    rng = _rng(4)
    x = _f32(rng.normal(size=(4 * d, 6 * m)))
    w = _f32(rng.normal(size=(6 * m, 4 * m)))
    want = x @ w
    with jax.set_mesh(mesh):
        xs = jax.device_put(x, P("data", "model"))
        ws = jax.device_put(w, P("model", None))
        f = jax.jit(fn)
        try:
            out = call(f, xs, ws)
        except LearnerError as err:
            if type(err.exc).__name__ == "ShardingTypeError":
                raise Fail("まだ ShardingTypeError が出ます: 縮約軸が 'model' で分かれているので、"
                           "jnp.matmul(x, w, out_sharding=P('data', None)) のように出力の配置を指定しましょう。") from None
            raise
        expect_close(out, want, "fixed_layer(x, w) の結果", rtol=1e-4, atol=1e-4)
        spec = norm_spec(jax.typeof(out).sharding.spec)
        if spec != ("data",):
            extra = "（複製: バッチが分かれていません）" if spec == () else ""
            raise Fail(f"出力の型の sharding が違います: 期待 P('data', None)、実際 {show_spec(spec, 2)}{extra}。"
                       "out_sharding で出力の配置を P('data', None) にします。")
        counts = _counts(f, xs, ws)
    if counts.get("all-gather"):
        raise Fail(f"結果は正しいのですが、余分な all-gather があります（通信: {_comm(counts)}）。"
                   "入力を reshard で集め直さず、out_sharding で部分和を足し合わせる（all-reduce）だけにしましょう。")
    if m == 1:
        return "出力の型は P('data', None) です（model 軸が 1 なので通信は現れません）。"
    return f"出力の型は P('data', None)、通信は {_comm(counts)} だけです。"


# 6.3a-5 ------------------------------------------------------------------------------

def mlp_forward(params, x):
    """ノートブックと同じ 2 層 MLP（Explicit モード用: 2 層目の出力を P('data', None) に）。"""
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    h = jax.nn.relu(x @ params["W1"] + params["b1"])
    return jnp.matmul(h, params["W2"], out_sharding=P("data", None)) + params["b2"]


def _mlp_np(p, x):
    h = np.maximum(x @ p["W1"] + p["b1"], 0.0)
    return h @ p["W2"] + p["b2"]


_MLP_SPECS = {"W1": (None, "model"), "W2": ("model",)}


@exercise("6.3a-5", "shard_mlp_params")
def check_shard_mlp(fn):
    import jax
    from jax.sharding import PartitionSpec as P

    d, m = meshes.mesh_2d_shape()
    mesh = meshes.mesh_2d(("data", "model"))
    rng = _rng(5)
    D, H, O = 3 * d * m, 8 * m, 2 * m
    params = {"W1": _f32(rng.normal(size=(D, H)) * 0.5), "b1": _f32(rng.normal(size=(H,)) * 0.1),
              "W2": _f32(rng.normal(size=(H, O)) * 0.5), "b2": _f32(rng.normal(size=(O,)) * 0.1)}
    x = _f32(rng.normal(size=(4 * d, D)))
    got = call(fn, params, mesh)
    if not isinstance(got, dict) or set(got) != set(params):
        keys = sorted(got) if isinstance(got, dict) else type(got).__name__
        raise Fail(f"{sorted(params)} をキーに持つ辞書を返してください（返ったのは {keys}）。")
    hint = "jax.device_put(p, NamedSharding(mesh, spec)) で置きます。"
    specs = {k: _named_spec(got[k], k, hint) for k in params}
    for k in params:
        expect_close(got[k], params[k], f"{k} ", hint="device_put は値を変えません。")
    for k, v in specs.items():
        if "data" in v:
            raise Fail(f"{k} が 'data' 軸で分かれています（{show_spec(v, params[k].ndim)}）。この演習ではパラメータは "
                       "'model' 軸だけで分け、'data' 方向には複製します。")
    for k, want in _MLP_SPECS.items():
        if specs[k] == ():
            raise Fail(f"{k} が複製（P()）のままです: 1 台あたりのメモリが減りません。"
                       f"期待 {show_spec(want, params[k].ndim)}。")
        if specs[k] != want:
            raise Fail(f"{k} の spec が違います: 期待 {show_spec(want, params[k].ndim)}、"
                       f"実際 {show_spec(specs[k], params[k].ndim)}。"
                       "W1 は列（隠れ層の軸）、W2 は行（隠れ層の軸）を 'model' で分けると、"
                       "1 層目は通信なし、2 層目は all-reduce 1 回で済みます。")
    for k in ("W1", "W2"):
        per_dev = got[k].addressable_shards[0].data.nbytes
        if per_dev * m != params[k].nbytes:
            raise Fail(f"{k} の 1 台あたりのバイト数が {per_dev} で、全体 {params[k].nbytes} の 1/{m} になっていません。")
    with jax.set_mesh(mesh):
        xs = jax.device_put(x, P("data", None))
        f = jax.jit(mlp_forward)
        out = f(got, xs)
        expect_close(out, _mlp_np(params, x), "mlp_forward の結果", rtol=1e-4, atol=1e-4)
        counts = _counts(f, got, xs)
    if m == 1:
        return "W1 と W2 を 'model' 軸で分けました（model 軸が 1 なので通信もメモリ削減も現れません）。"
    if counts != {"all-reduce": 1}:
        raise Fail(f"mlp_forward の通信が期待と違います: 期待 all-reduce ×1 だけ、実際 {_comm(counts)}。"
                   "バイアスの配置も見直しましょう（b1 は隠れ層の軸、b2 は複製）。")
    return (f"W1・W2 は 1 台あたり 1/{m} のメモリ、forward の通信は all-reduce ×1 だけです"
            f"（メッシュ data={d} × model={m}）。")
