"""6.9 節（仕上げ）と 6.10 節（推論）が使う、小さなデコーダだけのトランスフォーマ（バイト単位の言語モデル）。

パラメータは辞書の木で、各パラメータは **論理軸**（logical axes: ``embed``, ``heads``, ``head_dim``,
``mlp``, ``vocab``, ``norm``, ``pos``, ``layers``）を名乗ります。どの論理軸をメッシュのどの軸（``data``, ``fsdp``,
``tensor``）に分割するかは、規則の表 ``rules`` 1 つで決めます（MaxText や Flax の ``logical_axis_rules`` と
同じ考え方）。データ並列 → FSDP → FSDP × テンソル並列の切り替えは、規則の表を替えるだけで、モデルのコードは
変わりません。::

    from ch6 import lm
    config = lm.Config()
    params, axes = lm.init_params(config, jax.random.key(0))   # axes: 同じ形の木、葉は論理軸の P(...)
    mesh = lm.make_mesh()                                        # (data, fsdp, tensor)、Auto の軸
    shardings = lm.shardings(axes, lm.RULES["fsdp_tp"], mesh)    # 葉は NamedSharding
    logits = lm.forward(params, tokens, config)                  # tokens: (batch, seq) の int32
    loss = lm.loss(params, tokens, config)                       # 次のバイトを当てる交差エントロピーの平均

論理軸の名前の一覧は ``LOGICAL_AXES``、活性値のバッチ軸の論理名は ``"batch"`` です。
"""
from __future__ import annotations

import dataclasses
import functools
import math

__all__ = ["Config", "LOGICAL_AXES", "MESH_AXES", "RULES", "init_params", "logical_axes", "forward", "loss",
           "mesh_axes", "to_mesh_spec", "specs", "shardings", "mesh_shape", "make_mesh", "batch_sharding",
           "ACTIVATION", "activation_sharding",
           "param_count", "flops_per_token"]

LOGICAL_AXES = ("batch", "layers", "vocab", "embed", "heads", "head_dim", "mlp", "norm", "pos")
MESH_AXES = ("data", "fsdp", "tensor")

# 論理軸 → メッシュの軸（None は分割しない＝複製）。表にない論理軸も複製です。
RULES: dict[str, dict[str, str | tuple[str, ...] | None]] = {
    # データ並列: バッチだけを分割し、パラメータはすべて複製
    "dp": {"batch": ("data", "fsdp", "tensor")},
    # FSDP: バッチを分割し、パラメータは embed の軸で fsdp に分割（使う直前に all-gather）
    "fsdp": {"batch": ("data", "fsdp", "tensor"), "embed": ("fsdp", "tensor")},
    # FSDP × テンソル並列: heads と mlp と vocab を tensor に、embed を fsdp に分割
    "fsdp_tp": {"batch": ("data", "fsdp"), "embed": "fsdp", "heads": "tensor", "mlp": "tensor",
                "vocab": "tensor"},
}


@dataclasses.dataclass(frozen=True)
class Config:
    """モデルの大きさ。既定は CPU 2 コアで数十ステップを数秒で回せる大きさです。

    ``d_model`` は 60（1〜6 のどれでも割り切れる）なので、fsdp の軸が 1〜6 のどのメッシュでも分割できます。"""
    vocab: int = 256          # バイト単位: 0..255
    d_model: int = 60         # embed
    n_heads: int = 4          # heads
    d_head: int = 16          # head_dim
    d_ff: int = 120           # mlp
    n_layers: int = 2
    max_len: int = 64         # 位置埋め込みの長さ（系列の長さの上限）
    init_scale: float = 0.02


def logical_axes(config: Config):
    """パラメータと同じ形の木。葉は各パラメータの論理軸を並べた ``PartitionSpec``。"""
    from jax.sharding import PartitionSpec as P

    # ブロックのパラメータは 0 軸目に層を重ねた 1 つの配列（論理軸 layers、lax.scan で回す）
    blocks = {
        "ln1": P("layers", "norm"),
        "wq": P("layers", "embed", "heads", "head_dim"),
        "wk": P("layers", "embed", "heads", "head_dim"),
        "wv": P("layers", "embed", "heads", "head_dim"),
        "wo": P("layers", "heads", "head_dim", "embed"),
        "ln2": P("layers", "norm"),
        "w_in": P("layers", "embed", "mlp"),
        "w_out": P("layers", "mlp", "embed"),
    }
    return {"embed": P("vocab", "embed"), "pos": P("pos", "embed"), "blocks": blocks,
            "ln_f": P("norm"), "unembed": P("embed", "vocab")}


