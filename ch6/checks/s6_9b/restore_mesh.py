"""6.9b-2 restore_before_spike: 損失が跳ねたステップ spike より前の、完全に書き終えた最新のチェックポイントへ巻き戻し、
隠しのデバイスの組のメッシュへ規則 fsdp_tp のシャーディングで直接復元して、データの位置を spike まで進めて返す。

隠しの設定の状態を、すべてのデバイスのメッシュで k, 2k, …, 5k の 5 つのステップに保存し、6k には書きかけの一時
ディレクトリ（名前が ``<ステップ>.orbax-checkpoint-tmp``。跳ねたのを見てジョブを止めたとき、非同期の保存が途中だった）
を置きます。spike は 3 通り（保存のない 3k + 1、保存のある 4k、書きかけの後の 6k + 1）で、それぞれ別のメッシュで呼びます。
確かめること: 選んだステップ（spike 以上・古すぎる・書きかけ・保存のないステップをそれぞれの言葉で）、データの位置
（跳ねる前のバッチを飛ばして spike）、返した状態の値、各配列のシャーディングが行き先のメッシュの規則どおり。
"""
from __future__ import annotations

import atexit
import dataclasses
import functools
import re
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


def make_checkpoint(directory: Path, config, key_seed: int, steps: tuple[int, ...], unfinished: int):
    """すべてのデバイスのメッシュで steps の各ステップを保存し、ステップ unfinished を書きかけで置く。
    {ステップ: 保存した状態} を返す。"""
    import jax

    from ...capstone import train

    _, sh = _mesh_parts(config, jax.devices())
    state = train.init_state(config, jax.random.key(key_seed), sh)
    mgr = train.manager(directory)
    saved = {}
    for s in steps:
        state = dict(state, step=jax.device_put(np.int32(s), sh["step"]),
                     params=jax.tree.map(lambda a: a * 1.5, state["params"]))
        train.save(mgr, state, {"position": s, "seed": key_seed})
        saved[s] = state
    mgr.wait_until_finished()
    mgr.close()
    # 書きかけ: 最後のステップのディレクトリを写し、完了の印を消した一時ディレクトリ
    tmp = directory / f"{unfinished}.orbax-checkpoint-tmp"
    shutil.copytree(directory / str(steps[-1]), tmp)
    for mark in tmp.rglob("commit_success.txt"):
        mark.unlink()
    return saved


def _flat(tree):
    import jax

    return {jax.tree_util.keystr(p): v for p, v in jax.tree_util.tree_flatten_with_path(tree)[0]}


@functools.cache
def pristine():
    """隠しのチェックポイントを 1 度だけ作る（プロセスが終わるときに消す）。
    (ディレクトリ, 設定, 種, 保存の間隔 k, {ステップ: 値})。隠し入力は毎回同じなので、チェックを何度呼んでも作り直さない
    （学習者には毎回その写しを渡す）。"""
    r = exercise_rng(2)
    config = _config(r)
    seed = int(r.integers(1, 50))
    k = int(r.choice([2, 3]))
    root = Path(tempfile.mkdtemp(prefix="ch6_6_9b_2_"))
    atexit.register(shutil.rmtree, root, True)
    saved = make_checkpoint(root / "ckpt", config, seed, tuple(k * i for i in range(1, 6)), unfinished=6 * k)
    values = {s: {name: np.asarray(v) for name, v in _flat(st).items()} for s, st in saved.items()}
    return root / "ckpt", config, seed, k, values


