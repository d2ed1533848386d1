"""6.3c pmap からの移行の演習チェック。

隠し入力はチェックのときに ``jax.device_count()`` から作ります（1〜8 のどのデバイス数でも動く）。
損失・学習率・eps は引数で渡すので、ノートブックの定義の写しは持ちません。

- 6.3c-1 ``make_migrated_step(mesh, loss_fn, lr)``: pmap の SGD ステップを ``jax.jit(jax.shard_map(...))`` に移し、
  1 度だけ作って返すファクトリ関数。値（隠しの学習率）、積み重ならない出力、同じ形での 2 回目の呼び出しで
  トレースし直さないこと（損失関数が呼ばれた回数で数える）、shard_map を使うこと、all-gather がないことを確かめます。
- 6.3c-2 ``standardize_smap(x, eps)``: pmap の標準化を ``jax.smap`` に移す。採点は ``with jax.set_mesh(mesh):`` の中で
  呼びます。全デバイスの統計量、eps、z は行で分割したまま、平均は複製、shard_map（smap）と pmean を使うことを確かめます。
"""
from __future__ import annotations

from .. import load_section

__all__ = load_section(__name__, globals())
