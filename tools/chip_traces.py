#!/usr/bin/env python3
"""Record real chip profiles for the course (6.11): run on a machine with a TPU or GPU, one process.

    python tools/chip_traces.py --out build/chip                 # capture: raw perfetto traces + measurements.json
    python tools/chip_traces.py --trim build/chip                # trim them into ch6/data/traces/ (any machine)

Each scenario is compiled and warmed up outside the trace, timed (median of several runs, block_until_ready), and
then run a few times inside ``jax.profiler.trace(..., create_perfetto_trace=True)``. The raw
``perfetto_trace.json.gz`` of each scenario is copied to ``--out`` as ``<name>.json.gz``, and ``measurements.json``
holds the date, the chip, the JAX version and each scenario's timings and bounds. ``--trim`` keeps only the device's
op and module events (``ch6.profile.trim``) and writes the small files the lesson reads on any machine.

Scenarios: ``matmul`` (bf16 squares 4096³, 8192³, 16384³ and 8192×2048×8192), ``stream`` (a streaming read of a
2 GiB bf16 array), ``decode_bf16`` / ``decode_int8_before`` / ``decode_int8_after`` (6.10's scaled decode: bf16
weights; int8 dequantized before the step, as 6.10 first wrote it; int8 with the scale applied after the matmul,
``ch6.serving.project``) and ``train_step`` (6.9a's scaled bf16 training step).
"""
from __future__ import annotations

import argparse
import datetime
import functools
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DECODE_SIZES = dict(d_model=2048, n_heads=32, d_head=128, d_ff=8192, n_layers=12, batch=4, length=256)
TRAIN_SIZES = dict(d_model=2048, n_heads=8, d_head=256, d_ff=8192, n_layers=6, seq=512, batch=16)
MATMULS = [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 16384, 16384), (8192, 2048, 8192)]
DECODE_STEPS = 8
TRAIN_STEPS = 3


def _median_seconds(fn, repeat=7, warmup=2):
    import jax

    for _ in range(warmup):
        jax.block_until_ready(fn())
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _capture(name: str, fn, runs: int, out: Path) -> None:
    import jax

    jax.block_until_ready(fn())
    with tempfile.TemporaryDirectory() as logdir:
        with jax.profiler.trace(logdir, create_perfetto_trace=True):
            for _ in range(runs):
                r = fn()
            jax.block_until_ready(r)
        perfetto = next(Path(logdir).rglob("perfetto_trace.json.gz"))
        shutil.copy(perfetto, out / f"{name}.json.gz")


def matmul(out: Path) -> dict:
    import jax
    import jax.numpy as jnp

    rows = []
    fns = []
    for m, k, n in MATMULS:
        a = jax.random.normal(jax.random.key(0), (m, k), jnp.bfloat16)
        b = jax.random.normal(jax.random.key(1), (k, n), jnp.bfloat16)
        f = jax.jit(lambda a, b: a @ b)
        f(a, b).block_until_ready()
        sec = _median_seconds(lambda f=f, a=a, b=b: f(a, b), repeat=10)
        rows.append(dict(m=m, k=k, n=n, seconds=sec, flops=2 * m * k * n))
        fns.append((f, a, b))

    def all_shapes():
        return [f(a, b) for f, a, b in fns]

    _capture("matmul", all_shapes, 3, out)
    return dict(shapes=rows)


