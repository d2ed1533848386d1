"""6.3a jit + sharding（Auto / Explicit）の演習チェック。

メッシュと隠し入力はチェックのたびに jax.device_count() から作ります（デバイス 1〜8 個のどれでも動く）。
メッシュは ch6.meshes（ノートブックと同じ決め方: 2 次元は偶数なら (n/2, 2)、奇数なら (n, 1)）。
通信の有無はコンパイル済み HLO を ch6.hlo.count_collectives で数えて確かめ、「集団通信なし」などの
表記は ch6.show.collectives_line の 1 通りだけを使います。
デバイスが 1 個のとき（や軸の長さが 1 のとき）は通信がそもそも現れないので、シャーディングの指定
（PartitionSpec）から規則で判定し、その旨をメッセージに書きます。

学習者が返した値（PartitionSpec、配列、辞書）は、使う前に必ず確かめます。同じ軸を 2 度使う spec や、
渡したのとは別のメッシュに置かれた配列は、チェッカーの内部エラーではなく不正解として説明します。

演習ごとに「必ず守ること」と「自由なこと」:

- 6.3a-1 place_tokens: tokens (B, T, D) のバッチ軸を data、系列軸を model で分け、特徴軸は分けない。
  mask (B, T) も同じ分け方。渡された mesh に置く。自由: device_put / reshard、NamedSharding / set_mesh + P、
  末尾の None の有無、タプルとリストのどちらで返すか。
- 6.3a-2 predict_collectives: 5 つのケースの通信の名前。自由: 大文字小文字、'_' と '-'、'none' / None / 'なし'。
- 6.3a-3 no_comm_specs: y = x @ w.T を、w を data で分けたまま通信なしで。自由: P かタプルか、末尾の None。
- 6.3a-4 attention_scores: 出力の型が P('data', None, None) で、通信は部分和の all-reduce だけ。
  自由: einsum か matmul / @ か（転置の書き方も）。
- 6.3a-5 shard_gated_mlp: 隠れ層の軸（長さ H）を持つ葉はどれも model で分け、b_down は複製、data は使わない。
  forward（:func:`gated_mlp`、ノートブックもこの定義を import する）の通信は all-reduce 1 回だけ。
  自由: device_put / reshard、辞書内包表記 / jax.tree.map。
"""
from __future__ import annotations

import numpy as np

from .._core import Fail, LearnerError, call, exercise, expect_close
from .._core import f32 as _f32, hidden_rng, n_devices as _n
from .. import explain, meshes
from ..show import collectives_line

# ---------------------------------------------------------------- 共通の部品


def _rng(tag: int) -> np.random.Generator:
    return hidden_rng(63_100 + tag)


def _mesh_1d_auto():
    """全デバイスを 1 列に並べた 'data' メッシュ（Auto）。"""
    from jax.sharding import AxisType

    return meshes.mesh_1d("data", AxisType.Auto)


def _entries(spec) -> tuple:
    """PartitionSpec の各次元の指定（unreduced などがあっても iter せずに読む）。"""
    parts = getattr(spec, "partitions", None)
    return tuple(parts) if parts is not None else tuple(spec)


def norm_spec(spec) -> tuple:
    """PartitionSpec を比べやすい形に: 1 要素のタプルは名前に、末尾の None は落とす。"""
    out = []
    for e in _entries(spec):
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


def _raw_text(x) -> str:
    text = explain.clean(repr(x))
    return text if len(text) <= 60 else text[:59] + "…"


