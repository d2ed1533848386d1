"""実行環境の表示。どのノートブックも最初のセルでこれを呼びます。"""
from __future__ import annotations


def show_devices() -> int:
    """JAX のバージョン、バックエンド、デバイス数を表示し、デバイス数を返す。"""
    import jax

    n = jax.device_count()
    backend = jax.default_backend()
    print(f"JAX {jax.__version__} / バックエンド: {backend} / デバイス数: {n}")
    if backend == "cpu" and n > 1:
        print("（CPU 上の模擬デバイスです。同じ CPU コアを共有するので、速さではなく正しさと通信の形を確かめられます）")
    elif n == 1 and backend != "cpu":
        print(
            f"{backend.upper()} が 1 つだけです。複数デバイスの動きを見るには、ランタイムを再起動し、"
            "最初のセルの先頭に os.environ['JAX_PLATFORMS'] = 'cpu' を加えて CPU の模擬デバイスを使ってください。"
        )
    elif n == 1:
        print("デバイスが 1 つです。複数デバイスの例も動きますが、分割は 1 つになります。")
    return n