def stream(out: Path) -> dict:
    import jax
    import jax.numpy as jnp

    n = 2**30 if MATMULS[0][0] > 1024 else 2**20    # 1 Gi bf16 values = 2 GiB (--small: 2 MiB)
    x = jnp.ones((n // 8192, 8192), jnp.bfloat16)
    f = jax.jit(lambda x: jnp.sum(x, axis=0, dtype=jnp.float32))
    sec = _median_seconds(lambda: f(x), repeat=10)
    _capture("stream", lambda: f(x), 3, out)
    return dict(bytes=x.nbytes, seconds=sec)


def decode(out: Path) -> dict:
    import jax
    import jax.numpy as jnp

    from ch6 import hardware, hlo, lm, serving

    s = DECODE_SIZES
    big = lm.Config(d_model=s["d_model"], n_heads=s["n_heads"], d_head=s["d_head"], d_ff=s["d_ff"],
                    n_layers=s["n_layers"], max_len=s["length"])
    device = jax.devices()[0]

    def make(key):
        p = jax.tree.map(lambda a: a.astype(jnp.bfloat16), lm.init_params(big, key)[0])
        return dict(p, blocks=serving.layers(p))

    weights = {"bf16": jax.jit(make)(jax.random.key(0))}
    to_int8 = jax.jit(lambda b: serving.quantize_params({"blocks": [b]})["blocks"][0])
    weights["int8"] = dict(weights["bf16"], blocks=[to_int8(b) for b in weights["bf16"]["blocks"]])
    def before(qp, c, t, p):      # 6.10 の最初の書き方: 重みをすべて戻してから、層ごとにキャッシュを書き戻す
        return serving.decode(serving.dequantize_params(qp, jnp.bfloat16), c, t, p, write="layer")

    steps = {"decode_bf16": ("bf16", functools.partial(serving.decode, write="layer")),
             "decode_bf16_token": ("bf16", serving.decode),
             "decode_int8_before": ("int8", before),
             "decode_int8_after": ("int8", functools.partial(serving.decode, write="layer")),
             "decode_int8_token": ("int8", serving.decode)}
    cache = serving.init_cache(weights["bf16"], s["batch"], s["length"], jnp.bfloat16)
    tok = jnp.zeros(s["batch"], jnp.int32)
    pos = jnp.full(s["batch"], s["length"] - 1, jnp.int32)
    row = hardware.for_device_kind(device.device_kind)
    n_params = lm.param_count(big) - (big.vocab + big.max_len) * big.d_model
    kv_bytes = serving.tree_bytes(cache)
    results = {}
    for name, (kind, fn) in steps.items():
        read = serving.tree_bytes({k: v for k, v in weights[kind].items() if k not in ("embed", "pos")})
        t0 = time.perf_counter()
        compiled = jax.jit(fn, donate_argnums=1).lower(weights[kind], cache, tok, pos).compile()
        compile_s = time.perf_counter() - t0
        held = [cache]

        def run(compiled=compiled, kind=kind, held=held):
            for _ in range(DECODE_STEPS):
                logits, held[0] = compiled(weights[kind], held[0], tok, pos)
            return logits

        sec = _median_seconds(run, repeat=5) / DECODE_STEPS
        _capture(name, run, 1, out)
        cache = held[0]
        bound = None if row is None else serving.decode_step_time(read, kv_bytes / s["batch"], s["batch"],
                                                                  n_params, row.flops, row.hbm_bw)
        outside = hlo.dequantized_outside_matmul(compiled.as_text())
        results[name] = dict(read=read + kv_bytes, bound=bound, seconds=sec, compile=compile_s,
                             steps_in_trace=DECODE_STEPS, outside=len(outside),
                             int8_weights=sum(a.dtype == jnp.int8 for a in jax.tree.leaves(weights[kind])))
    return dict(sizes=s, n_params=n_params, kv_bytes=kv_bytes, runs=results)


def train_step(out: Path) -> dict:
    """6.9a の大きくした学習ステップ（バッチ 16）と、トレースが示す変更（Adam の m を bf16 で持つ: 更新が読み書き
    するバイトが減る）。バッチ 32 は載らない（2026-12-06 に試した: XLA は「HLO temporaries (19.53G) exceeds
    available HBM (15.75G)」と報告した。G は GiB）。"""
    import jax.numpy as jnp
    import optax

    from ch6.capstone import train

    return {"batch_16": _train(out, "train_step", TRAIN_SIZES["batch"], train.optimizer()),
            "adam_mu_bf16": _train(out, "train_step_mu_bf16", TRAIN_SIZES["batch"],
                                   optax.adam(train.LEARNING_RATE, mu_dtype=jnp.bfloat16))}


def _train(out: Path, name: str, batch: int, opt) -> dict:
    import jax
    import jax.numpy as jnp
    import optax

    from ch6 import lm
    from ch6.capstone import data

    s = TRAIN_SIZES
    config = lm.Config(max_len=s["seq"], **{k: v for k, v in s.items() if k not in ("seq", "batch")})

    def init(key):
        params, _ = lm.init_params(config, key)
        return {"params": params, "opt_state": opt.init(params)}

    def step(state, tokens):
        def loss_of(params):
            return lm.loss(jax.tree.map(lambda a: a.astype(jnp.bfloat16), params), tokens, config)

        loss, grads = jax.value_and_grad(loss_of)(state["params"])
        updates, opt_state = opt.update(grads, state["opt_state"], state["params"])
        return {"params": optax.apply_updates(state["params"], updates), "opt_state": opt_state}, loss

    state = jax.jit(init)(jax.random.key(0))
    tokens = jnp.asarray(next(data.ByteBatches(batch, s["seq"])))
    t0 = time.perf_counter()
    compiled = jax.jit(step, donate_argnums=0).lower(state, tokens).compile()
    compile_s = time.perf_counter() - t0
    held = [state]

    def one():
        held[0], loss = compiled(held[0], tokens)
        return loss

    sec = _median_seconds(one, repeat=5)

    def three():
        for _ in range(TRAIN_STEPS):
            loss = one()
        return loss

    _capture(name, three, 1, out)
    memory = compiled.memory_analysis()
    return dict(sizes=dict(s, batch=batch), seconds=sec, compile=compile_s, steps_in_trace=TRAIN_STEPS,
                params=lm.param_count(config), model_flops=lm.flops_per_token(config, s["seq"]) * batch * s["seq"],
                temp_bytes=None if memory is None else memory.temp_size_in_bytes)


def _shrink() -> None:
    global MATMULS
    MATMULS = [(256, 256, 256), (512, 128, 512)]
    DECODE_SIZES.update(d_model=128, n_heads=4, d_head=32, d_ff=256, n_layers=2, length=32)
    TRAIN_SIZES.update(d_model=128, n_heads=4, d_head=32, d_ff=256, n_layers=2, seq=32, batch=4)


SCENARIOS = {"matmul": matmul, "stream": stream, "decode": decode, "train_step": train_step}


def capture(out: Path, names: list[str]) -> dict:
    import jax

    out.mkdir(parents=True, exist_ok=True)
    device = jax.devices()[0]
    record = dict(date=datetime.date.today().isoformat(), jax=jax.__version__, backend=jax.default_backend(),
                  device_kind=device.device_kind, python=sys.version.split()[0], scenarios={})
    for name in names:       # measurements.json is written after each scenario, so a later failure loses nothing
        t0 = time.perf_counter()
        try:
            record["scenarios"][name] = SCENARIOS[name](out)
        except Exception as err:          # (an out-of-memory scenario is recorded, the others go on)
            record["scenarios"][name] = {"error": f"{type(err).__name__}: {str(err)[:300]}"}
        print(f"{name}: {time.perf_counter() - t0:.1f} s", json.dumps(record["scenarios"][name], default=str)[:600],
              flush=True)
        (out / "measurements.json").write_text(json.dumps(record, indent=1, default=str))
    return record


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="capture into this folder")
    ap.add_argument("--trim", type=Path, help="trim the raw traces of this folder into ch6/data/traces/")
    ap.add_argument("--only", nargs="*", default=list(SCENARIOS), choices=list(SCENARIOS))
    ap.add_argument("--small", action="store_true", help="tiny sizes, to try the script on a CPU")
    args = ap.parse_args(argv)
    if args.small:
        _shrink()
    if args.out:
        capture(args.out, args.only)
    if args.trim:
        from ch6 import profile

        profile.trim_folder(args.trim, ROOT / "ch6" / "data" / "traces")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