def as_spec(x, what: str, ndim: int, axes: tuple[str, ...]):
    """学習者が返した spec（PartitionSpec、そのつもりのタプル・リスト、None）を確かめて PartitionSpec にする。

    次元の数、メッシュにない軸の名前、同じ軸の 2 度使い、unreduced などを、使う前に不正解として説明する。
    """
    from jax.sharding import PartitionSpec as P

    if x is None:
        return P()
    if isinstance(x, (tuple, list)) and not isinstance(x, P):
        try:
            x = P(*x)
        except Exception as exc:
            raise Fail(f"{what} を PartitionSpec にできません（{explain.explain(exc)}）") from None
    if not isinstance(x, P):
        raise Fail(f"{what} は PartitionSpec のはずですが、{type(x).__name__} が返りました。"
                   "P('data', None) のように書きます。")
    if getattr(x, "unreduced", None) or getattr(x, "reduced", None):
        raise Fail(f"{what} に unreduced / reduced の指定があります。この演習では各次元の分け方だけを書きます。")
    entries = _entries(x)
    if len(entries) > ndim:
        raise Fail(f"{what} = {_raw_text(x)} は {len(entries)} 次元分ありますが、配列は {ndim} 次元です。")
    names: list[str] = []
    for e in entries:
        group = e if isinstance(e, (tuple, list)) else (e,)
        for name in group:
            if name is None:
                continue
            if not isinstance(name, str):
                raise Fail(f"{what} = {_raw_text(x)} の要素は、メッシュの軸の名前（文字列）か None にします。")
            if name not in axes:
                raise Fail(f"{what} = {_raw_text(x)} の {name!r} はメッシュにない軸です"
                           f"（使える軸は {' / '.join(repr(a) for a in axes)}）。")
            names.append(name)
    dup = sorted({a for a in names if names.count(a) > 1})
    if dup:
        raise Fail(f"{what} = {_raw_text(x)} は軸 {dup[0]!r} を 2 度使っています。"
                   "1 つのメッシュの軸で分けられるのは、配列の 1 つの次元だけです。")
    return x


def _as_pair(got, names: tuple[str, ...]):
    """タプルでもリストでも受け取る（どの演習でも同じ規則）。長さが違えば不正解。"""
    if not isinstance(got, (tuple, list)) or len(got) != len(names):
        what = f"長さ {len(got)} の {type(got).__name__}" if isinstance(got, (tuple, list)) else type(got).__name__
        raise Fail(f"({', '.join(names)}) の {len(names)} つ組（タプルかリスト）を返してください（返ったのは {what}）。")
    return tuple(got)


def placed_spec(arr, what: str, mesh, hint: str) -> tuple:
    """配列が、渡したメッシュの NamedSharding で置かれていることを確かめ、正規化した spec を返す。"""
    import jax
    from jax.sharding import NamedSharding

    if not isinstance(arr, jax.Array):
        raise Fail(f"{what} がデバイス上の JAX 配列ではありません（{type(arr).__name__}）。{hint}")
    sharding = arr.sharding
    if not isinstance(sharding, NamedSharding):
        raise Fail(f"{what} のシャーディングが NamedSharding ではありません（{type(sharding).__name__}）。{hint}")
    if sharding.mesh != mesh:
        mine = "×".join(f"{k}={v}" for k, v in sharding.mesh.shape.items())
        raise Fail(f"{what} が、引数の mesh とは別のメッシュ（{mine}）に置かれています。"
                   "自分でメッシュを作らず、渡された mesh を使ってください。")
    return norm_spec(sharding.spec)


def _learner_step(what: str, fn, *args):
    """学習者の値を使って JAX を動かす（エラーはチェッカーの内部エラーではなく不正解として説明する）。"""
    try:
        return call(fn, *args)
    except LearnerError as err:
        raise Fail(f"{what}、エラーになりました: {explain.explain(err.exc)}") from None


def _counts(f, *args) -> dict:
    from ..hlo import count_collectives

    return count_collectives(f, *args)


# 6.3a-1 ------------------------------------------------------------------------------

@exercise("6.3a-1", "place_tokens")
def check_place_tokens(fn):
    d, m = meshes.mesh_2d_shape()
    mesh = meshes.mesh_2d(("data", "model"))
    rng = _rng(1)
    B, T, D = 2 * d, 3 * m, 5  # D はどの軸の長さでも割り切れないとは限らないが、分けてはいけない軸
    tokens = _f32(rng.normal(size=(B, T, D)))
    mask = _f32(rng.random(size=(B, T)) < 0.7)
    got = _as_pair(call(fn, tokens.copy(), mask.copy(), mesh), ("tokens", "mask"))
    gt, gm = got
    if getattr(gt, "shape", None) == mask.shape and getattr(gm, "shape", None) == tokens.shape:
        raise Fail("返す順番が逆です: (tokens, mask) の順に返してください。")
    hint = "jax.device_put(tokens, NamedSharding(mesh, P(...))) のように、渡された mesh に置きます。"
    st = placed_spec(gt, "tokens", mesh, hint)
    sm = placed_spec(gm, "mask", mesh, hint)
    expect_close(gt, tokens, "tokens ", hint="device_put は値を変えません。")
    expect_close(gm, mask, "mask ", hint="device_put は値を変えません。")
    want = ("data", "model")
    if st != want:
        raise Fail(f"tokens の spec が違います: 期待 P('data', 'model', None)、実際 {show_spec(st, 3)}。"
                   "spec の 1 番目が 0 軸（バッチ B）、2 番目が 1 軸（系列 T）、3 番目が 2 軸（特徴 D）に対応します。")
    if sm != want:
        raise Fail(f"mask の spec が違います: 期待 P('data', 'model')、実際 {show_spec(sm, 2)}。"
                   "mask も tokens と同じ (B, T) の分け方にすると、各デバイスが自分のトークンのマスクを手元に持てます。")
    # 性質そのもの: どのデバイスでも、持っている mask のブロックが、持っている tokens のブロックと同じ (B, T) の範囲
    where_t = {s.device.id: tuple(s.index[:2]) for s in gt.addressable_shards}
    where_m = {s.device.id: tuple(s.index[:2]) for s in gm.addressable_shards}
    if where_t != where_m:
        raise Fail("tokens と mask で、同じデバイスが持つ (B, T) の範囲が違います。同じ spec で置いてください。")
    per = gt.addressable_shards[0].data.shape
    return (f"隠し入力 tokens {tokens.shape} を、デバイス {d * m} 個（data={d} × model={m}）に "
            f"{per} ずつ、mask も同じ (B, T) の範囲で配置しました。")