def _shapes(config: Config) -> dict:
    c = config
    L = c.n_layers
    blocks = {"ln1": (L, c.d_model), "wq": (L, c.d_model, c.n_heads, c.d_head),
              "wk": (L, c.d_model, c.n_heads, c.d_head), "wv": (L, c.d_model, c.n_heads, c.d_head),
              "wo": (L, c.n_heads, c.d_head, c.d_model), "ln2": (L, c.d_model),
              "w_in": (L, c.d_model, c.d_ff), "w_out": (L, c.d_ff, c.d_model)}
    return {"embed": (c.vocab, c.d_model), "pos": (c.max_len, c.d_model), "blocks": blocks,
            "ln_f": (c.d_model,), "unembed": (c.d_model, c.vocab)}


def init_params(config: Config, key):
    """(params, axes) を返します。params は float32 の配列の木、axes は :func:`logical_axes`。

    正規化のスケールは 1、ほかは標準偏差 ``init_scale`` の正規分布（出力側の射影は層の数で小さくする）。
    乱数は全部の重みの分を 1 回で引いてから切り分けます（葉ごとに引くと、葉の数だけ乱数の生成のコードが
    コンパイルされ、CPU では数秒かかるからです）。全体を 1 つの ``jit`` にしてあるので、``jit`` の外で呼んでも
    コンパイルは 1 回です。"""
    return _init_values()(config, key), logical_axes(config)


@functools.cache
def _init_values():
    import jax
    import jax.numpy as jnp

    def values(config: Config, key):
        shapes = _shapes(config)
        leaves, tree = jax.tree.flatten(shapes, is_leaf=lambda s: isinstance(s, tuple))
        paths = [jax.tree_util.keystr(p) for p, _ in
                 jax.tree_util.tree_flatten_with_path(shapes, is_leaf=lambda s: isinstance(s, tuple))[0]]
        drawn = [math.prod(shape) for shape, path in zip(leaves, paths) if "ln" not in path]
        noise = jax.random.normal(key, (sum(drawn),), jnp.float32)
        out, start = [], 0
        for shape, path in zip(leaves, paths):
            if "ln" in path:
                out.append(jnp.ones(shape, jnp.float32))
                continue
            scale = config.init_scale
            if "wo" in path or "w_out" in path:
                scale = scale / math.sqrt(2 * config.n_layers)
            size = math.prod(shape)
            out.append(scale * noise[start:start + size].reshape(shape))
            start += size
        return jax.tree.unflatten(tree, out)

    return jax.jit(values, static_argnums=0)


def _rms_norm(x, scale):
    import jax.numpy as jnp

    return x * (scale / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6))


def _block(p, x, shard):
    import jax
    import jax.numpy as jnp

    T = x.shape[1]
    h = _rms_norm(x, p["ln1"])
    q = jnp.einsum("btd,dhk->bthk", h, p["wq"])
    k = jnp.einsum("btd,dhk->bthk", h, p["wk"])
    v = jnp.einsum("btd,dhk->bthk", h, p["wv"])
    scores = jnp.einsum("bqhk,bshk->bhqs", q, k) / math.sqrt(q.shape[-1])
    causal = jnp.tril(jnp.ones((T, T), bool))
    scores = jnp.where(causal, scores, -1e30)
    att = jax.nn.softmax(scores, axis=-1)
    o = jnp.einsum("bhqs,bshk->bqhk", att, v)
    x = x + jnp.einsum("bthk,hkd->btd", o, p["wo"])
    x = shard(x)
    h = _rms_norm(x, p["ln2"])
    return shard(x + jax.nn.gelu(h @ p["w_in"]) @ p["w_out"])


def forward(params, tokens, config: Config, shard=None):
    """tokens (batch, seq) の int → logits (batch, seq, vocab) の float32。位置 t の logits は t+1 のバイトの予測。

    shard（省略可、:func:`activation_sharding` が作る）は、層の間の活性値 (batch, seq, embed) のシャーディングを
    指定する関数です。省くと何も指定せず、配置はコンパイラに任せます（1 デバイスではこれで足ります）。"""
    from jax import lax

    shard = shard or (lambda x: x)
    x = shard(params["embed"][tokens] + params["pos"][: tokens.shape[1]])
    x, _ = lax.scan(lambda x, p: (_block(p, x, shard), None), x, params["blocks"])
    return _rms_norm(x, params["ln_f"]) @ params["unembed"]


def loss(params, tokens, config: Config, shard=None):
    """tokens (batch, seq+1): 先頭 seq 個から次のバイトを当てる交差エントロピーの、全位置・全サンプルの平均。"""
    import optax

    logits = forward(params, tokens[:, :-1], config, shard)
    return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()


def mesh_axes(logical: str | None, rules: dict):
    """論理軸 1 つ → メッシュの軸（文字列、タプル、None）。"""
    return None if logical is None else rules.get(logical)


