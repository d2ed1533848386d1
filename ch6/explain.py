"""学習者のコードで起きた例外を、日本語の 1 行にする（チェックのメッセージと採点の備考が使う）。

JAX のよくあるエラーは、役に立つ部分（どの引数、どの軸、どの大きさ）を残して日本語の文にします。
知らないエラーは型と英語の原文の最初の部分を「」で引用します。パス、メモリのアドレス、
関数の repr（``<function f at 0x…>``）は取り除きます。
"""
from __future__ import annotations

import re

from . import sanitize

_FUNC_REPR = re.compile(r"<function (?:[\w.<>]+?\.<locals>\.)*([\w<>]+) at 0x(?:[0-9a-fA-F…]+|ADDR)>")
_PATH = re.compile(r"(?:[A-Za-z]:)?[\\/](?:[^\s:'\"]+[\\/])+([\w.-]+\.py)(?::\d+)?")
_CLASS = re.compile(r"<class '(?:[\w]+\.)*(\w+)'>")


def tidy(text: str) -> str:
    """アドレス・パス・関数やクラスの repr を取り除く（行はそのまま）。"""
    text = sanitize.clean(str(text))
    text = _FUNC_REPR.sub(lambda m: f"関数 {m.group(1)}", text)
    text = _PATH.sub(lambda m: m.group(1), text)
    return _CLASS.sub(lambda m: m.group(1), text)


def clean(text: str) -> str:
    """tidy した文字列の、最初の空でない 1 行。"""
    return next((ln.strip() for ln in tidy(text).splitlines() if ln.strip()), "")


def cut(text: str, limit: int) -> str:
    """limit 文字までに縮める。英文は単語の途中で切らず、切ったら「…」を付ける。"""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space >= limit // 2:  # 空白で区切られた文（英語）なら単語の境目で切る
        head = head[:space]
    return head.rstrip(" ,;:") + "…"




_SIZE_LINE = re.compile(r"(?:one axis|most axes \((\d+) of them\)) had size (\d+)(?::|, e\.g\.) axis (\d+) of argument ([^\s;]+)")


def vmap_sizes(msg: str) -> list[tuple[str, int, int, int]]:
    """vmap の inconsistent sizes のメッセージ -> [(引数の名前, 軸, 長さ, その長さの軸の数)]。

    JAX は同じ長さの軸が 2 つ以上あると「most axes (2 of them) had size 7, e.g. axis 0 of argument c」と
    1 つだけ例に挙げます。そのときの数は 2 以上です。"""
    return [(name, int(axis), int(size), int(count or 1)) for count, size, axis, name in _SIZE_LINE.findall(msg)]


def vmap_sizes_text(msg: str) -> str:
    """vmap の inconsistent sizes から「引数 … の N 軸が S」（S は軸の長さ）の並びを作る（読めなければ空）。"""
    parts = vmap_sizes(msg)
    if parts:
        return "、".join(f"{name} の {axis} 軸{f'など {count} 個' if count > 1 else ''}が {size}"
                        for name, axis, size, count in parts)
    return "、".join(f"引数の {a} 軸が {s}" for s, a in re.findall(r"size (\d+)[^;]*?axis (\d+)", msg))