# 6.3a-2 ------------------------------------------------------------------------------

# 演習の表と同じ 5 つのケース: y = a.T @ b（a は (K, M)、b は (K, N)、縮約軸は K）、メッシュは 1 次元 'data'
PREDICT_CASES = {
    "A": (("data", None), ("data", None), ()),
    "B": ((None, "data"), (), ("data", None)),
    "C": ((None, "data"), (None, "data"), ("data", None)),
    "D": ((), (None, "data"), (None, "data")),
    "E": ((None, "data"), (), ()),
}
ANSWER = {"A": "all-reduce", "B": "none", "C": "all-gather", "D": "none", "E": "all-gather"}
_CASE_HINT = {
    "A": "a.T @ b で足し合わせる軸は a の 0 軸と b の 0 軸（K）です。",
    "B": "a の 1 軸（M）は、a.T では行、つまり出力の行になります。",
    "C": "出力の行（a の M）と出力の列（b の N）を、同じ 'data' 軸では同時に分けられません。",
    "D": "a は複製なので、各デバイスは b の自分の列だけで出力の列を作れます。",
    "E": "計算は手元でできますが、出力を P()（複製）にするには、分かれた行を集める必要があります。",
}
VALID = ("none", "all-gather", "all-reduce", "reduce-scatter", "all-to-all")


def _norm_name(v) -> str | None:
    if v is None:
        return "none"
    if not isinstance(v, str):
        return None
    s = v.strip().lower().replace("_", "-").replace(" ", "-")
    s = {"なし": "none", "通信なし": "none", "集団通信なし": "none", "": "none", "allgather": "all-gather",
         "allreduce": "all-reduce", "psum": "all-reduce", "reducescatter": "reduce-scatter",
         "alltoall": "all-to-all"}.get(s, s)
    return s


def case_arrays(n: int, seed: int = 2):
    """y = a.T @ b の隠し入力（どの長さもデバイスの数の倍数）。"""
    rng = _rng(seed)
    a = _f32(rng.normal(size=(3 * n, 4 * n)))
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
    f = jax.jit(lambda u, v: u.T @ v, out_shardings=so)
    return f(a, b), _counts(f, a, b)


def compiled_answers() -> dict[str, str]:
    """このデバイス数でコンパイルした HLO から読んだ、各ケースの通信（1 種類だけのはず）。"""
    out = {}
    for case in PREDICT_CASES:
        _, counts = compiled_case(case)
        kinds = sorted(counts)
        out[case] = "none" if not kinds else "+".join(kinds)
    return out


