"""6.6 のチェックのテストが共有する部品: デバイス数と、メッセージが 2 文までであることを確かめる expect。"""
import jax

from ch6 import Status, registry
from tests.checkhelp import expect, sentences

N = jax.device_count()


def say(ex, fn, status, *words):
    """expect に加えて、正解・不正解のメッセージが 2 文まで（原因と直し方）であること。メッセージを返す。"""
    msg = expect(ex, fn, status, *words)
    if status in (Status.PASS, Status.FAIL):
        body = msg.removeprefix(f"{registry()[ex].title}: ")
        assert sentences(body) <= 2, f"more than two sentences: {msg!r}"
    return msg
