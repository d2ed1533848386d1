"""6.9 節の学習: 状態（パラメータ・最適化器の状態・ステップ）、そのシャーディング、学習ステップ、
Orbax（``orbax-checkpoint``）での保存と復元。

ノートブック（1 プロセス）と :mod:`ch6.capstone.worker`（複数プロセス）が同じ関数を使います。::

    from ch6 import lm
    from ch6.capstone import train
    mesh = lm.make_mesh()
    rules = lm.RULES["fsdp_tp"]
    sh = train.state_shardings(CONFIG, rules, mesh)        # 状態と同じ形の NamedSharding の木
    state = train.init_state(CONFIG, jax.random.key(0), sh)
    step = train.make_step(CONFIG, rules, sh, lm.batch_sharding(rules, mesh))
    state, losses = train.run(state, step, batches, 10, lm.batch_sharding(rules, mesh))
"""
from __future__ import annotations

import functools

from ch6 import lm

__all__ = ["CONFIG", "BATCH", "SEQ", "LEARNING_RATE", "optimizer", "state_shardings", "abstract_state",
           "init_state", "make_step", "run", "put_batch", "manager", "save", "restore", "restore_args",
           "disk_listing"]

CONFIG = lm.Config()
BATCH = 120          # グローバルバッチ（1〜6 と 8 のどれでも割り切れる）
SEQ = 32             # 1 サンプルの入力のバイト数（ラベルは 1 つずらした 32 バイト）
LEARNING_RATE = 3e-3


def optimizer():
    """Adam（optax）。状態は m と v（パラメータと同じ形）と、ステップ数 count。"""
    import optax

    return optax.adam(LEARNING_RATE)


def state_shardings(config: lm.Config, rules: dict, mesh):
    """学習の状態 ``{"params", "opt_state", "step"}`` と同じ形の ``NamedSharding`` の木。

    最適化器の m と v はパラメータと同じシャーディング、スカラー（count、step）は複製です。"""
    import jax
    import optax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    param_sh = lm.shardings(lm.logical_axes(config), rules, mesh)
    replicated = NamedSharding(mesh, P())
    params = jax.eval_shape(lambda: lm.init_params(config, jax.random.key(0))[0])
    opt_state = jax.eval_shape(optimizer().init, params)
    opt_sh = optax.tree_map_params(optimizer(), lambda _, s: s, opt_state, param_sh,
                                   transform_non_params=lambda _: replicated)
    return {"params": param_sh, "opt_state": opt_sh, "step": replicated}


def abstract_state(config: lm.Config, shardings):
    """状態の形・型・シャーディングだけ（``jax.ShapeDtypeStruct`` の木）。復元の行き先を先に渡すときに使います。"""
    import jax
    import jax.numpy as jnp

    params = jax.eval_shape(lambda: lm.init_params(config, jax.random.key(0))[0])
    shapes = {"params": params, "opt_state": jax.eval_shape(optimizer().init, params),
              "step": jax.ShapeDtypeStruct((), jnp.int32)}
    return jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), shapes, shardings)


def init_state(config: lm.Config, key, shardings):
    """同じ key からは、どのメッシュでも同じ値の状態を、shardings のとおりに配置して作ります。

    各デバイスは自分の分だけを作ります（1 つのデバイスに全体を作ってから配ることはしません）。
    同じ config と shardings で呼び直すと、コンパイル済みの関数を使い回します。"""
    import jax

    leaves, treedef = jax.tree.flatten(shardings)
    return _init_state_fn(config, tuple(leaves), treedef)(key)


@functools.cache
def _init_state_fn(config: lm.Config, sharding_leaves: tuple, treedef):
    import jax
    import jax.numpy as jnp

    def make(key):
        params, _ = lm.init_params(config, key)
        return {"params": params, "opt_state": optimizer().init(params), "step": jnp.zeros((), jnp.int32)}

    return jax.jit(make, out_shardings=jax.tree.unflatten(treedef, sharding_leaves))