@exercise("6.3a-2", "predict_collectives")
def check_predict(fn):
    got = call(fn)
    if not isinstance(got, dict):
        raise Fail(f"{{'A': 'none', ...}} のような辞書を返してください（返ったのは {type(got).__name__}）。")
    got = {(k.strip().upper() if isinstance(k, str) else k): v for k, v in got.items()}
    missing = [k for k in ANSWER if k not in got]
    if missing:
        raise Fail(f"ケース {', '.join(missing)} の予想がありません。A から E まで 5 つ答えてください。")
    names = {k: _norm_name(got[k]) for k in ANSWER}
    bad = [k for k, v in names.items() if v not in VALID]
    if bad:
        k = bad[0]
        raise Fail(f"ケース {k} の答え {_raw_text(got[k])} は通信の名前ではありません。"
                   f"{' / '.join(repr(v) for v in VALID)} から選んでください。")
    n = _n()
    # 2 デバイス以上なら、答えはこのデバイス数で実際にコンパイルした HLO（1 デバイスでは通信が現れないので規則の表）
    truth = compiled_answers() if n > 1 else dict(ANSWER)
    wrong = [k for k in ANSWER if names[k] != truth[k]]
    if wrong:
        k = wrong[0]
        raise Fail(f"5 つ中 {5 - len(wrong)} つ正解です。ケース {k} は {names[k]!r} ではありません。"
                   f"ヒント: {_CASE_HINT[k]}")
    if n == 1:
        return "A〜E の予想がすべて合っています（1 デバイスでは通信が現れないので、デバイス 2 個以上で実際に確かめられます）。"
    return f"A〜E の予想は、デバイス {n} 個でこのチェックがコンパイルした HLO の集団通信とすべて一致します。"


# 6.3a-3 ------------------------------------------------------------------------------

def needs_comm_by_rule(sx: tuple, sw: tuple, so: tuple) -> str:
    """1 次元メッシュ上の y = x @ w.T（x は (B, D)、w は (H, D)）が通信なしで済むかを、spec の規則だけで判定する。

    通信なしで済む条件: 縮約軸（x の 1 軸、w の 1 軸）がどちらも分かれておらず、x の 0 軸と w の 0 軸を
    同じメッシュ軸で分けず、出力の spec が (x の 0 軸の spec, w の 0 軸の spec) に一致すること。
    問題があれば理由の短い文を、なければ空文字を返す。
    """
    x = tuple(sx) + (None,) * (2 - len(sx))
    w = tuple(sw) + (None,) * (2 - len(sw))
    o = tuple(so) + (None,) * (2 - len(so))
    if x[1] is not None or w[1] is not None:
        return "縮約する軸（x の 1 軸 / w の 1 軸、長さ D）が分かれているので、部分和を足し合わせる all-reduce か集め直しが要ります"
    if x[0] is not None and x[0] == w[0]:
        return "出力の行（x の 0 軸）と出力の列（w の 0 軸）を同じメッシュ軸で分けているので、片方を集め直す all-gather が要ります"
    if o != (x[0], w[0]):
        return (f"各デバイスが手元で作る出力は P({x[0]!r}, {w[0]!r}) の形なので、"
                f"{show_spec(so, 2)} にするには集め直し（all-gather など）が要ります")
    return ""


@exercise("6.3a-3", "no_comm_specs")
def check_no_comm(fn):
    import jax
    from jax.sharding import NamedSharding

    names = ("x_spec", "w_spec", "out_spec")
    got = _as_pair(call(fn), names)
    specs = [as_spec(s, what, 2, ("data",)) for s, what in zip(got, names)]
    sx, sw, so = (norm_spec(s) for s in specs)
    if "data" not in sw:
        raise Fail(f"w_spec = {show_spec(sw, 2)} では w が全デバイスに複製されます。"
                   "この演習では w が大きいので、どこかの軸を 'data' で分けてください。")
    n = _n()
    mesh = _mesh_1d_auto()
    rng = _rng(3)
    x = _f32(rng.normal(size=(4 * n, 3 * n)))
    w = _f32(rng.normal(size=(2 * n, 3 * n)))
    shard = [NamedSharding(mesh, s) for s in specs]

    def place_and_compile():
        xs, ws = jax.device_put(x, shard[0]), jax.device_put(w, shard[1])
        f = jax.jit(lambda a, b: a @ b.T, out_shardings=shard[2])
        return f(xs, ws), _counts(f, xs, ws)

    out, counts = _learner_step("その spec で x @ w.T をコンパイルしたところ", place_and_compile)
    expect_close(out, x @ w.T, "x @ w.T の結果", rtol=1e-4, atol=1e-4)
    why = needs_comm_by_rule(sx, sw, so)
    if n == 1:
        if why:
            raise Fail(f"1 デバイスなので通信は現れませんが、デバイス 2 個以上では{why}。")
        return "spec の規則では通信なしです（1 デバイスでは通信が現れないので、デバイス 2 個以上で HLO を確かめられます）。"
    if counts:
        raise Fail(f"コンパイル済み HLO に通信が入りました: {collectives_line(counts)}。"
                   f"{why or '縮約軸と出力の spec を見直しましょう'}。")
    return (f"x {show_spec(sx, 2)}、w {show_spec(sw, 2)}、出力 {show_spec(so, 2)} で、"
            f"デバイス {n} 個の HLO は{collectives_line(counts)}です。")


