#!/usr/bin/env python3
"""学習者版のための記録: ``@recorded`` の付いた参照の実装が、隠し入力で返す値を完全版で集める。

    python tools/recorded_expectations.py --out build/recorded.json   # 1..8 デバイスで記録して 1 つにまとめる
    python tools/recorded_expectations.py --one                       # この環境のデバイス数だけ（JSON を標準出力へ）

印の付いた関数（:mod:`ch6.recorded`）を持つチェックを、答えにならない関数で 1 回ずつ動かします。チェックは
学習者を呼ぶ前に参照の値をすべて計算するので、誤りの形の値も含めて記録されます。隠し入力がデバイスの数で変わる
チェックのために、デバイスの数 1..8 ごとに別のプロセス（``JAX_NUM_CPU_DEVICES``、CPU）で動かし、まとめます。
同じ引数の要約に違う値が出たら止めます（参照が引数以外のものに依る、記録できない関数です）。

まとめた結果は ``build/recorded/`` に、ch6 のソースと JAX の版の要約を名前にしてとっておきます（同じソースなら
作り直さない）。学習者版の wheel はこれを ``ch6/recorded.json`` として入れます（``tools/learner_edition.py``）。
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from ch6.recorded import RECORDED_DEVICES  # noqa: E402

DEVICE_COUNTS = tuple(range(1, RECORDED_DEVICES + 1))  # 9 個以上では、チェックが 8 個分の隠し入力を作る
CACHE = ROOT / "build" / "recorded"


def record_here() -> dict:
    """このプロセスのデバイス数で、印の付いたチェックを動かして記録する（名前 → 要約 → 値）。"""
    import ch6
    from ch6 import recorded

    entries = ch6.registry()
    modules = set(recorded.MARKED.values())
    with recorded.recording() as table:
        for exercise_id, entry in sorted(entries.items()):
            if entry.fn.__module__ in modules:
                ch6.run_check(exercise_id, lambda *args, **kwargs: None)  # 答えにならない: 参照の値を集めるだけ
    missing = sorted(set(recorded.MARKED) - set(table))
    if missing:
        raise SystemExit(f"記録されなかった参照: {missing}（学習者を呼ぶ前に計算していないか、演習に使われていない）")
    return table


def _run_one(devices: int) -> dict:
    # このチェックアウトの ch6 を先に。後ろに元の PYTHONPATH（JAX をそこに入れたマシンがある: チップの /tmp/site312）
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": str(devices), "PYTHONPATH": path}
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--one"], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{devices} デバイスでの記録に失敗しました:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout)


def merge(tables: list[dict]) -> dict:
    merged: dict[str, dict] = {}
    for table in tables:
        for name, values in table.items():
            into = merged.setdefault(name, {})
            for key, value in values.items():
                if key in into and into[key] != value:
                    raise SystemExit(f"{name}: 同じ引数（{key}）でデバイスの数により違う値です。記録できません。")
                into[key] = value
    return {name: dict(sorted(values.items())) for name, values in sorted(merged.items())}


def _source_digest() -> str:
    h = hashlib.sha256()
    for p in sorted((ROOT / "ch6").rglob("*.py")):
        if "__pycache__" not in p.parts:
            h.update(p.relative_to(ROOT).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    import importlib.metadata

    for dist in ("jax", "jaxlib", "numpy"):
        try:
            h.update(f"{dist}={importlib.metadata.version(dist)}".encode())
        except importlib.metadata.PackageNotFoundError:
            pass
    return h.hexdigest()[:20]


def expectations() -> dict:
    """1..8 デバイスの記録をまとめたもの（同じソースならとっておいたものを使う）。"""
    cached = CACHE / f"{_source_digest()}.json"
    if cached.is_file():
        return json.loads(cached.read_text(encoding="utf-8"))
    table = merge([_run_one(n) for n in DEVICE_COUNTS])
    CACHE.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(table, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", action="store_true", help="このプロセスのデバイス数だけ記録して標準出力へ")
    ap.add_argument("--out", type=Path, help="1..8 デバイスの記録をまとめて書くファイル")
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(record_here(), sort_keys=True))
        return 0
    table = expectations()
    text = json.dumps(table, ensure_ascii=False, sort_keys=True, indent=0) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(f"記録した参照 {len(table)} 個、値 {sum(len(v) for v in table.values())} 個")
    return 0


if __name__ == "__main__":
    sys.exit(main())