# (例外の型名の正規表現, メッセージの正規表現, 日本語を作る関数)
_RULES: list[tuple[str, re.Pattern, object]] = [
    ("ValueError", re.compile(r"vmap got inconsistent sizes for array axes to be mapped", re.S),
     lambda m, msg: f"vmap でバッチにする軸の長さがそろっていません（{vmap_sizes_text(msg) or '長さの違う軸があります'}）。"
                    "in_axes で、どの引数のどの軸をバッチにするかを確かめてください。"),
    ("ValueError", re.compile(r"vmap was requested to map its argument along axis (-?\d+), which implies that its rank "
                              r"should be at least (\d+), but is only (\d+) \(its shape is (\(.*?\))\)"),
     lambda m, msg: f"in_axes で {m.group(1)} 軸目をバッチにするよう指定した引数が、形 {m.group(4)}（{m.group(3)} 次元）しか"
                    f"ありません。その引数のどの軸がバッチか（全サンプルで共通なら None）を確かめてください。"),
    ("ValueError", re.compile(r"vmap must have at least one non-None value in in_axes"),
     lambda m, msg: "vmap の in_axes がすべて None で、バッチにする引数が 1 つもありません。"
                    "サンプルごとに違う引数の軸（たいていは 0）を指定してください。"),
    ("ValueError", re.compile(r"vmap in_axes specification must be a tree prefix"),
     lambda m, msg: "vmap の in_axes の形が引数の形（pytree の構造）と合いません。引数 1 つにつき 1 つの指定を、"
                    "同じ入れ子の形で渡してください。"),
    ("ValueError", re.compile(r"vmap has mapped output but out_axes is None|at vmap out_axes, got axis spec None"),
     lambda m, msg: "out_axes=None（出力をバッチにしない）と指定しましたが、出力はバッチ軸を持っています。"),
    ("ValueError", re.compile(r"vmap (?:in_axes|out_axes) .*?(?:out of bounds|must be)", re.S),
     lambda m, msg: f"vmap の軸の指定が配列の次元を超えています（「{cut(clean(msg), 80)}」）。"),
    ("NameError", re.compile(r"unbound axis name: ([^\s.]+)|axis name '?(\S+?)'? (?:is )?not (?:found|bound)"),
     lambda m, msg: f"軸の名前 {m.group(1) or m.group(2)} が見つかりません。vmap/pmap の axis_name やメッシュの軸の名前と"
                    "同じ名前を集団通信に渡してください。"),
    ("TypeError", re.compile(r"Expected a callable value, got (.*)"),
     lambda m, msg: f"関数を渡すところに関数でない値（{cut(m.group(1), 40)}）が渡されました。"),
    ("TypeError", re.compile(r"(?:Output from batched function|Argument|Value) '?(.*?)'? (?:with|of) (?:type|dtype) '?(\S+?)'? "
                             r"(?:is not a valid JAX (?:type|array type))"),
     lambda m, msg: f"JAX の配列ではない値（{cut(m.group(1), 40)}、型 {m.group(2).strip('<>').rstrip(',.')}）が"
                    "計算に使われました。数値の配列（またはその pytree）を返すように関数を書いてください。"),
    ("TypeError", re.compile(r"traced for (?:jit|shard_map|pmap) returned a value of type (\S+)"),
     lambda m, msg: f"jit した関数が JAX の配列ではない値（型 {m.group(1).strip('<>,')}）を返しました。"
                    "数値の配列（またはその pytree）を返してください。"),
    ("UnexpectedTracerError", re.compile(r".*"),
     lambda m, msg: "トレーサ（jit や vmap の中の値）が関数の外へ漏れています。変換の中の値をグローバル変数などに"
                    "保存して、あとで使っていませんか。"),
    ("TracerBoolConversionError|ConcretizationTypeError", re.compile(r".*"),
     lambda m, msg: "トレースの途中で、値によって分岐する Python の if や bool() を使っています。"
                    "jnp.where や lax.cond を使ってください。"),
    ("ValueError", re.compile(r"Received incompatible devices for jitted computation"),
     lambda m, msg: "違うデバイスの組（別のメッシュ）に配置された配列が 1 つの計算に混ざっています。"
                    "渡されたメッシュに配置し直してください。"),
    ("ValueError|DuplicateSpecError", re.compile(r"(?:duplicate|A single NamedSharding spec specification can map every mesh axis to at most one)",
                                                 re.I),
     lambda m, msg: "PartitionSpec で同じメッシュの軸を 2 度使っています。1 つの軸は 1 つの次元にしか使えません。"),
    ("ValueError|IndivisibleError", re.compile(r"(?:divisible|evenly|Indivisible)", re.I),
     lambda m, msg: f"配列の次元が、分割に使うメッシュの軸の大きさで割り切れないので、その分割はできません（「{cut(clean(msg), 90)}」）。"),
    ("ShardingTypeError", re.compile(r".*"),
     lambda m, msg: f"シャーディングの型が合いません（「{cut(clean(msg), 100)}」）。out_sharding や jax.reshard で"
                    "出力のシャーディングを決めてください。"),
    ("TypeError", re.compile(r"missing (\d+) required positional argument|takes (\d+) positional arguments? but (\d+)"),
     lambda m, msg: f"関数の引数の数が違います（「{cut(clean(msg), 80)}」）。演習の説明どおりの引数を受け取ってください。"),
    ("ValueError", re.compile(r"not enough values to unpack|too many values to unpack"),
     lambda m, msg: f"返した値の個数が、受け取る側の個数と合いません（「{cut(clean(msg), 60)}」）。"),
    ("ValueError", re.compile(r"out_specs which require replication which can't be statically inferred"),
     lambda m, msg: "out_specs（smap では out_axes=None）で複製として返す出力が、型の上では"
                    "デバイスごとに違う値（varying）のままです。lax.psum や lax.pmean でそろえてから返すか、分割したまま返してください。"),
    ("ValueError", re.compile(r"requires the current value of parameters, but you are not passing `params`"),
     lambda m, msg: "この最適化器（重み減衰付きの adamw など）は、更新の計算に現在のパラメータを使います。"
                    "optimizer.update(grads, opt_state, params) のように、3 番目の引数に params を渡してください。"),
    ("ValueError", re.compile(r"in_specs entry which is too long.*?in_specs\[(\d+)\] is (P\(.*?\)) which has length (\d+), "
                              r"but the passed args\[\d+\](?:, where args\[\d+\] is bound to .*?parameter '(\w+)')?, has shape "
                              r"(\S+), which has rank (\d+)", re.S),
     lambda m, msg: f"in_specs（smap では in_axes）の {int(m.group(1)) + 1} 番目の指定 {m.group(2)} は {m.group(3)} 次元分です。"
                    f"対応する引数{'「' + m.group(4) + '」' if m.group(4) else ''}は形 {m.group(5)}（{m.group(6)} 次元）です。"
                    "spec の長さは配列の次元の数までで、スカラー（eps など）や全デバイスで同じ値は P()（smap では None）にします。"),
    ("ValueError", re.compile(r"in_specs passed to shard_map: (.+?) does not match the specs of the input: (.+?) for arg"),
     lambda m, msg: f"in_specs（smap では in_axes）の {m.group(1)} と、渡した配列のシャーディング {m.group(2)} が合いません。"
                    "Explicit のメッシュでは、jax.device_put か jax.reshard で入力を in_specs と同じシャーディングにしてください。"),
]


def explain(exc: BaseException) -> str:
    """例外 -> 日本語の 1 行（型名を含む）。"""
    name = type(exc).__name__
    msg = tidy(str(exc))
    for types, pattern, make in _RULES:
        if re.fullmatch(types, name):
            m = pattern.search(msg)
            if m:
                return f"{name}: {make(m, msg)}"
    first = clean(msg)
    return f"{name} が起きました（原文「{cut(first, 120)}」）。" if first else f"{name} が起きました。"
