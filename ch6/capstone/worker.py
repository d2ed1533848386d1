"""6.9 節: 複数プロセスで小さな言語モデルを学習し、k ステップおきに Orbax でチェックポイントを保存するスクリプト。

6.6 節のランチャで起動します（``--script`` にこのファイルを渡す。ランチャが ``--coordinator`` ``--num-processes``
``--process-id`` を足します）::

    python -m ch6.multihost.launch -n 2 --devices 2 --grace 5 --script <このファイル> -- --dir CKPT --steps 9

していること:

- ``jax.distributed.initialize`` の後、全プロセスのデバイスで ``(data, fsdp, tensor)`` のメッシュを作り、
  規則 ``fsdp_tp`` で状態を配置します。
- ``--dir`` に完全に書き終えたチェックポイントがあれば、その最新のものから再開します（状態とデータの位置）。
  なければ最初から学習します。書きかけのチェックポイント（一時ディレクトリ）は Orbax が数えません。
- 各プロセスは :class:`ch6.capstone.data.ByteBatches` でグローバルバッチのうちそのプロセスの行だけを作ります。
- ``--save-every k`` ステップおきに非同期で保存します。
- ``--cache-dir`` を渡すと JAX の永続コンパイルキャッシュを使い、学習ステップをキャッシュから読んだか、
  コンパイルしたかを 1 行で出します。ただし CPU の複数プロセスでは使いません（その旨を 1 行で出します）。
  キャッシュのキーにはデバイスのトポロジが入り、CPU ではそれがそのプロセスのデバイスだけを表すので、
  キーがプロセスごとに違います。キャッシュに書くのはプロセス 0 だけなので、起動し直すとプロセス 0 だけが読み、
  ほかのプロセスはコンパイルします。JAX 0.12.1 では、この学習ステップを読んだプロセスとコンパイルしたプロセスが
  混じると、最初のステップで全プロセスが待ったまま進まなくなりました（0.12.0.1 では進んだ）。
- CPU のコード生成の最適化は、``--optimize`` を付けない限り省きます（コンパイルが速くなる）。
- ``--die-at s --die-process p``: プロセス p が、ステップ s の保存の途中で SIGKILL で自分を止めます
  （書きかけのチェックポイントを残して、プロセスを失う故障の模擬）。止まるのは ``save`` の中で、
  Orbax が各項目の書き込みを始めるところです（``save`` は戻りません）。``save`` が戻った後で止めると、止まるまでに裏の書き込みが
  終わって全プロセスの待ち合わせに着いていれば、チェックポイントが完全になります（負荷しだい）。
  戻る前に止めれば、そのプロセスは待ち合わせに来ないので、ステップ s は必ず書きかけのまま残ります。
- 最後に ``RESULT {...}`` の 1 行（JSON）を出します（再開したステップ、各ステップの損失）。
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys

CACHE_READ = "/jax/compilation_cache/cache_hits"     # キャッシュからコンパイル済みのプログラムを読んだ
CACHE_WRITE = "/jax/compilation_cache/cache_misses"  # キャッシュに書いた（JAX は書くときにこの名前のイベントを出す）


def use_cache(cache_dir) -> list | None:
    """永続コンパイルキャッシュを使えるなら使い、キャッシュを読み書きしたイベントを集めるリストを返します（使わないなら None）。

    CPU の複数プロセスでは、``--cache-dir`` がなくても切ります（環境変数 JAX_COMPILATION_CACHE_DIR で有効にされていても）。"""
    import jax

    if jax.process_count() > 1 and jax.default_backend() == "cpu":
        requested = cache_dir or jax.config.jax_compilation_cache_dir
        jax.config.update("jax_enable_compilation_cache", False)
        if requested:
            print("永続コンパイルキャッシュ: CPU の複数プロセスでは使いません（キーがプロセスごとに違い、"
                  "起動し直してもプロセス 0 しか読めないため）", flush=True)
        return None
    if not cache_dir:
        return None
    jax.config.update("jax_compilation_cache_dir", str(cache_dir))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    events: list = []
    jax.monitoring.register_event_listener(
        lambda event, **_: events.append(event) if event in (CACHE_READ, CACHE_WRITE) else None)
    return events


def dying_data_handler():
    """``armed`` を立てると、次の保存の途中（データの位置を書く前）でこのプロセスを SIGKILL で止める JSON のハンドラ。

    Orbax は ``save`` の中で、各項目のハンドラの ``async_save`` を項目名の順（data が state より先）に始めます。
    ここで止まれば状態の配列は書かれず、``save`` は戻らず、このプロセスは全プロセスの書き込み完了の待ち合わせに来ません。
    Orbax は保存の引数の型からハンドラの型を引くので、部分クラスは使えません。
    型は JsonCheckpointHandler のまま、このインスタンスの ``async_save`` だけを包みます。"""
    import orbax.checkpoint as ocp

    handler = ocp.JsonCheckpointHandler()
    handler.armed = False
    original = handler.async_save

    async def async_save(*args, **kwargs):
        if handler.armed:
            os.kill(os.getpid(), signal.SIGKILL)
        return await original(*args, **kwargs)

    handler.async_save = async_save
    return handler


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="ch6/capstone/worker.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--coordinator")
    ap.add_argument("--num-processes", type=int)
    ap.add_argument("--process-id", type=int)
    ap.add_argument("--dir", required=True, help="チェックポイントのディレクトリ")
    ap.add_argument("--steps", type=int, default=9, help="学習の最後のステップ（再開しても、ここで終わる）")
    ap.add_argument("--save-every", type=int, default=3)
    ap.add_argument("--die-at", type=int, help="このステップの保存の途中で止まる")
    ap.add_argument("--die-process", type=int, default=1)
    ap.add_argument("--heartbeat-timeout", type=int, default=10)
    ap.add_argument("--cache-dir", help="JAX の永続コンパイルキャッシュのディレクトリ（使うのは 1 プロセスのときか CPU 以外のとき。"
                         "複数ホストでは共有のディレクトリに置く）")
    ap.add_argument("--optimize", action="store_true",
                    help="CPU のコード生成を最適化する（既定は省いて、コンパイルを約半分の時間にする）")
    ap.add_argument("--json", action="store_true", help="（ランチャが付ける。RESULT 行はいつも出す）")
    args = ap.parse_args(argv)

    if not args.optimize:   # 小さなモデルを数ステップ動かすだけなので、時間の大半はコンパイル。LLVM の最適化を省く
        flags = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip()
    import jax

    if args.num_processes and args.num_processes > 1:
        jax.distributed.initialize(coordinator_address=args.coordinator, num_processes=args.num_processes,
                                   process_id=args.process_id, coordinator_bind_address=args.coordinator,
                                   initialization_timeout=60, heartbeat_timeout_seconds=args.heartbeat_timeout,
                                   shutdown_timeout_seconds=10)
    cache_events = use_cache(args.cache_dir)
    from ch6 import lm
    from ch6.capstone import data, train

    pid, count = jax.process_index(), jax.process_count()
    mesh = lm.make_mesh(jax.devices())
    rules = lm.RULES["fsdp_tp"]
    sh = train.state_shardings(train.CONFIG, rules, mesh)
    batch_sh = lm.batch_sharding(rules, mesh)
    step = train.make_step(train.CONFIG, rules, sh, batch_sh)
    batches = data.ByteBatches(train.BATCH, train.SEQ, process_index=pid, process_count=count)
    dying = dying_data_handler() if args.die_at is not None and args.die_process == pid else None
    mgr = train.manager(os.path.abspath(args.dir), asynchronous=True, data_handler=dying)
    latest = mgr.latest_step()
    shape = dict(mesh.shape)
    print(f"{count} プロセス、グローバルデバイス {jax.device_count()} 個、メッシュ {shape}、"
          f"このプロセスのバッチの行 {batches.rows.start}:{batches.rows.stop}", flush=True)
    if latest is None:
        state = train.init_state(train.CONFIG, jax.random.key(0), sh)
        print("チェックポイントがないので、ステップ 0 から学習します", flush=True)
    else:
        state, data_state = train.restore(mgr, train.abstract_state(train.CONFIG, sh), latest)
        batches.restore(data_state)
        print(f"ステップ {latest} のチェックポイントから再開します（データの位置 {batches.position}）", flush=True)
    start = int(state["step"])
    losses = []
    while int(state["step"]) < args.steps:
        batch = train.put_batch(next(batches), batch_sh, train.BATCH)
        before = len(cache_events) if cache_events is not None else None
        state, loss = step(state, batch)
        if before is not None and not losses:   # 最初の呼び出しで、学習ステップを読むかコンパイルする
            new = cache_events[before:]
            print("永続コンパイルキャッシュ: " +
                  ("学習ステップはコンパイルせず、キャッシュから読みました" if CACHE_READ in new
                   else "学習ステップをコンパイルして、キャッシュに書きました" if CACHE_WRITE in new
                   else "学習ステップをコンパイルしました（キャッシュに書くのはプロセス 0 だけ）"), flush=True)
        s = int(state["step"])
        losses.append(float(loss))
        print(f"ステップ {s}: 損失 {loss:.2f}", flush=True)
        if dying is not None and args.die_at == s:
            print(f"模擬故障: プロセス {pid} はステップ {s} の保存の途中で止まります (SIGKILL)", flush=True)
            dying.armed = True
        if s % args.save_every == 0 and train.save(mgr, state, batches.state()):
            print(f"ステップ {s} の保存を始めました", flush=True)
        if dying is not None and dying.armed:   # 保存しないステップなら、ここで止まる
            os.kill(os.getpid(), signal.SIGKILL)
    mgr.wait_until_finished()
    print(f"ステップ {args.steps} まで終わりました。完全なチェックポイント: {mgr.all_steps()}", flush=True)
    print("RESULT " + json.dumps({"process": pid, "start": start, "losses": losses}), flush=True)
    mgr.close()
    if count > 1:
        jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
