"""N プロセスのうちの 1 つとして、データ並列の学習を数ステップ行います（6.6 節）。

どのプロセスもこの同じプログラムを実行します（マルチコントローラ、multi-controller）。プロセスごとに違うのは
プロセス番号と、手元にある（ローカルな）デバイスとデータだけです。

ふつうはランチャから起動します（既定はプロセス 2 個 × CPU デバイス 4 個）::

    python -m ch6.multihost.launch -n 2
    python -m ch6.multihost.launch -n 3 --devices 1 -- --steps 5

手で起動するなら端末を 2 つ開き、同じ空きポートを指定します（PORT は空いている番号に置き換える）::

    export JAX_PLATFORMS=cpu JAX_NUM_CPU_DEVICES=4
    python -m ch6.multihost.train --coordinator 127.0.0.1:PORT --num-processes 2 --process-id 0
    python -m ch6.multihost.train --coordinator 127.0.0.1:PORT --num-processes 2 --process-id 1

比べるための 1 プロセス版（jax.distributed を使わず、手元のデバイスだけで同じ学習をする）::

    JAX_PLATFORMS=cpu JAX_NUM_CPU_DEVICES=8 python -m ch6.multihost.train --single

--coordinator / --num-processes / --process-id を省くと、jax.distributed.initialize() が
実行環境（Cloud TPU、SLURM、Open MPI、Kubernetes）から自分で読み取ります。

データは 64 行です。グローバルデバイス数（プロセス数 × プロセスごとのデバイス数）で割り切れないとき
（3 個、6 個など）は、0 の行を足して割り切れる行数にそろえ（パディング）、足した行は損失に数えません（mask=0）。
だから、プロセス数やデバイス数を変えても、学習の結果は同じです（足し算の順序による差を除く）。

--json を付けると、最後に比較用の結果を ``RESULT {...}`` の 1 行（JSON）でも出します（ノートブックとテストが使う）。
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

from ch6.meshes import multiple_of
from ch6.show import num

FEATURES = 4
ROWS = 64                  # データの行数（全プロセスの合計。デバイス数によらない）
LEARNING_RATE = 0.1
TRUE_W = np.array([1.5, -2.0, 0.5, 3.0], np.float32)
TRUE_B = 0.5


def dataset() -> tuple[np.ndarray, np.ndarray]:
    """全データ（ROWS 行）。固定の乱数なので、どのプロセスで作っても同じ値になります。"""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(ROWS, FEATURES)).astype(np.float32)
    y = (x @ TRUE_W + TRUE_B + 0.1 * rng.normal(size=ROWS)).astype(np.float32)
    return x, y


def padded_rows(n_global: int) -> int:
    """バッチの行数: ROWS をグローバルデバイス数の倍数に切り上げたもの（8 個なら 64、3 個や 6 個なら 66）。"""
    return multiple_of(n_global, ROWS)


def global_batch(n_global: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """全プロセス分のバッチ (x, y, mask)。足りない行は 0 で埋め（パディング）、その行の mask を 0 にします。"""
    x, y = dataset()
    pad = padded_rows(n_global) - ROWS
    mask = np.concatenate([np.ones(ROWS, np.float32), np.zeros(pad, np.float32)])
    return np.pad(x, ((0, pad), (0, 0))), np.pad(y, (0, pad)), mask


def local_data(process_id: int, num_processes: int, n_global: int):
    """このプロセスが受け持つ行 (x, y, mask) だけを返します。

    実際のクラスタでは、各ホストが自分の担当のファイルだけを読みます。ここでは全データを作って切り出します。
    メッシュのデバイスはプロセス順に並ぶので、process p の担当は連続した行 [p*rows, (p+1)*rows) です。
    """
    x, y, mask = global_batch(n_global)
    rows = len(mask) // num_processes
    part = slice(process_id * rows, (process_id + 1) * rows)
    return x[part], y[part], mask[part]


def shard_rows(x) -> list[tuple[int, int, int]]:
    """x のうち、このプロセスのデバイスが持つシャードの (デバイス番号, 最初の行, 最後の行 + 1)。"""
    n = x.shape[0]
    return [(s.device.id, *s.index[0].indices(n)[:2]) for s in x.addressable_shards]


def loss_fn(params, x, y, mask):
    import jax.numpy as jnp

    pred = x @ params["w"] + params["b"]
    # データ ROWS 行の平均二乗誤差。パディングの行は mask=0 なので数えない
    return jnp.sum(mask * (pred - y) ** 2) / ROWS


def train_step(params, x, y, mask):
    """1 ステップの SGD。x, y, mask はバッチの方向に分割、params は複製。
    和（sum）がバッチ全体にかかるので、コンパイラが all-reduce を入れます（プロセスをまたぐ通信）。"""
    import jax

    loss, grads = jax.value_and_grad(loss_fn)(params, x, y, mask)
    params = jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads)
    return params, loss


def run(process_id: int, num_processes: int, steps: int = 3, fail_step: int | None = None,
        show_pitfall: bool = False, hang: bool = False) -> dict:
    """学習して結果を表示し、比較用の dict を返します。1 プロセスでも N プロセスでも同じコードです。"""
    import jax
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    # --- ローカルとグローバル ------------------------------------------------------
    n_local, n_global = jax.local_device_count(), jax.device_count()
    print(f"プロセス {jax.process_index()}/{jax.process_count()}: "
          f"ローカルデバイス {n_local} 個 / グローバルデバイス {n_global} 個")

    # すべてのプロセスのデバイスを並べた 1 本のメッシュ（グローバル）。どのプロセスも同じものを作ります
    mesh = jax.make_mesh((n_global,), ("data",))
    ids, owners = [d.id for d in mesh.devices.flat], [d.process_index for d in mesh.devices.flat]
    print(f"メッシュ data={n_global}: デバイス番号 {ids}、各デバイスのプロセス {owners}")

    # --- 各プロセスのローカルデータから、グローバルなバッチを作る ----------------------------
    x_local, y_local, mask_local = local_data(process_id, num_processes, n_global)
    rows = padded_rows(n_global)
    batch = NamedSharding(mesh, P("data"))
    x = jax.make_array_from_process_local_data(batch, x_local, (rows, FEATURES))
    y = jax.make_array_from_process_local_data(batch, y_local, (rows,))
    mask = jax.make_array_from_process_local_data(batch, mask_local, (rows,))
    shards = shard_rows(x)
    mine = ", ".join(f"{start}:{stop}" for _, start, stop in shards)
    pad = f"（データ {ROWS} 行 + パディング {rows - ROWS} 行）" if rows > ROWS else ""
    print(f"ローカルデータ {x_local.shape} -> グローバル配列 {jax.typeof(x)}{pad}、"
          f"このプロセスのデバイスが持つ行 [{mine}]")
    if show_pitfall:
        try:   # 落とし穴: グローバル配列をそのまま numpy 配列にする（ほかのプロセスの行はこのプロセスにない）
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
                if hang:   # Python の中で止まったまま（ハートビートは裏のスレッドが送り続ける）
                    print(f"模擬故障: プロセス {process_id} は step {step} の前で止まったままになります", flush=True)
                    while True:
                        time.sleep(1)
                raise RuntimeError(f"模擬故障: プロセス {process_id} が step {step} の前に止まります (--fail-process)")
            params, loss = step_fn(params, x, y, mask)
            losses.append(float(loss))  # loss は複製されているので、どのプロセスでも読めます
            print(f"step {step}: loss {num(losses[-1], 3)}")   # 足し算の順序で変わる桁は表示しない

        # --- 結果を集める --------------------------------------------------------
        pred = x @ params["w"] + params["b"]           # バッチの方向に分割されたまま（ほかのプロセスの行は見えない）
        pred_all = multihost_utils.process_allgather(pred, tiled=True)[:ROWS]   # 全プロセスの行（パディングは除く）
        x_all = multihost_utils.process_allgather(x, tiled=True)[:ROWS]
    same_data = bool(np.array_equal(x_all, dataset()[0]))
    print(f"process_allgather: 予測 {pred_all.shape}、集めた x は元の全データと一致: {same_data}")

    w, b = np.asarray(params["w"]), float(params["b"])   # 複製された配列は np.asarray で読めます
    print(f"学習後 w=[{', '.join(num(v, 3) for v in w)}] b={num(b, 3)}")
    return {"process": process_id, "num_processes": num_processes, "global_devices": n_global, "rows": rows,
            "losses": losses, "w": w.tolist(), "b": b, "pred": pred_all.tolist(),
            # このプロセスから見えたもの: グローバルメッシュ（全デバイスの番号と持ち主）、自分のデバイス、
            # 自分のデバイスが持つ x の行 [デバイス番号, 始め, 終わり]、x が自分のデバイスだけで完結するか
            "mesh": {"axis_names": list(mesh.axis_names), "shape": list(mesh.devices.shape),
                     "device_ids": ids, "process_index": owners},
            "local_devices": [d.id for d in jax.local_devices()],
            "shards": [list(s) for s in shards], "fully_addressable": bool(x.is_fully_addressable)}


def report(result: dict) -> None:
    """比較用の結果を 1 行の JSON で出す（--json のとき。ノートブックとテストが読む）。"""
    print("RESULT " + json.dumps(result), flush=True)


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m ch6.multihost.train", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--coordinator", help="プロセス 0 が待ち受ける HOST:PORT（例 127.0.0.1:12355）")
    ap.add_argument("--num-processes", type=int, help="プロセスの総数")
    ap.add_argument("--process-id", type=int, help="このプロセスの番号 0..N-1")
    ap.add_argument("--single", action="store_true", help="jax.distributed を使わない 1 プロセス版（比較用）")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--show-pitfall", action="store_true", help="グローバル配列を np.asarray で読む間違いを見せる")
    ap.add_argument("--json", action="store_true", help="比較用の結果を RESULT {...} の 1 行でも出す")
    # 故障に備えた時間の上限（秒）。JAX 自身の既定値は数分（300 / 100 / 300 秒）なので、ここでは短くします
    ap.add_argument("--init-timeout", type=int, default=60,
                    help="全プロセスの参加を待つ上限（initialization_timeout。JAX 自身の既定は 300 秒）")
    ap.add_argument("--heartbeat-timeout", type=int, default=10,
                    help="ハートビートが途絶えたら故障とみなすまで（heartbeat_timeout_seconds。JAX の既定は 100 秒）")
    ap.add_argument("--shutdown-timeout", type=int, default=10,
                    help="終了時にすべてのプロセスがそろうのを待つ上限（shutdown_timeout_seconds。JAX の既定は 300 秒）")
    # 故障の模擬
    ap.add_argument("--fail-process", type=int, help="このプロセス番号を故障させる（テスト用）")
    ap.add_argument("--fail-at", choices=("step", "join", "hang"), default="step",
                    help="step: 2 ステップ目の前に例外で異常終了する / join: 参加しないまま止まる / "
                         "hang: 参加した後、2 ステップ目の前で止まったままになる")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    import jax

    if args.single:
        result = run(0, 1, args.steps, show_pitfall=args.show_pitfall)
        if args.json:
            report(result)
        return 0

    pid = args.process_id
    if args.fail_process is not None and args.fail_process == pid and args.fail_at == "join":
        print(f"模擬故障: プロセス {pid} は jax.distributed.initialize を呼ばずに止まったままになります", flush=True)
        time.sleep(3600)
        return 1

    # JAX の計算より前に呼びます。process 0 はコーディネータ（全プロセスをつなぐ調整役のサービス）も起動します
    jax.distributed.initialize(
        coordinator_address=args.coordinator,
        num_processes=args.num_processes,
        process_id=pid,
        # 1 台のマシンの中の実験なので、コーディネータはループバックアドレスだけで待ち受けます（既定は [::]、すべてのアドレス）
        coordinator_bind_address=args.coordinator,
        initialization_timeout=args.init_timeout,
        heartbeat_timeout_seconds=args.heartbeat_timeout,
        shutdown_timeout_seconds=args.shutdown_timeout,
    )
    pid = jax.process_index()
    try:
        fail_step = 2 if args.fail_process == pid and args.fail_at in ("step", "hang") else None
        result = run(pid, jax.process_count(), args.steps, fail_step, args.show_pitfall, args.fail_at == "hang")
        if args.json:
            report(result)
    except Exception as err:
        print(f"プロセス {pid}: エラー {type(err).__name__}: {err}", flush=True)
        traceback.print_exc()
        sys.stderr.flush()
        # ほかのプロセスは集団通信の途中でこちらを待っているので、終了時の同期（shutdown のバリア）は
        # 成り立ちません。すぐに終わり、残りのプロセスはハートビートの途絶で JAX が止めます。
        os._exit(1)
    jax.distributed.shutdown()   # 全プロセスがここにそろってから終わります
    return 0


if __name__ == "__main__":
    sys.exit(main())
