"""チェックのメッセージの長さを測る: 節のチェックの単体テスト（正解・名前のある誤答）と敵対的な値の
テストを実行し、その間に ch6.run_check が返したメッセージをすべて集めて、長さの分布を表示します。

    .venv/bin/python tools/message_lengths.py s6_1 s6_2          # 節を選ぶ（既定は 6.1–6.5）
    .venv/bin/python tools/message_lengths.py --list s6_3a       # メッセージを長い順に表示

長さは「演習名: 」の前置きを除いた本文の文字数、文の数は「。」「？」で数えます（issue 29 の目安: 2 文以内、
95 パーセンタイル 120 文字以下）。
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SECTIONS = ("s6_1", "s6_2", "s6_3a", "s6_3b", "s6_3c", "s6_4", "s6_5")
_SENTENCE_END = re.compile(r"[。？！?](?![」）)])")


def body(message: str, title: str | None) -> str:
    """「演習名: 」の前置きを除いた本文。"""
    prefix = f"{title}: " if title else ""
    return message[len(prefix):] if prefix and message.startswith(prefix) else message


def sentences(text: str) -> int:
    """文の数（「」の中の引用は数えない）。"""
    own = re.sub(r"「[^」]*」", "「」", text)
    return max(1, len(_SENTENCE_END.findall(own.rstrip("。？！?") + "。")))


class Recorder:
    """ch6.run_check を包み、(演習, 状態, 本文) を集める pytest プラグイン。"""

    def __init__(self, sections):
        self.sections = sections
        self.seen: dict[tuple[str, str], str] = {}

    def pytest_configure(self, config):
        import ch6
        if getattr(ch6.run_check, "_recording", False):  # 2 回目の pytest.main
            return
        import tests.checkhelp as checkhelp

        original = ch6.run_check
        registry = ch6.registry()

        def recording(exercise_id, answer):
            result = original(exercise_id, answer)
            entry = registry.get(exercise_id)
            text = body(result.message, entry.title if entry else None)
            self.seen[(exercise_id, text)] = str(result.status)
            return result

        recording._recording = True
        ch6.run_check = recording
        checkhelp.run_check = recording


def percentile(values, q):
    values = sorted(values)
    if not values:
        return 0
    k = max(0, min(len(values) - 1, round(q / 100 * (len(values) - 1))))
    return values[k]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sections", nargs="*", default=list(DEFAULT_SECTIONS))
    ap.add_argument("--list", action="store_true", help="print every message, longest first")
    ap.add_argument("--no-hostile", action="store_true", help="skip tests/checks/test_hostile.py")
    args = ap.parse_args(argv)

    import pytest

    sys.path.insert(0, str(ROOT))
    rec = Recorder(args.sections)
    opts = ["-q", "-p", "no:cacheprovider", "--no-header"]
    rc = pytest.main([*opts, *(str(ROOT / "tests" / "checks" / s) for s in args.sections)], plugins=[rec])
    if not args.no_hostile:
        ids = " or ".join(f"[{s[1:].replace('_', '.')}-" for s in args.sections)  # 例: [6.1- （演習 6.1-k）
        rc |= pytest.main([*opts, str(ROOT / "tests" / "checks" / "test_hostile.py"), "-k", ids], plugins=[rec])
    mine = {k: v for k, v in rec.seen.items() if any(k[0].startswith(s[1:].replace("_", ".") + "-")
                                                        for s in args.sections)}
    lengths = [len(text) for _, text in mine]
    multi = [(ex, text) for ex, text in mine if sentences(text) > 2]
    if args.list:
        for (ex, text), status in sorted(mine.items(), key=lambda kv: -len(kv[0][1])):
            print(f"{len(text):4d} {sentences(text)} {status:8s} {ex:7s} {text}")
    print(f"messages: {len(lengths)} distinct; length median {percentile(lengths, 50)}, "
          f"p95 {percentile(lengths, 95)}, max {max(lengths, default=0)}; more than 2 sentences: {len(multi)}")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