def to_mesh_spec(logical_spec, rules: dict, mesh=None):
    """論理軸の ``P(...)`` → メッシュの軸の ``P(...)``。

    mesh を渡すと、大きさ 1 のメッシュ軸は省きます（分割しないのと同じなので、表示が読みやすくなる）。
    同じメッシュ軸を 2 つの次元で使う規則は ValueError にします。"""
    from jax.sharding import PartitionSpec as P

    out, used = [], set()
    for name in logical_spec:
        axes = mesh_axes(name, rules)
        axes = () if axes is None else (axes,) if isinstance(axes, str) else tuple(axes)
        if mesh is not None:
            axes = tuple(a for a in axes if mesh.shape[a] > 1)
        if used & set(axes):
            raise ValueError(f"規則 {rules} は同じメッシュ軸 {sorted(used & set(axes))} を 2 つの次元に使います")
        used |= set(axes)
        out.append(None if not axes else axes[0] if len(axes) == 1 else axes)
    while out and out[-1] is None:
        out.pop()
    return P(*out)


def _is_spec(x) -> bool:
    from jax.sharding import PartitionSpec

    return isinstance(x, PartitionSpec)


def specs(axes, rules: dict, mesh=None):
    """論理軸の木 → メッシュの軸の ``P(...)`` の木。"""
    import jax

    return jax.tree.map(lambda s: to_mesh_spec(s, rules, mesh), axes, is_leaf=_is_spec)


def shardings(axes, rules: dict, mesh):
    """論理軸の木 → ``NamedSharding`` の木（``jax.device_put`` や ``out_shardings`` にそのまま渡せる）。"""
    import jax
    from jax.sharding import NamedSharding

    return jax.tree.map(lambda s: NamedSharding(mesh, to_mesh_spec(s, rules, mesh)), axes, is_leaf=_is_spec)


ACTIVATION = ("batch", None, None)   # 層の間の活性値 (batch, seq, embed) の論理軸: バッチだけを分割


def activation_sharding(rules: dict, mesh):
    """活性値 (batch, seq, embed) を論理軸 ``ACTIVATION`` のシャーディングに固定する関数（jit の中で使う）。

    FSDP の規則では embed の軸が fsdp に分割されるので、指定しないとコンパイラが活性値の embed の軸まで
    fsdp に分割しようとして、バッチの分割とぶつかります。MaxText の ``activation_batch`` などと同じ考え方です。"""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    sharding = NamedSharding(mesh, to_mesh_spec(P(*ACTIVATION), rules, mesh))
    return lambda x: jax.lax.with_sharding_constraint(x, sharding)


def batch_sharding(rules: dict, mesh):
    """トークンのバッチ (batch, seq) の ``NamedSharding``（バッチ軸は論理軸 ``batch``）。"""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    return NamedSharding(mesh, to_mesh_spec(P("batch"), rules, mesh))


def mesh_shape(n: int) -> tuple[int, int, int]:
    """n 個のデバイスの (data, fsdp, tensor)。偶数なら tensor=2。残り r が 4 以上の偶数なら data=2・fsdp=r/2、
    それ以外で tensor=2 なら data=r、奇数なら fsdp=n。

    8 → (2, 2, 2)、4 → (2, 1, 2)、2 → (1, 1, 2)、6 → (3, 1, 2)、12 → (2, 3, 2)、5 → (1, 5, 1)、3 → (1, 3, 1)、
    1 → (1, 1, 1)。data=1 のまま fsdp と tensor の両方を 2 以上にすると、XLA（0.12）の分割器が重みの勾配の
    計算で活性値を複製し直す（「Involuntary full rematerialization」の警告）ので、その形は選びません。"""
    tensor = 2 if n % 2 == 0 else 1
    rest = n // tensor
    if tensor == 1:
        return 1, rest, 1
    if rest % 2 == 0 and rest >= 4:
        return 2, rest // 2, tensor
    return rest, 1, tensor


def make_mesh(devices=None):
    """devices（既定は ``jax.devices()``）を ``(data, fsdp, tensor)`` に並べたメッシュ。軸は Auto
    （活性値のシャーディングはコンパイラが伝播させ、必要な集団通信を入れる）。"""
    import jax
    import numpy as np
    from jax.sharding import AxisType, Mesh

    devices = jax.devices() if devices is None else list(devices)
    shape = mesh_shape(len(devices))
    return Mesh(np.asarray(devices, dtype=object).reshape(shape), MESH_AXES, axis_types=(AxisType.Auto,) * 3)


def param_count(config: Config) -> int:
    """パラメータの数。"""
    return sum(math.prod(s) for s in _leaves(_shapes(config)))


def _leaves(shapes):
    out = []
    for v in (shapes.values() if isinstance(shapes, dict) else shapes):
        if isinstance(v, tuple):
            out.append(v)
        else:
            out.extend(_leaves(v))
    return out


def flops_per_token(config: Config, seq: int) -> int:
    """学習 1 トークンあたりの FLOP の見積もり 6N + 12·L·T·(H·Dh)（順伝播と逆伝播、アテンションの行列積を含む）。

    N は埋め込み（表引きで行列積ではない）と位置埋め込みを除いたパラメータ数。"""
    c = config
    n = param_count(c) - c.vocab * c.d_model - c.max_len * c.d_model
    return 6 * n + 12 * c.n_layers * seq * c.n_heads * c.d_head