# 6.3a-4 ------------------------------------------------------------------------------

@exercise("6.3a-4", "attention_scores")
def check_attention_scores(fn):
    import jax
    from jax.sharding import PartitionSpec as P

    d, m = meshes.mesh_2d_shape()
    mesh = meshes.mesh_2d(("data", "model"))
    rng = _rng(4)
    B, Sq, Sk, D = 2 * d, 3, 5, 4 * m  # Sq と Sk を変えて、q と k の取り違えも見える
    q = _f32(rng.normal(size=(B, Sq, D)))
    k = _f32(rng.normal(size=(B, Sk, D)))
    want = np.einsum("bqd,bkd->bqk", q, k)
    with jax.set_mesh(mesh):
        qs = jax.device_put(q, P("data", None, "model"))
        ks = jax.device_put(k, P("data", None, "model"))
        f = jax.jit(fn)
        try:
            out = call(f, qs, ks)
        except LearnerError as err:
            if type(err.exc).__name__ == "ShardingTypeError" and "ambiguous" in str(err.exc):
                raise Fail("まだ ShardingTypeError が出ます: 縮約軸 D が 'model' で分かれているので、"
                           "einsum（または matmul）に out_sharding で出力のシャーディングを指定しましょう。") from None
            raise
        expect_close(out, want, "attention_scores(q, k) の結果", rtol=1e-4, atol=1e-4)
        spec = norm_spec(jax.typeof(out).sharding.spec)
        if spec != ("data",):
            extra = "（複製: バッチが分かれていません）" if spec == () else ""
            raise Fail(f"出力の型のシャーディングが違います: 期待 P('data', None, None)、実際 {show_spec(spec, 3)}{extra}。"
                       "out_sharding で出力を P('data', None, None) にします。")
        counts = call(_counts, f, qs, ks)
    if counts.get("all-gather") or set(counts) - {"all-reduce"}:
        raise Fail(f"結果は正しいのですが、余分な通信があります（{collectives_line(counts)}）。"
                   "q や k を reshard で集め直さず、out_sharding で部分和を足し合わせる（all-reduce）だけにしましょう。")
    if m == 1:
        return "出力の型は P('data', None, None) です（model 軸の長さが 1 なので通信は現れません）。"
    return f"出力の型は P('data', None, None)、通信は {collectives_line(counts)} だけです。"


# 6.3a-5 ------------------------------------------------------------------------------

def gated_mlp(params, x):
    """ゲート付き MLP（SwiGLU 型）の forward。演習 6.3a-5 のノートブックとチェックが、この 1 つの定義を使います。

    gate と up は同じ隠れ層の軸 H を持ち、要素ごとに掛けてから W_down で出力の次元 O に戻します。
    出力のシャーディングは out_sharding で P('data', None)（バッチで分割し、出力の特徴は分割しない）にします。
    """
    import jax  # ch6 を読み込むだけでは JAX を読み込まないよう、関数の中で import します
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    gate = jax.nn.silu(x @ params["W_gate"] + params["b_gate"])
    up = x @ params["W_up"] + params["b_up"]
    return jnp.matmul(gate * up, params["W_down"], out_sharding=P("data", None)) + params["b_down"]


def _gated_mlp_np(p, x):
    g = x @ p["W_gate"] + p["b_gate"]
    g = g / (1.0 + np.exp(-g))
    return (g * (x @ p["W_up"] + p["b_up"])) @ p["W_down"] + p["b_down"]


# 隠れ層の軸（H）がどこにあるか: その次元を 'model' で分けるのが正解。b_down には H の軸がない（複製）
HIDDEN_AXIS = {"W_gate": 1, "b_gate": 0, "W_up": 1, "b_up": 0, "W_down": 0, "b_down": None}


def want_spec(key: str, ndim: int) -> tuple:
    axis = HIDDEN_AXIS[key]
    if axis is None:
        return ()
    return norm_spec(tuple("model" if i == axis else None for i in range(ndim)))


