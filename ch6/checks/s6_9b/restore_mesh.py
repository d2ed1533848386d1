"""6.9b-2 restore_onto: 完全に書き終えた最新のチェックポイントを、隠しのデバイスの組のメッシュへ、規則 fsdp_tp の
シャーディングで直接復元する。

隠しの設定の状態を、すべてのデバイスのメッシュで 2 つのステップに保存し、その後ろに書きかけの一時ディレクトリ
（名前が ``<ステップ>.orbax-checkpoint-tmp``）を置きます。確かめること: 返した状態の値、各配列のシャーディングが
行き先のメッシュの規則どおり（保存したときのメッシュのままではない）、ステップとデータの位置が最新の完全なもの。
"""
from __future__ import annotations

import atexit
import dataclasses
import functools
import shutil
import tempfile
from pathlib import Path

import numpy as np

from ...checking import Fail, LearnerError, call, exercise
from .common import exercise_rng


def _config(r):
    from ...capstone.train import CONFIG

    return dataclasses.replace(CONFIG, d_model=60, n_heads=2, d_head=int(r.choice([4, 6])), d_ff=60, n_layers=1,
                               max_len=8)


def _mesh_parts(config, devices):
    from ...capstone import train
    from ...lm import RULES, make_mesh

    mesh = make_mesh(devices)
    return mesh, train.state_shardings(config, RULES["fsdp_tp"], mesh)


def make_checkpoint(directory: Path, config, key_seed: int, steps: tuple[int, ...]):
    """すべてのデバイスのメッシュで steps の各ステップを保存し、書きかけのステップも 1 つ置く。最新の状態を返す。"""
    import jax

    from ...capstone import train

    _, sh = _mesh_parts(config, jax.devices())
    state = train.init_state(config, jax.random.key(key_seed), sh)
    mgr = train.manager(directory)
    for s in steps:
        state = dict(state, step=jax.device_put(np.int32(s), sh["step"]),
                     params=jax.tree.map(lambda a: a * 1.5, state["params"]))
        train.save(mgr, state, {"position": s, "seed": key_seed})
    mgr.wait_until_finished()
    mgr.close()
    # 書きかけ: 最後のステップのディレクトリを写し、完了の印を消した一時ディレクトリ
    tmp = directory / f"{steps[-1] + 3}.orbax-checkpoint-tmp"
    shutil.copytree(directory / str(steps[-1]), tmp)
    for mark in tmp.rglob("commit_success.txt"):
        mark.unlink()
    return state


def _flat(tree):
    import jax

    return {jax.tree_util.keystr(p): v for p, v in jax.tree_util.tree_flatten_with_path(tree)[0]}


@functools.cache
def _pristine():
    """隠しのチェックポイントを 1 度だけ作る（プロセスが終わるときに消す）。(ディレクトリ, 設定, ステップ, 値)。

    隠し入力は毎回同じなので、チェックを何度呼んでも作り直さない（学習者には毎回その写しを渡す）。"""
    r = exercise_rng(2)
    config = _config(r)
    seed = int(r.integers(1, 50))
    steps = (int(r.integers(2, 5)), int(r.integers(6, 9)))
    root = Path(tempfile.mkdtemp(prefix="ch6_6_9b_2_"))
    atexit.register(shutil.rmtree, root, True)
    saved = make_checkpoint(root / "ckpt", config, seed, steps)
    return root / "ckpt", config, steps, {k: np.asarray(v) for k, v in _flat(saved).items()}


def _explain_orbax_error(err: LearnerError, where: str, directory: Path) -> None:
    """Orbax の英語の例外のうち、よくある原因の分かるものを日本語の Fail にする（分からなければ何もしない）。"""
    text = str(err.exc)
    if isinstance(err.exc, ValueError) and "not compatible with the stored shape" in text:
        raise Fail(f"{where}: 行き先の形が保存した配列の形と合いません（Orbax の原文「{text.split('.')[0]}」）。"
                   "abstract_state は引数の config から作ります（train.CONFIG ではなく）。") from None
    if isinstance(err.exc, FileNotFoundError) and any(directory.glob("*.orbax-checkpoint-tmp")):
        raise Fail(f"{where}: 書き終えていないステップを選んだため、見つかりませんでした（原文「{text}」）。"
                   "完全なステップは mgr.latest_step()（または all_steps()）が返します。") from None