def _explain_orbax_error(err: LearnerError, where: str, directory: Path, spike: int) -> None:
    """Orbax の英語の例外のうち、よくある原因の分かるものを日本語の Fail にする（分からなければ何もしない）。"""
    text = str(err.exc)
    if isinstance(err.exc, ValueError) and "not compatible with the stored shape" in text:
        raise Fail(f"{where}: 行き先の形が保存した配列の形と合いません（Orbax の原文「{text.split('.')[0]}」）。"
                   "abstract_state は引数の config から作ります（train.CONFIG ではなく）。") from None
    m = re.search(r"(\d+) not found", text)
    if isinstance(err.exc, FileNotFoundError) and m:
        step = int(m.group(1))
        if (directory / f"{step}.orbax-checkpoint-tmp").exists():
            raise Fail(f"{where}（spike = {spike}）: ステップ {step} は書き終えていない（完了の印のない一時ディレクトリの）"
                       "チェックポイントです。ディレクトリの名前を数えるのではなく、mgr.all_steps() の完全なステップから"
                       "選びます。") from None
        raise Fail(f"{where}（spike = {spike}）: ステップ {step} は保存されていません。チェックポイントは数ステップごとで"
                   " spike − 1 があるとは限らないので、mgr.all_steps() にあるステップから選んでください。") from None


