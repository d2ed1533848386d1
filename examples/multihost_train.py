#!/usr/bin/env python3
"""N プロセスのうちの 1 つとして、データ並列の学習を数ステップ行います（6.6 節）。

どのプロセスもこの同じプログラムを実行します（multi-controller）。プロセスごとに違うのは
process_id と、手元にある（local な）デバイスとデータだけです。

ふつうは launch.py から起動します（既定はプロセス 2 個 × CPU デバイス 4 個）::

    python examples/launch.py -n 2
    python examples/launch.py -n 4 -- --steps 5

手で起動するなら端末を 2 つ開き、同じ空きポートを指定します（PORT は空いている番号に置き換える）::

    export JAX_PLATFORMS=cpu JAX_NUM_CPU_DEVICES=4
    python examples/multihost_train.py --coordinator 127.0.0.1:PORT --num-processes 2 --process-id 0
    python examples/multihost_train.py --coordinator 127.0.0.1:PORT --num-processes 2 --process-id 1

比べるための 1 プロセス版（jax.distributed を使わず、手元のデバイスだけで同じ学習をする）::

    JAX_PLATFORMS=cpu JAX_NUM_CPU_DEVICES=8 python examples/multihost_train.py --single

--coordinator / --num-processes / --process-id を省くと、jax.distributed.initialize() が
実行環境（Cloud TPU、SLURM、Open MPI、Kubernetes）から自分で読み取ります。

出力の最後の行 ``RESULT {...}`` は JSON で、ノートブックとテストが 1 プロセス版と比べます。
終了コード: 0 = 成功、1 = このプロセスで例外が起きた、2 = 引数の誤り。
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

import numpy as np

FEATURES = 4
GLOBAL_BATCH = 64          # 全プロセス合計のバッチ（グローバルデバイス数で割り切れること）
LEARNING_RATE = 0.1
TRUE_W = np.array([1.5, -2.0, 0.5, 3.0], np.float32)
TRUE_B = 0.5


def dataset(global_batch: int = GLOBAL_BATCH) -> tuple[np.ndarray, np.ndarray]:
    """全データ。固定の乱数なので、どのプロセスで作っても同じ値になります。"""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(global_batch, FEATURES)).astype(np.float32)
    y = (x @ TRUE_W + TRUE_B + 0.1 * rng.normal(size=global_batch)).astype(np.float32)
    return x, y


def local_shard(process_id: int, num_processes: int, global_batch: int = GLOBAL_BATCH):
    """このプロセスが受け持つ行だけを返します。

    本番では各ホストが自分の担当ファイルだけを読みます。ここでは全データを作って切り出します。
    メッシュのデバイスはプロセス順に並ぶので、process p の担当は連続した行 [p*rows, (p+1)*rows) です。
    """
    x, y = dataset(global_batch)
    rows = global_batch // num_processes
    part = slice(process_id * rows, (process_id + 1) * rows)
    return x[part], y[part]


def loss_fn(params, x, y):
    import jax.numpy as jnp

    pred = x @ params["w"] + params["b"]
    return jnp.mean((pred - y) ** 2)


def train_step(params, x, y):
    """1 ステップの SGD。x, y は batch 方向に分割、params は複製。
    平均（mean）が batch 全体にかかるので、コンパイラが all-reduce を入れます（プロセスをまたぐ通信）。"""
    import jax

    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    params = jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads)
    return params, loss


def run(process_id: int, num_processes: int, steps: int = 3, fail_step: int | None = None,
        show_pitfall: bool = False, hang: bool = False) -> dict:
    """学習して結果を表示し、比較用の dict を返します。1 プロセスでも N プロセスでも同じコードです。"""
    import jax
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding, PartitionSpec as P

    # --- local と global -------------------------------------------------------
    n_local, n_global = jax.local_device_count(), jax.device_count()
    print(f"process {jax.process_index()}/{jax.process_count()}: "
          f"ローカルデバイス {n_local} 個 / グローバルデバイス {n_global} 個")

    # すべてのプロセスのデバイスを並べた 1 本のメッシュ（グローバル）。どのプロセスも同じものを作ります
    mesh = jax.make_mesh((n_global,), ("data",))
    owners = [d.process_index for d in mesh.devices.flat]
    print(f"メッシュ data={n_global}、各デバイスの持ち主 process: {owners}")

    # --- 手元の shard からグローバル batch を作る --------------------------------
    x_local, y_local = local_shard(process_id, num_processes)
    batch = NamedSharding(mesh, P("data"))
    x = jax.make_array_from_process_local_data(batch, x_local, (GLOBAL_BATCH, FEATURES))
    y = jax.make_array_from_process_local_data(batch, y_local, (GLOBAL_BATCH,))
    rows = ", ".join(f"{s.index[0].start}:{s.index[0].stop}" for s in x.addressable_shards)
    print(f"手元の shard {x_local.shape} -> グローバル {jax.typeof(x)}、このプロセスのデバイスが持つ行 [{rows}]")
    if show_pitfall:
        try:   # よくある間違い: グローバル配列をそのまま numpy にする（ほかのプロセスの行は手元にない）
            np.asarray(x)
        except RuntimeError as err:
            print(f"np.asarray(x) は失敗します: {str(err).split('. ')[0]}.")

    # 複製（P()）したパラメータ。どのプロセスも同じ初期値を渡します
    params = jax.device_put({"w": np.zeros(FEATURES, np.float32), "b": np.zeros((), np.float32)},
                            NamedSharding(mesh, P()))

    # --- データ並列の学習 --------------------------------------------------------
    step_fn = jax.jit(train_step)
    losses = []
    with jax.set_mesh(mesh):
        for step in range(1, steps + 1):
            if fail_step is not None and step == fail_step:
                if hang:   # Python の中で止まったまま（heartbeat は裏のスレッドが送り続ける）
                    print(f"模擬故障: process {process_id} は step {step} の前で止まったままになります", flush=True)
                    while True:
                        time.sleep(1)
                raise RuntimeError(f"模擬故障: process {process_id} が step {step} の前に止まります (--fail-process)")
            params, loss = step_fn(params, x, y)
            losses.append(float(loss))  # loss は複製されているので、どのプロセスでも読めます
            print(f"step {step}: loss {losses[-1]:.4f}")

        # --- 結果を集める --------------------------------------------------------
        pred = x @ params["w"] + params["b"]           # batch 方向に分割されたまま（ほかのプロセスの行は見えない）
        pred_all = multihost_utils.process_allgather(pred, tiled=True)   # 全プロセスの行を集めた numpy 配列
        x_all = multihost_utils.process_allgather(x, tiled=True)
    same_data = bool(np.array_equal(x_all, dataset()[0]))
    print(f"process_allgather: 予測 {pred_all.shape}、集めた x は元の全データと一致: {same_data}")

    w, b = np.asarray(params["w"]), float(params["b"])   # 複製された配列は np.asarray で読めます
    print(f"学習後 w=[{', '.join(f'{v:.4f}' for v in w)}] b={b:.4f}")
    return {"process": process_id, "num_processes": num_processes, "global_devices": n_global,
            "losses": losses, "w": w.tolist(), "b": b, "pred": pred_all.tolist()}


def report(result: dict) -> None:
    """比較用の結果を 1 行の JSON で出す（ノートブックとテストが読む）。"""
    print("RESULT " + json.dumps(result), flush=True)


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--coordinator", help="process 0 が待ち受ける HOST:PORT（例 127.0.0.1:12355）")
    ap.add_argument("--num-processes", type=int, help="プロセスの総数")
    ap.add_argument("--process-id", type=int, help="このプロセスの番号 0..N-1")
    ap.add_argument("--single", action="store_true", help="jax.distributed を使わない 1 プロセス版（比較用）")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--show-pitfall", action="store_true", help="グローバル配列を np.asarray で読む間違いを見せる")
    # 故障に備えた時間の上限（秒）。どれも既定値は数分なので、ここでは短くします
    ap.add_argument("--init-timeout", type=int, default=60, help="全プロセスの参加を待つ上限")
    ap.add_argument("--heartbeat-timeout", type=int, default=10, help="heartbeat が途絶えたら故障とみなすまで")
    ap.add_argument("--shutdown-timeout", type=int, default=10, help="終了時に全員がそろうのを待つ上限")
    # 故障の模擬
    ap.add_argument("--fail-process", type=int, help="このプロセス番号を故障させる（テスト用）")
    ap.add_argument("--fail-at", choices=("step", "join", "hang"), default="step",
                    help="step: 2 ステップ目の前に例外で落ちる / join: 参加せずに止まったままになる / "
                         "hang: 参加した後、2 ステップ目の前で止まったままになる")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    import jax

    if args.single:
        report(run(0, 1, args.steps, show_pitfall=args.show_pitfall))
        return 0

    pid = args.process_id
    if args.fail_process is not None and args.fail_process == pid and args.fail_at == "join":
        print(f"模擬故障: process {pid} は jax.distributed.initialize を呼ばずに止まったままになります", flush=True)
        time.sleep(3600)
        return 1

    # JAX の計算より前に呼びます。process 0 は coordinator（調整役のサービス）も起動します
    jax.distributed.initialize(
        coordinator_address=args.coordinator,
        num_processes=args.num_processes,
        process_id=pid,
        # 手元の実験なので coordinator は loopback だけで待ち受けます（既定は全インターフェース [::]）
        coordinator_bind_address=args.coordinator,
        initialization_timeout=args.init_timeout,
        heartbeat_timeout_seconds=args.heartbeat_timeout,
        shutdown_timeout_seconds=args.shutdown_timeout,
    )
    pid = jax.process_index()
    try:
        fail_step = 2 if args.fail_process == pid and args.fail_at in ("step", "hang") else None
        report(run(pid, jax.process_count(), args.steps, fail_step, args.show_pitfall, args.fail_at == "hang"))
    except Exception as err:
        print(f"process {pid}: エラー {type(err).__name__}: {err}", flush=True)
        traceback.print_exc()
        sys.stderr.flush()
        # ほかのプロセスは集団通信の途中でこちらを待っているので、終了時の同期（shutdown のバリア）は
        # 成り立ちません。すぐに終わり、残りのプロセスは heartbeat の途絶で JAX が止めます。
        os._exit(1)
    jax.distributed.shutdown()   # 全プロセスがここにそろってから終わります
    return 0


if __name__ == "__main__":
    sys.exit(main())
