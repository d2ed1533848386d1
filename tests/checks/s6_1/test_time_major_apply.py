"""6.1-2 time_major_apply のチェック（ch6/checks/s6_1/time_major_apply.py）のテスト。"""
import jax
import jax.numpy as jnp
import pytest

from tests.checkhelp import expect, not_done


# 6.1-2 --------------------------------------------------------------------------------
def tm_ref(fn, seqs, lengths):
    return jax.vmap(fn, in_axes=(1, 0), out_axes=1)(seqs, lengths)


def tm_transposed(fn, seqs, lengths):
    """自分で軸を動かす書き方（.T / swapaxes）も正解: 問題文はこれを禁じていない。"""
    return jnp.swapaxes(jax.vmap(fn)(jnp.swapaxes(seqs, 0, 1), lengths), 0, 1)


@pytest.mark.parametrize("fn", [
    tm_ref,
    tm_transposed,
    lambda fn, seqs, lengths: jax.vmap(fn, in_axes=(-2, 0), out_axes=-2)(seqs, lengths),
    lambda fn, seqs, lengths: jax.vmap(fn, in_axes=(1, 0))(seqs, lengths).transpose(1, 0, 2),
    jax.jit(tm_ref, static_argnums=0),
])
def test_6_1_2_correct(fn):
    expect("6.1-2", fn, "pass")


def test_6_1_2_moving_axes_yourself_is_allowed():
    """回帰: 問題文が禁じた .T の答えをチェックが通していた。いまは問題文も「軸の動かし方は自由」と書き、チェックと一致する。"""
    expect("6.1-2", tm_transposed, "pass")
    text = _markdown_of("6.1-2")
    assert "自由" in text and "転置" in text and "使わず" not in text


def test_6_1_2_wrong():
    expect("6.1-2", lambda fn, s, n: jax.vmap(fn, in_axes=(1, 0))(s, n), "fail", "(4, 6, 3)", "out_axes")
    expect("6.1-2", lambda fn, s, n: jax.vmap(fn, in_axes=(0, 0), out_axes=1)(s, n), "fail",
           "seq の 0 軸が 6", "length の 0 軸が 4", "1 軸目")
    expect("6.1-2", lambda fn, s, n: jax.vmap(fn, in_axes=1, out_axes=1)(s, n), "fail", "形 (4,)", "lengths のバッチは 0 軸目")
    expect("6.1-2", lambda fn, s, n: jax.vmap(fn, in_axes=(1, None), out_axes=1)(s, n), "fail",
           "fn の引数 length は形 () のはずが、形 (4,)")
    expect("6.1-2", lambda fn, s, n: jnp.stack([fn(s[:, i], n[i]) for i in range(s.shape[1])], axis=1), "fail",
           "Python のループ")
    expect("6.1-2", lambda fn, s, n: s, "fail", "一度も呼ばれていません")
    expect("6.1-2", not_done, "not_done")


def _markdown_of(ex_id):
    import json
    from pathlib import Path

    # 問題文: ch6.check(ex_id, …) のセルより前の、最後の「## 」の見出しからの Markdown（見出しは問題の番号を書かない）
    cells = json.loads((Path(__file__).resolve().parents[3] / "solutions" / "6_1_vmap.ipynb").read_text("utf-8"))["cells"]
    texts = ["".join(c["source"]) for c in cells]
    check = next(i for i, t in enumerate(texts) if f'ch6.check("{ex_id}"' in t)
    start = max(i for i in range(check) if cells[i]["cell_type"] == "markdown" and texts[i].startswith("## "))
    return "\n".join(t for c, t in zip(cells[start:check], texts[start:check]) if c["cell_type"] == "markdown")