def _cases(n: int, k: int) -> list[tuple[int, int]]:
    """(デバイスの数, spike) の 3 つ: 保存のないステップ、保存のあるステップ、書きかけの後のステップで跳ねる。
    デバイスの数の組には、tensor が 2 以上のメッシュ（lm.mesh_shape）を、作れるかぎり 1 つ入れる（3 個や 7 個では
    どの半分も tensor が 1 なので 2 個を足す）。tensor が 1 のメッシュだけでは、規則 fsdp と fsdp_tp の違いが出ない。"""
    from ...lm import mesh_shape

    sizes = {n, max(1, n // 2)} | ({3} if n > 3 else set())
    if n >= 2 and all(mesh_shape(m)[2] == 1 for m in sizes):
        sizes.add(2)
    sizes = sorted(sizes, reverse=True)
    spikes = (3 * k + 1, 4 * k, 6 * k + 1)
    return [(sizes[i % len(sizes)], spike) for i, spike in enumerate(spikes)]


@exercise("6.9b-2", "restore_before_spike")
def check_restore_before_spike(fn):
    import jax

    source, config, seed, k, values = pristine()
    saved = sorted(values)
    cases = _cases(jax.device_count(), k)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "ckpt"
        shutil.copytree(source, directory)
        for m, spike in cases:
            devices = jax.devices()[-m:]   # 後ろの m 個: jax.devices()[:m] のメッシュとは別のデバイス
            where = f"デバイス {m} 個のメッシュ"
            best = max(s for s in saved if s < spike)
            try:
                out = call(fn, directory, config, devices, spike)
            except LearnerError as err:
                _explain_orbax_error(err, where, directory, spike)
                raise
            state, data_state = _pair(out, where)
            _check_step(state, data_state, where, spike, best, saved, seed)
            _check_arrays(state, values[best], config, devices, where)
        _check_nothing_before(fn, directory, config, jax.devices()[-cases[0][0]:], saved)
    one = ("（デバイスが 1 個なので、メッシュと規則の違いはこの環境では確かめられません。デバイスが複数の環境でも"
           "試してください）") if jax.device_count() == 1 else ""
    spikes, sizes = ", ".join(str(s) for _, s in cases), ", ".join(str(m) for m, _ in cases)
    return (f"跳ねたステップ {spikes} のそれぞれで、直前の完全なチェックポイントを、デバイス {sizes} 個のメッシュへ"
            f"規則どおりに復元しました。データの位置は spike まで進み、最初の保存のステップ {saved[0]} で跳ねたときは"
            f" None でした。{one}")


def _check_nothing_before(fn, directory, config, devices, saved: list[int]) -> None:
    """最初の保存のステップで跳ねた: spike より前に完全なチェックポイントがないので、None が返ること。"""
    spike = saved[0]
    at = f"最初の保存のステップで跳ねたとき（spike = {spike}）"
    try:
        out = call(fn, directory, config, devices, spike)
    except LearnerError as err:
        if isinstance(err.exc, ValueError) and ("empty" in str(err.exc) or "max()" in str(err.exc)):
            raise Fail(f"{at}: spike より前に完全なチェックポイントがないので、max() が空の列で ValueError になりました。"
                       "戻る先がないときは None を返します。") from None
        raise
    if out is None:
        return
    if isinstance(out, (tuple, list)) and all(x is None for x in out):
        raise Fail(f"{at}: 戻る先がないのに {type(out).__name__} の {out!r} が返りました。2 つ組ではなく None だけを返します。")
    step = None
    if isinstance(out, (tuple, list)) and len(out) == 2 and isinstance(out[0], dict) and "step" in out[0]:
        try:
            step = int(np.asarray(out[0]["step"]))
        except (TypeError, ValueError):
            step = None
    if step is not None and step >= spike:
        raise Fail(f"{at}: ステップ {step} は跳ねた更新を含みます。spike より前に完全なチェックポイントがないので、"
                   "None を返します。")
    raise Fail(f"{at}: spike より前に完全なチェックポイントがないので None のはずが、{type(out).__name__} が返りました。")


def _pair(out, where: str):
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        shown = f"{type(out).__name__}（要素 {len(out)} 個）" if isinstance(out, (tuple, list)) else type(out).__name__
        raise Fail(f"{where}: (状態, データの位置) の 2 つ組のはずが、{shown} が返りました。")
    state, data_state = out
    if isinstance(state, dict) and "position" in state and isinstance(data_state, dict) and "params" in data_state:
        raise Fail(f"{where}: 2 つ組の順序が逆です。1 つ目が状態、2 つ目がデータの位置の辞書です。")
    if not isinstance(data_state, dict):
        raise Fail(f"{where}: データの位置は保存した辞書 {{'position': …, 'seed': …}} のはずが、"
                   f"{type(data_state).__name__} が返りました。")
    if "position" not in data_state:
        raise Fail(f"{where}: データの位置は保存した辞書 {{'position': …, 'seed': …}} で返してください。"
                   f"返った辞書には 'position' の項目がありません（項目: {', '.join(map(str, data_state))}）。")
    if not isinstance(state, dict) or "step" not in state:
        shown = "'step' の項目がない辞書" if isinstance(state, dict) else type(state).__name__
        raise Fail(f"{where}: 状態は保存したのと同じ辞書 {{'params', 'opt_state', 'step'}} のはずが、{shown} が返りました。")
    return state, data_state


def _check_step(state, data_state, where: str, spike: int, best: int, saved: list[int], seed: int) -> None:
    try:
        step = int(np.asarray(state["step"]))
    except (TypeError, ValueError):
        raise Fail(f"{where}: 状態の 'step' は、復元したままの整数の配列で返します。") from None
    position = data_state["position"]
    if isinstance(position, bool) or not isinstance(position, (int, np.integer)):
        raise Fail(f"{where}: データの位置の 'position' は整数のはずが、{type(position).__name__} の"
                   f" {position!r} が返りました。")
    if not isinstance(position, int):
        raise Fail(f"{where}: データの位置の 'position' が Python の int ではなく {type(position).__name__} でした。"
                   "この辞書は次の保存で JSON（ocp.args.JsonSave）に書くので、int(…) で Python の int にします。")
    position = int(position)
    at = f"{where}（spike = {spike}）"
    if step == spike:
        raise Fail(f"{at}: 復元したステップ {step} は、損失が跳ねたバッチの勾配でステップ {spike} の更新を終えた後の"
                   f"状態です。spike より小さいステップから選びます（{best}）。")
    if step > spike:
        raise Fail(f"{at}: 復元したステップ {step} は損失が跳ねたステップ {spike} より後なので、跳ねた更新を含んだままです。"
                   "mgr.latest_step() ではなく、spike より小さい完全なステップのうち最新のものを選びます。")
    if step < best:
        raise Fail(f"{at}: ステップ {step} を復元しましたが、spike より前にもっと新しいステップ {best} があります"
                   f"（完全なステップ: {saved}）。巻き戻すのは必要な分だけにしてください。")
    if step != best:
        raise Fail(f"{at}: ステップ {step} を復元しましたが、そのステップは完全なチェックポイントにありません"
                   f"（{saved}）。")
    if data_state.get("seed") != seed:
        raise Fail(f"{at}: データの位置の辞書の 'seed' が保存した値 {seed} ではなく {data_state.get('seed')!r} でした。"
                   "変えるのは 'position' だけです。")
    skipped = f"ステップ {spike}" if step + 1 == spike else f"ステップ {step + 1}〜{spike}"
    if position == step:
        also = "（spike − 1）" if position == spike - 1 else ""
        raise Fail(f"{at}: データの位置が {position} で、戻したステップ {step} に保存した位置{also}のままなので、跳ねたバッチを"
                   f"もう一度読みます。跳ねる前のバッチ（{skipped} に使ったもの）を飛ばすので、'position' は spike"
                   f"（{spike}）にしてください。")
    if position == spike - 1:
        raise Fail(f"{at}: データの位置が spike − 1（{position}）でした。これは跳ねたステップ {spike} が使ったバッチの番号で、"
                   f"再開するとそのバッチをもう一度読みます。位置はそれまでに使ったバッチの数なので、{skipped} のバッチを"
                   f"飛ばすと {spike} です。")
    if position != spike:
        raise Fail(f"{at}: データの位置が {position} でした（位置はそれまでに使ったバッチの数で、ステップ s は位置 s − 1 の"
                   f"バッチを使います）。{skipped} のバッチを飛ばすと、位置は {spike} です。")


def _ids(devices) -> str:
    ids = [d.id for d in devices]
    if isinstance(devices, (set, frozenset)):
        ids.sort()
    return "[" + ", ".join(map(str, ids)) + "]"


def _check_arrays(state, want_values: dict, config, devices, where: str) -> None:
    import jax

    m = len(devices)
    try:
        got = _flat(state)
    except Exception:
        raise Fail(f"{where}: 状態は、保存したのと同じ辞書の pytree で返してください。") from None
    if set(got) != set(want_values) and len(got) == len(want_values):
        raise Fail(f"{where}: 最適化器の状態の pytree の型が保存前と違います（辞書やリストになっています）。行き先の"
                   "形・型・シャーディング（abstract_state）を渡さずに復元したためです。")
    if set(got) != set(want_values):
        raise Fail(f"{where}: 状態の pytree の構造が保存したものと違います（{len(got)} 個の葉、保存したのは"
                   f" {len(want_values)} 個）。")
    _, sh = _mesh_parts(config, devices)
    for name, sharding in _flat(sh).items():
        leaf = got[name]
        if not isinstance(leaf, jax.Array):
            raise Fail(f"{where}: {name} が jax.Array ではなく {type(leaf).__name__} でした。")
        if not np.allclose(np.asarray(leaf), want_values[name]):
            raise Fail(f"{where}: {name} の値が、選んだステップに保存した値と違います。")
        if leaf.sharding.device_set != sharding.device_set:
            k = len(leaf.sharding.device_set)
            if k == m:
                raise Fail(f"{where}: {name} がデバイス {_ids(leaf.sharding.device_set)} にありますが、渡した devices は"
                           f" {_ids(sharding.device_set)} です（数は同じで、別のデバイス）。メッシュは"
                           "引数の devices から lm.make_mesh(devices) で作り、その abstract_state を行き先に渡します。")
            raise Fail(f"{where}: {name} がデバイス {k} 個にありますが、渡した devices は {m} 個です。"
                       "メッシュは引数の devices から lm.make_mesh(devices) で作り、その abstract_state を"
                       "行き先に渡します。")
        spec = getattr(leaf.sharding, "spec", None)
        if (not leaf.sharding.is_equivalent_to(sharding, leaf.ndim) and spec == sharding.spec
                and getattr(leaf.sharding, "mesh", None) is not None):
            raise Fail(f"{where}: {name} のメッシュのデバイスの並び {_ids(leaf.sharding.mesh.devices.flat)} が、"
                       f"lm.make_mesh(devices) の {_ids(sharding.mesh.devices.flat)} と違います。"
                       f"規則（{spec}）は合っているので、メッシュは devices をその順のまま渡して作ってください。")
        if not leaf.sharding.is_equivalent_to(sharding, leaf.ndim):
            raise Fail(f"{where}: {name} のシャーディングが {getattr(leaf.sharding, 'spec', leaf.sharding)} で、"
                       f"規則 fsdp_tp のとおりなら {sharding.spec} です。")
