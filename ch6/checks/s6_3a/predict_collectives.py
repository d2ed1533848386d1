"""6.3a-2 predict_collectives のチェック。"""
from __future__ import annotations

from ...checking import Fail, call, exercise, f32, n_devices
from .common import comm_counts, exercise_rng, mesh_1d_auto, raw_text

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
    "C": "出力の行（a の M）と出力の列（b の N）を、同じ 'data' 軸で同時に分割することはできません。",
    "D": "a は複製なので、各デバイスは持っている b の列だけで出力の列を作れます。",
    "E": "計算は各デバイスでできますが、出力を P()（複製）にするには、分割された行を集める必要があります。",
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
    rng = exercise_rng(seed)
    a = f32(rng.normal(size=(3 * n, 4 * n)))
    b = f32(rng.normal(size=(3 * n, 2 * n)))
    return a, b


def compiled_case(case: str):
    """PREDICT_CASES の 1 つを、今のデバイス数でコンパイルして (結果, 集団通信の数) を返す。"""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = mesh_1d_auto()
    sa, sb, so = (NamedSharding(mesh, P(*s)) for s in PREDICT_CASES[case])
    a, b = case_arrays(n_devices())
    a, b = jax.device_put(a, sa), jax.device_put(b, sb)
    f = jax.jit(lambda u, v: u.T @ v, out_shardings=so)
    return f(a, b), comm_counts(f, a, b)


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
        raise Fail(f"戻り値は {{'A': 'none', ...}} のような辞書のはずが、{type(got).__name__} でした。")
    got = {(k.strip().upper() if isinstance(k, str) else k): v for k, v in got.items()}
    missing = [k for k in ANSWER if k not in got]
    if missing:
        raise Fail(f"ケース {', '.join(missing)} の予想がありません。A から E まですべて答えてください。")
    names = {k: _norm_name(got[k]) for k in ANSWER}
    bad = [k for k, v in names.items() if v not in VALID]
    if bad:
        k = bad[0]
        raise Fail(f"ケース {k} の答え {raw_text(got[k])} は通信の名前ではありません。"
                   f"{' / '.join(repr(v) for v in VALID)} から選んでください。")
    n = n_devices()
    # 2 デバイス以上なら、答えはこのデバイス数で実際にコンパイルした HLO（1 デバイスでは通信が現れないので規則の表）
    # パッケージ（ch6.checks.s6_3a）の名前を通して呼ぶ: s6_3a.compiled_answers を差し替えれば、それに従う
    from . import compiled_answers as compiled

    truth = compiled() if n > 1 else dict(ANSWER)
    wrong = [k for k in ANSWER if names[k] != truth[k]]
    if wrong:
        k = wrong[0]
        raise Fail(f"ケース {k} は {names[k]!r} ではありません（ほかに {len(wrong) - 1} ケースが違います）。{_CASE_HINT[k]}"
                   if len(wrong) > 1 else f"ケース {k} は {names[k]!r} ではありません。{_CASE_HINT[k]}")
    if n == 1:
        return "A〜E の予想がすべて合っています（HLO で確かめるにはデバイスが 2 個以上要ります）。"
    return f"A〜E の予想は、デバイス {n} 個でコンパイルした HLO の集団通信とすべて一致します。"