@exercise("6.3a-5", "shard_gated_mlp")
def check_shard_gated_mlp(fn):
    import jax
    from jax.sharding import PartitionSpec as P

    d, m = meshes.mesh_2d_shape()
    mesh = meshes.mesh_2d(("data", "model"))
    rng = _rng(5)
    D, H, O = 3 * d * m, 4 * m, 2 * m  # O は model の長さで割り切れる（b_down を分ける誤りも、エラーでなく見える）
    params = {"W_gate": rng.normal(size=(D, H)) * 0.5, "b_gate": rng.normal(size=(H,)) * 0.3,
              "W_up": rng.normal(size=(D, H)) * 0.5, "b_up": rng.normal(size=(H,)) * 0.3,
              "W_down": rng.normal(size=(H, O)) * 0.5, "b_down": rng.normal(size=(O,)) * 0.3}
    params = {k: _f32(v) for k, v in params.items()}
    x = _f32(rng.normal(size=(4 * d, D)))
    got = call(fn, {k: v.copy() for k, v in params.items()}, mesh)
    if not isinstance(got, dict) or set(got) != set(params):
        keys = sorted(map(str, got)) if isinstance(got, dict) else type(got).__name__
        raise Fail(f"{sorted(params)} をキーに持つ辞書を返してください（返ったのは {keys}）。")
    hint = "jax.device_put(p, NamedSharding(mesh, spec)) のように、渡された mesh に置きます。"
    specs = {k: placed_spec(got[k], k, mesh, hint) for k in params}
    for k in params:
        expect_close(got[k], params[k], f"{k} ", hint="device_put は値を変えません。")
    for k, v in specs.items():
        if any("data" in (e if isinstance(e, tuple) else (e,)) for e in v):
            raise Fail(f"{k} が 'data' 軸で分かれています（{show_spec(v, params[k].ndim)}）。この演習ではパラメータは "
                       "'model' 軸だけで分け、'data' 方向には複製します。")
    for k in params:
        want, nd = want_spec(k, params[k].ndim), params[k].ndim
        if specs[k] == want:
            continue
        if HIDDEN_AXIS[k] is None:
            raise Fail(f"{k} は複製（P()）にします: 実際 {show_spec(specs[k], nd)}。"
                       "b_down は出力（P('data', None)）に足すので、出力の特徴の軸は分けません。")
        if specs[k] == ():
            raise Fail(f"{k} が複製（P()）のままです: 隠れ層の軸 H を持つパラメータは、どれも 1 デバイスあたりの"
                       f"メモリを model 軸の長さ分の 1 にします。期待 {show_spec(want, nd)}。")
        raise Fail(f"{k} の spec が違います: 期待 {show_spec(want, nd)}、実際 {show_spec(specs[k], nd)}。"
                   "分けるのは隠れ層の軸 H です（W_gate・W_up は列、W_down は行、b_gate・b_up はその軸）。")
    for k in params:  # 性質そのもの: H を持つ葉は、1 デバイスあたり 1/m のメモリ
        if HIDDEN_AXIS[k] is not None:
            per_dev = got[k].addressable_shards[0].data.nbytes
            if per_dev * m != params[k].nbytes:
                raise Fail(f"{k} の 1 デバイスあたりのバイト数が {per_dev} で、全体 {params[k].nbytes} の 1/{m} "
                           "になっていません。")

    def forward():
        with jax.set_mesh(mesh):
            xs = jax.device_put(x, P("data", None))
            f = jax.jit(gated_mlp)
            out = f(got, xs)
            return out, jax.typeof(out), _counts(f, got, xs)

    out, typ, counts = _learner_step("そのパラメータで gated_mlp を実行したところ", forward)
    expect_close(out, _gated_mlp_np(params, x), "gated_mlp の結果", rtol=1e-4, atol=1e-4)
    if norm_spec(typ.sharding.spec) != ("data",):
        raise Fail(f"gated_mlp の出力の型が P('data', None) になりません（{typ}）。")
    if m == 1:
        return ("隠れ層の軸を 'model' で分割しました（model 軸の長さが 1 なので、通信もメモリの削減も現れません。"
                "デバイスが偶数個なら現れます）。")
    if counts != {"all-reduce": 1}:
        raise Fail(f"gated_mlp の通信が期待と違います: 期待 all-reduce ×1 だけ、実際 {collectives_line(counts)}。")
    return (f"隠れ層の軸を持つ 5 つのパラメータは 1 デバイスあたり 1/{m} のメモリ、forward の通信は all-reduce ×1 だけです"
            f"（メッシュ data={d} × model={m}）。")
