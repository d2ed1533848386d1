"""6.9 節のデータ: 講座のパッケージに入っている日本語の文章を、バイト単位で学習のバッチにします。

文章は ``corpus.txt``（6.1 節のノートブックの説明文を、ある時点で写したもの。パッケージに入っているので、
何もダウンロードしません）。UTF-8 のバイト列（0..255）をそのままトークンにします。

:class:`ByteBatches` は決まった順にバッチを返すイテレータです。

- 決定的: ステップ t のグローバルバッチは ``(seed, t)`` だけで決まる（プロセスの数や、何回目の起動かによらない）。
- プロセスごと: プロセス p（P 個のうち）は、グローバルバッチの行 ``p·B/P : (p+1)·B/P`` だけを作る。
- チェックポイントできる: 状態は ``{"position": t}`` の 1 つの整数（次に返すステップ）。保存して、
  ``ByteBatches(..., position=t)`` か :meth:`ByteBatches.restore` で同じところから続ける。

Grain（PyPI の ``grain``、Python 3.12 の配布物は 0.2.18 から）をまだ使っていない理由: ここで要るのは上の 3 つの
性質（決定的な順序、プロセスごとのシャード、整数 1 つの状態）だけで、数十行で書け、Orbax のチェックポイントに
JSON として一緒に保存できるからです。Grain に移すなら、``MapDataset`` の ``shuffle`` と ``batch``、プロセスごとの
シャード、イテレータの ``get_state`` / ``set_state`` で同じ 3 つの性質を保ち、``tests/test_capstone.py`` の
同じ確かめ（2 プロセスの行をつなぐと 1 プロセスのバッチ、再開した位置から同じバッチ）を通します。
"""
from __future__ import annotations

import functools
from importlib import resources

import numpy as np

__all__ = ["corpus_text", "corpus_bytes", "ByteBatches", "decode"]


@functools.cache
def corpus_text() -> str:
    """学習に使う文章（パッケージに入っている corpus.txt）。"""
    return resources.files("ch6.capstone").joinpath("corpus.txt").read_text(encoding="utf-8")


def corpus_bytes() -> np.ndarray:
    """文章の UTF-8 バイト列（uint8 の 1 次元配列）。"""
    return np.frombuffer(corpus_text().encode("utf-8"), dtype=np.uint8)


def decode(tokens) -> str:
    """バイトのトークン列 → 文字列（途中で切れた文字は U+FFFD に置き換える）。"""
    return bytes(np.asarray(tokens, dtype=np.uint8).tolist()).decode("utf-8", errors="replace")


class ByteBatches:
    """ステップごとに (行数, seq + 1) の int32 のバッチを返すイテレータ（プロセスの行だけ）。

    グローバルバッチのステップ t の行 i は、文章の位置 ``starts[i]`` から seq + 1 バイトの窓で、
    ``starts = default_rng((seed, t)).integers(0, len(data) - seq - 1, size=batch)``。"""

    def __init__(self, batch: int, seq: int, seed: int = 0, process_index: int = 0, process_count: int = 1,
                 position: int = 0, data: np.ndarray | None = None):
        if batch % process_count:
            raise ValueError(f"バッチ {batch} がプロセスの数 {process_count} で割り切れません")
        if not 0 <= process_index < process_count:
            raise ValueError(f"process_index {process_index} は 0 以上 {process_count} 未満にしてください")
        self.data = corpus_bytes() if data is None else np.asarray(data, dtype=np.uint8)
        self.batch, self.seq, self.seed = batch, seq, seed
        self.process_index, self.process_count = process_index, process_count
        self.position = int(position)

    @property
    def rows(self) -> slice:
        """このプロセスが作るグローバルバッチの行。"""
        per = self.batch // self.process_count
        return slice(self.process_index * per, (self.process_index + 1) * per)

    def global_batch(self, step: int) -> np.ndarray:
        """ステップ step のグローバルバッチ (batch, seq + 1)。"""
        rng = np.random.default_rng((self.seed, step))
        starts = rng.integers(0, len(self.data) - self.seq - 1, size=self.batch)
        return self.data[starts[:, None] + np.arange(self.seq + 1)].astype(np.int32)

    def __iter__(self):
        return self

    def __next__(self) -> np.ndarray:
        out = self.global_batch(self.position)[self.rows]
        self.position += 1
        return out

    def state(self) -> dict:
        """保存する状態（JSON にできる辞書）。"""
        return {"position": self.position, "seed": self.seed}

    def restore(self, state: dict) -> ByteBatches:
        """保存した状態から続けます（seed が違えば ValueError）。self を返します。"""
        if int(state["seed"]) != self.seed:
            raise ValueError(f"保存した seed {state['seed']} と、このイテレータの seed {self.seed} が違います")
        self.position = int(state["position"])
        return self
