"""チェックの単体テストが 2 つ以上の節で共有する部品: デバイス数、2 デバイス以上でだけ走らせる印、未解答の関数、
例外を出す関数、状態と言葉の確認。1 つの節だけが使う部品は tests/checks/s6_N/common.py に置きます。"""
import re

import jax
import pytest

from ch6 import registry, run_check

N = jax.device_count()
multi = pytest.mark.skipif(N < 2, reason="集団通信は 2 デバイス以上でしか現れない")

# 6.1–6.5 のメッセージは 2 文まで（issue 29 の 7、CONTRIBUTING の「Check messages」）。「」の中の引用は数えない
SHORT_SECTIONS = ("6.1-", "6.2-", "6.3a-", "6.3b-", "6.3c-", "6.4-", "6.5-")
_END = re.compile(r"[。？！?](?![」）)])")


def sentences(text: str) -> int:
    """文の数（「」の中は数えない。最後の「。」がなくても 1 文）。"""
    own = re.sub(r"「[^」]*」", "「」", text)
    return max(1, len(_END.findall(own.rstrip("。？！?") + "。")))


def not_done(*args, **kwargs):
    raise NotImplementedError


def boom(*args, **kwargs):
    raise ZeroDivisionError("division by zero")


def expect(ex, fn, want_status, *words):
    """run_check の状態が want_status で、メッセージが 1 行で words をすべて含むこと。メッセージを返す。"""
    r = run_check(ex, fn)
    assert r.status == want_status, r.message
    assert "\n" not in r.message, r.message
    if ex.startswith(SHORT_SECTIONS) and r.status in ("pass", "fail"):
        body = r.message.removeprefix(f"{registry()[ex].title}: ")
        assert sentences(body) <= 2, f"more than two sentences: {r.message!r}"
    for w in words:
        assert w in r.message, f"{w!r} not in {r.message!r}"
    return r.message


def expect_named_or_untold(ex, fn, untold, *words):
    """誤りの答え fn が words を含む ❌ になるか、このバックエンドでは見分けられず、✅ の行がまさにその誤り（untold）を
    「確かめられません」と断るか（issue 46 の 4: チップの上では、見分けられない誤りを ✅ が名指しする）。"""
    from ch6.checking import CANNOT_TELL

    r = run_check(ex, fn)
    if r.status == "pass" and CANNOT_TELL in r.message and untold in r.message:
        return r.message
    return expect(ex, fn, "fail", *words)
