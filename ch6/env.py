"""実行環境の準備と表示。どのノートブックも最初のセルで ``n_devices = ch6.setup()`` を呼びます。

対応する JAX の範囲はこのファイルの ``MIN_JAX`` と ``TESTED_JAX`` の 2 か所だけに書きます
（``TESTED_JAX`` は requirements.txt の固定版と同じであることをテストが確かめます）。
"""
from __future__ import annotations

import os
import sys

from . import runtime
from .runtime import version_tuple  # ch6.env.version_tuple としても使われている

MIN_JAX = "0.11.2"  # すべてのノートブックとチェックが動く最も古い版（0.10.0 では 6.7 のコンパイル結果の assert と 6.10 の譲渡のエラーの型が違う。make test-min が確かめる）
TESTED_JAX = "0.12.0.1"  # 保存された出力を作った版（requirements.txt の固定版）
DEFAULT_DEVICES = 8  # CPU だけのマシンで作る模擬デバイスの数（JAX_NUM_CPU_DEVICES があればそちら）
INSTALL_HINT = f'pip install -U "jax>={MIN_JAX}"'


def version_notes(version: str, command: str = INSTALL_HINT) -> list[str]:
    """動いている JAX の版について、学習者に伝えるべきことを日本語の行で返す（なければ空）。
    command: 古いときに見せるコマンド（ch6.runtime がこのマシンに合う extra を選んだもの）。"""
    got = version_tuple(version)
    if got < version_tuple(MIN_JAX):
        return [runtime.too_old_line(version, MIN_JAX, command)]
    if got > version_tuple(TESTED_JAX):
        return [
            f"ℹ️ JAX {version} は、この講座が出力を確かめた JAX {TESTED_JAX} より新しい版です。"
            "たいていはそのまま動きますが、エラーメッセージや表示が保存された出力と少し違うことがあります。"
        ]
    return []


def _jax_already_imported() -> bool:
    return "jax" in sys.modules


def setup(cpu: bool = False, default_devices: int = DEFAULT_DEVICES, accelerator: bool = False) -> int:
    """ノートブックの最初のセルで呼ぶ。デバイス数を返す。

    ``cpu=True`` にすると GPU/TPU があっても CPU の模擬デバイスを使います（カーネルを再起動してから）。

    GPU・TPU が ``default_devices`` 個より少ないとき（Colab の TPU v5e-1 など）は、メッシュや集団通信の節が
    1 デバイスに潰れないように、配列とメッシュには CPU の模擬デバイス（既定のバックエンド）を使い、GPU・TPU は
    測定のセルが :func:`measure_device` で使います。``accelerator=True``（または環境変数 ``CH6_DEVICES=accelerator``）
    にすると、数が少なくてもすべてを GPU・TPU で実行します（``CH6_DEVICES=cpu`` は ``cpu=True`` と同じ）。

    1. JAX を読み込む前に ``JAX_NUM_CPU_DEVICES`` を（未設定なら）決める。JAX はこの変数を
       ``import jax`` のときに一度だけ読むので、読み込んだ後に変えても効きません。
    2. JAX を読み込む前に、実行環境（Colab・Kaggle・手元、TPU・GPU・CPU）と入っている JAX の版を調べる
       （:mod:`ch6.runtime`）。Colab と Kaggle では、``MIN_JAX`` より古ければ合う版（jax[tpu]・jax[cuda12] など）を
       ここで入れます。手元のマシンでは入れずに、合うコマンドを表示します。
    3. NumPy の表示桁数と、jaxpr を色なしで表示する設定をする（保存した出力に色コードを残さない）。
    4. JAX の版を確かめ、対応範囲の外なら日本語で知らせる。
    5. バックエンドとデバイスの一覧を表示する。
    """
    late = _jax_already_imported()
    mode = os.environ.get("CH6_DEVICES", "").strip().lower()
    cpu = cpu or mode == "cpu"
    accelerator = (accelerator or mode == "accelerator") and not cpu
    if cpu:
        os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ.setdefault("JAX_NUM_CPU_DEVICES", str(default_devices))
    ready = runtime.prepare(MIN_JAX, cpu_only=os.environ.get("JAX_PLATFORMS", "").strip() == "cpu")

    import jax
    import numpy as np

    np.set_printoptions(precision=4, suppress=True)
    jax.config.update("jax_pprint_use_color", False)
    for line in version_notes(jax.__version__, ready.command):
        if ready.reason == "ok" or not line.startswith("⚠️"):  # 古い版のことは runtime.prepare が表示済み
            print(line)
    if not cpu and not accelerator:
        _keep_meshes_on_cpu(default_devices)
    n = show_devices()
    wanted = os.environ.get("JAX_NUM_CPU_DEVICES", "")
    if late and cpu and jax.default_backend() != "cpu":
        print("ℹ️ JAX はこのセルより前に読み込まれていたため、cpu=True が効いていません。"
              "カーネルを再起動してから、このセルを最初に実行してください。")
    elif late and jax.default_backend() == "cpu" and wanted.isdigit() and n != int(wanted):
        print(f"ℹ️ JAX はこのセルより前に読み込まれていたため、JAX_NUM_CPU_DEVICES={wanted} が効いていません。"
              "カーネルを再起動してから、このセルを最初に実行してください。")
    return n


