"""6.5 の小テストのチェックで共有する部品（記号の読み取り、選択肢の実行と採点、メッシュ）。"""
from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Callable

from ...checking import Fail, call, cannot_tell, fmt, n_devices

CHOICES = ("a", "b", "c", "d")


# ---------------------------------------------------------------- 共通部品

def _spaced(text: str) -> str:
    """後ろに日本語が続く値: 英数字で終われば空白を 1 つ足す（「None です」「float32）です」）。"""
    return text + " " if text[-1:].isascii() and text[-1:].isalnum() else text


def _describe(value) -> str:
    """文字列でない値を、1 行の短い説明に（配列の中身や repr は出さない）。"""
    if value is None:
        return "None"
    if isinstance(value, (bool, int, float)):
        return f"{type(value).__name__} の {fmt(value)}"
    shape = getattr(value, "shape", None)
    if shape is not None:
        name = type(value).__name__
        if "Tracer" in name:
            kind = "トレーサ"
        elif type(value).__module__.startswith("numpy"):
            kind = "NumPy の配列"
        elif type(value).__module__.startswith("jax"):
            kind = "JAX の配列"
        else:
            kind = name
        try:
            dims = fmt(tuple(int(d) for d in shape))
        except Exception:  # 形を数にできないもの
            dims = "?"
        dtype = getattr(value, "dtype", None)
        return f"{kind}（形 {dims}{f'、{dtype}' if dtype is not None else ''}）"
    if isinstance(value, (list, tuple, dict, set)):
        return f"{type(value).__name__}（要素 {len(value)} 個）"
    if callable(value):
        return "関数（記号ではなく関数が返っています）"
    if type(value).__name__ == "P" and type(value).__module__.startswith("jax"):
        return "PartitionSpec"
    return type(value).__name__


def _choice(fn) -> str:
    """学習者の関数を呼び、選択肢の記号（小文字 1 文字）に直す。おかしな値は Fail。"""
    got = call(fn)
    if not isinstance(got, str):
        raise Fail(f"選択肢の記号を文字列で返してください（例: return \"a\"）。受け取ったのは {_spaced(_describe(got))}です。")
    key = unicodedata.normalize("NFKC", got).strip().lower()
    if key not in CHOICES:
        shown = repr(got[:20]) + ("…" if len(got) > 20 else "")
        raise Fail(f"選択肢は \"a\"〜\"d\" のどれか 1 つです（受け取ったのは {shown}）。記号を 1 文字だけ返してください。")
    return key


@dataclasses.dataclass(frozen=True)
class Outcome:
    """選択肢のコードを実際に動かした結果。ok: 問の求めるものと一致した。text: 何が起きたか（短い日本語）。"""

    ok: bool
    text: str


def outcome_of(thunk: Callable[[], object], judge: Callable[[object], Outcome]) -> Outcome:
    """選択肢のコードを実行し、例外なら「〇〇Error になります」、そうでなければ judge で判定する。"""
    try:
        result = thunk()
    except Exception as exc:  # 選択肢のコードが起こすエラー（学習者のコードではない）
        return Outcome(False, f"{type(exc).__name__} になります")
    return judge(result)


def shapes_text(x) -> str:
    """配列・辞書・タプルの形を 1 行で（{W: (64, 3, 10), b: (64, 3)} など）。"""
    if hasattr(x, "shape"):
        return fmt(tuple(x.shape))
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k}: {shapes_text(v)}" for k, v in sorted(x.items())) + "}"
    if isinstance(x, (list, tuple)):
        return "(" + ", ".join(shapes_text(v) for v in x) + ")"
    return type(x).__name__


def quiz_mesh():
    """問題文の mesh と同じ: いまのデバイス全部、軸 data、Explicit（jax.make_mesh の既定）。"""
    import jax

    return jax.make_mesh((n_devices(),), ("data",))


def auto_mesh():
    import jax
    from jax.sharding import AxisType

    return jax.make_mesh((n_devices(),), ("data",), axis_types=(AxisType.Auto,))


def _single_note(correct: set[str], n: int) -> str:
    """デバイス 1 個で区別できなくなった選択肢（どれも正解として扱う）を、✅ の行で断る。"""
    if n == 1 and len(correct) > 1:
        return cannot_tell(f"選択肢 {'・'.join(sorted(correct))} の違い")
    return ""


def grade(fn, correct: set[str], why: dict[str, str], ok: str,
           outcomes: dict[str, Outcome] | None = None) -> str:
    """correct に入っていれば ok を返し、違えば選んだ選択肢の誤りの理由（と、実際に動かした結果）で Fail。"""
    if not correct:  # どの選択肢も当たらない: 問題の前提が崩れている（チェッカ側の問題）
        raise RuntimeError("no choice matches what JAX computed")
    key = _choice(fn)
    if key in correct:
        note = _single_note(correct, n_devices())   # 1 文のまま: 最後の「。」の前に入れる
        return ok.removesuffix("。") + note + "。" if note else ok
    text = outcomes[key].text if outcomes and key in outcomes else ""
    ran = f"（実際に動かすと、{text}）" if text else ""
    raise Fail(f"「{key}」は違います。{why[key].removesuffix('。')}{ran}。")


def eval_option(source: str, namespace: dict):
    return eval(source, dict(namespace))


def jax_namespace() -> dict:
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    return {"jax": jax, "jnp": jnp, "lax": lax, "P": P, "NamedSharding": NamedSharding, "n_devices": n_devices()}