def make_step(config: lm.Config, rules: dict, shardings, batch_sharding):
    """jit した学習の 1 ステップ ``step(state, tokens) -> (state, loss)``（状態は譲渡）。

    入力と出力のシャーディングを固定するので、状態のシャーディングはステップを重ねても変わりません。"""
    import jax
    import optax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    opt = optimizer()
    shard = lm.activation_sharding(rules, batch_sharding.mesh)

    def step(state, tokens):
        loss, grads = jax.value_and_grad(lm.loss)(state["params"], tokens, config, shard)
        updates, opt_state = opt.update(grads, state["opt_state"], state["params"])
        return {"params": optax.apply_updates(state["params"], updates), "opt_state": opt_state,
                "step": state["step"] + 1}, loss

    replicated = NamedSharding(batch_sharding.mesh, P())
    return jax.jit(step, in_shardings=(shardings, batch_sharding), out_shardings=(shardings, replicated),
                   donate_argnums=0)


def put_batch(local_rows, batch_sharding, global_rows: int = BATCH):
    """このプロセスの行（numpy）→ グローバルバッチの配列（1 プロセスならバッチ全体をそのまま配置）。"""
    import jax

    shape = (global_rows, *local_rows.shape[1:])
    return jax.make_array_from_process_local_data(batch_sharding, local_rows, shape)


def run(state, step, batches, steps: int, batch_sharding, on_step=None):
    """steps 回学習して (state, 各ステップの損失の list[float]) を返します。

    on_step(state, loss) を渡すと、各ステップの後に呼びます（チェックポイントの保存など）。"""
    losses = []
    for _ in range(steps):
        state, loss = step(state, put_batch(next(batches), batch_sharding, batches.batch))
        losses.append(float(loss))
        if on_step is not None:
            on_step(state, losses[-1])
    return state, losses


def manager(directory, asynchronous: bool = False, data_handler=None):
    """Orbax の ``CheckpointManager``（保存するステップは呼ぶ側が決める）。

    asynchronous=True なら保存は裏で進み、``save`` はすぐ戻ります（``wait_until_finished`` で待つ）。
    data_handler: データの位置（JSON）を書くハンドラを差し替える（故障の模擬用。既定は JsonCheckpointHandler）。"""
    import orbax.checkpoint as ocp

    options = ocp.CheckpointManagerOptions(enable_async_checkpointing=asynchronous)
    handlers = {"state": ocp.StandardCheckpointHandler(), "data": data_handler or ocp.JsonCheckpointHandler()}
    return ocp.CheckpointManager(directory, options=options, item_handlers=handlers)


def save(mgr, state, data_state: dict) -> bool:
    """状態（シャーディングされた配列の木）とデータの位置（JSON）を、ステップ番号の下に保存します。

    保存を始めたら True を返します（同じステップがすでにあるときなどは False）。"""
    import orbax.checkpoint as ocp

    step = int(state["step"])
    return mgr.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(state),
                                                  data=ocp.args.JsonSave(data_state)))


def restore_args(target):
    """復元の引数: target（:func:`abstract_state`）の形・型・シャーディングで、配列を直接その配置に読みます。"""
    import orbax.checkpoint as ocp

    return ocp.args.Composite(state=ocp.args.StandardRestore(target), data=ocp.args.JsonRestore())


def restore(mgr, target, step: int | None = None):
    """(state, data_state) を返します。step を省くと、完全に書き終えた最新のチェックポイント。"""
    step = mgr.latest_step() if step is None else step
    out = mgr.restore(step, args=restore_args(target))
    return out["state"], out["data"]


def disk_listing(directory, max_depth: int = 3) -> list[str]:
    """チェックポイントのディレクトリの中身を、directory からの相対パスで並べます（機械のパスを出さない）。

    ハッシュの名前（16 進 32 桁）のファイルは 1 行にまとめて数だけを書きます（名前は保存ごとに変わる）。
    バイト数は書きません（圧縮した配列のバイト数は値によって変わる）。"""
    import re
    from pathlib import Path

    root = Path(directory)
    hashed = re.compile(r"^[0-9a-f]{32}$")
    out, counts = [], {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if len(rel.parts) > max_depth:
            continue
        if hashed.match(p.name):
            counts[rel.parent.as_posix()] = counts.get(rel.parent.as_posix(), 0) + 1
            continue
        out.append(f"{rel.as_posix()}/" if p.is_dir() else rel.as_posix())
    for parent, k in counts.items():
        i = out.index(f"{parent}/") + 1
        out.insert(i, f"{parent}/<ハッシュの名前のファイル {k} 個>")
    return out