def accelerators() -> list:
    """GPU・TPU のデバイス（既定のバックエンドでなくても）。なければ空。"""
    import jax

    for platform in ("tpu", "gpu"):
        try:
            return list(jax.devices(platform))
        except RuntimeError:  # そのバックエンドがない
            continue
    return []


def _keep_meshes_on_cpu(wanted: int) -> None:
    """GPU・TPU が wanted 個より少なければ、既定のバックエンドを CPU（模擬デバイス）にする。
    JAX が既定のバックエンドを一度決めた後（このセルより前に JAX を使った後）は変えられない。"""
    import jax

    chips = accelerators()
    if not chips or len(chips) >= wanted:
        return
    jax.config.update("jax_platform_name", "cpu")


def measure_device():
    """測定のセルが使うデバイス: GPU・TPU があればその 1 つ目（既定のバックエンドが CPU でも）、なければ既定の 1 つ目。"""
    import jax

    chips = accelerators()
    return chips[0] if chips else jax.devices()[0]


def device_label(device=None) -> str:
    """測定の表示に添えるデバイスの名前（「TPU v5 lite」「この CPU」）。"""
    device = device if device is not None else measure_device()
    if device.platform == "cpu":
        return "この CPU"
    return f"{device.platform.upper()}（{device.device_kind}）"


def show_devices() -> int:
    """JAX のバージョン、バックエンド、デバイス数を表示し、デバイス数を返す。"""
    import jax

    n = jax.device_count()
    backend = jax.default_backend()
    print(f"JAX {jax.__version__} / バックエンド: {backend} / デバイス数: {n}")
    chips = accelerators() if backend == "cpu" else []
    if chips:
        kind = chips[0].platform.upper()
        if len(chips) == 1:
            why = "1 個では分割や集団通信が見えないため、"
        else:
            why = f"{kind} が {len(chips)} 個で、この講座が前提にする {DEFAULT_DEVICES} 個より少ないため、"
        print(f"{kind}（{chips[0].device_kind}）が {len(chips)} 個あります。{why}"
              f"配列とメッシュには CPU の模擬デバイス {n} 個を使います。"
              f"{kind} で測るのは ch6.env.measure_device() を使う測定のセルだけで、ほかの時間の測定は CPU で行います。"
              f"すべてを {kind} で実行するには、ランタイムを再起動して"
              "最初のセルを ch6.setup(accelerator=True) にしてください。")
    elif backend == "cpu" and n > 1:
        print("（CPU 上の模擬デバイスです。同じ CPU コアを共有するので、速さではなく、正しさと、どの集団通信が入るかを確かめられます）")
    elif n < DEFAULT_DEVICES and backend != "cpu":
        kind = backend.upper()
        these = "このデバイス" if n == 1 else f"この {n} 個のデバイス"
        print(
            f"{kind} のデバイスが {n} 個です。すべてを{these}で実行し、コードはこの数に合わせて動きます。"
            f"{DEFAULT_DEVICES} 個のデバイスでの分割や通信を見るには、ランタイムを再起動し、"
            "最初のセルを ch6.setup() にしてください。そうすると、配列とメッシュには CPU の模擬デバイスを使います。"
            f"その場合、{kind} で測るのは ch6.env.measure_device() を使う測定のセルだけで、ほかの時間の測定は CPU で行います。"
        )
    elif n == 1:
        print("デバイスが 1 個です。複数デバイスの例も動きますが、配列は分割されません（シャードは 1 つです）。")
    return n