@exercise("6.9b-2", "restore_onto")
def check_restore_onto(fn):
    import jax

    pristine, config, steps, want_values = _pristine()
    n = jax.device_count()
    subsets = sorted({n, max(1, n // 2)} | ({3} if n > 3 else set()), reverse=True)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "ckpt"
        shutil.copytree(pristine, directory)
        for m in subsets:
            devices = jax.devices()[:m]
            where = f"デバイス {m} 個のメッシュ"
            try:
                out = call(fn, directory, config, devices)
            except LearnerError as err:
                _explain_orbax_error(err, where, directory)
                raise
            if not isinstance(out, (tuple, list)) or len(out) != 2:
                raise Fail(f"{where}: (状態, データの位置) の 2 つ組を返してください。実際は {type(out).__name__} でした。")
            state, data_state = out
            if (isinstance(out[0], dict) and "position" in out[0] and isinstance(out[1], dict)
                    and "params" in out[1]):
                raise Fail(f"{where}: 2 つ組の順序が逆です。1 つ目が状態、2 つ目がデータの位置の辞書です。")
            if isinstance(data_state, dict) and "position" not in data_state:
                raise Fail(f"{where}: データの位置は保存した辞書 {{'position': …, 'seed': …}} のまま返します。"
                           f"返った辞書には 'position' の項目がありません（項目: {', '.join(map(str, data_state))}）。")
            if not isinstance(data_state, dict):
                raise Fail(f"{where}: データの位置は保存した辞書 {{'position': …, 'seed': …}} のまま返します。"
                           f"実際は {type(data_state).__name__} でした。")
            if not isinstance(state, dict):
                raise Fail(f"{where}: 状態は保存したのと同じ辞書 {{'params', 'opt_state', 'step'}} で返します。"
                           f"実際は {type(state).__name__} でした。")
            if int(data_state["position"]) != steps[-1]:
                raise Fail(f"{where}: ステップ {int(data_state['position'])} を復元しました。完全なチェックポイントのうち"
                           f"最新のステップ {steps[-1]} を使います。")
            try:
                got = _flat(state)
            except Exception:
                raise Fail(f"{where}: 状態は保存したのと同じ辞書の木で返してください。") from None
            if set(got) != set(want_values) and len(got) == len(want_values):
                raise Fail(f"{where}: 最適化器の状態の木の型が保存前と違います（辞書やリストになっています）。行き先の"
                           "形・型・シャーディング（abstract_state）を渡さずに復元したためです。")
            if set(got) != set(want_values):
                raise Fail(f"{where}: 状態の木の形が保存したものと違います（{len(got)} 個の葉、保存したのは"
                           f" {len(want_values)} 個）。")
            _, sh = _mesh_parts(config, devices)
            for name, sharding in _flat(sh).items():
                leaf = got[name]
                if not isinstance(leaf, jax.Array):
                    raise Fail(f"{where}: {name} が jax.Array ではなく {type(leaf).__name__} でした。")
                if not np.allclose(np.asarray(leaf), want_values[name]):
                    raise Fail(f"{where}: {name} の値が保存した値と違います。")
                if leaf.sharding.device_set != sharding.device_set:
                    k = len(leaf.sharding.device_set)
                    raise Fail(f"{where}: {name} がデバイス {k} 個にありますが、渡した devices は {m} 個です。"
                               "メッシュは引数の devices から lm.make_mesh(devices) で作り、その abstract_state を"
                               "行き先に渡します。")
                if not leaf.sharding.is_equivalent_to(sharding, leaf.ndim):
                    raise Fail(f"{where}: {name} のシャーディングが {getattr(leaf.sharding, 'spec', leaf.sharding)} で、"
                               f"規則 fsdp_tp のとおりなら {sharding.spec} です。")
    return f"隠しのチェックポイントを、デバイス {', '.join(map(str, subsets))} 個のメッシュへ規則どおりに復元しました。"
