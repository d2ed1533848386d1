"""ランチャの出力の行を読む規則（ランチャ本体と、ノートブック・テスト用の小道具で共用）。"""
from __future__ import annotations

import re

# ランチャが付ける行頭の印: "[p0] ..."、"[launch] ..."
PREFIX = re.compile(r"^\[(p\d+|launch)\] ?(.*)$")
# glog 形式の JAX（C++）のログ: 例 "F1129 19:20:13.780631   13157 client.h:80] メッセージ"
GLOG = re.compile(r"^([EFWI])\d{4} [\d:.]+\s+\d+ [\w.-]+:\d+\] (?:\[\d+\] )?(.*)$")
PROTO = re.compile(r"\s*\[type\.googleapis\.com[^\]]*\]")
COORD = re.compile(r"127\.0\.0\.1:\d+")
# gloo の接続ログは複数のスレッドが細切れに書くので、断片だけの行もできる
_GLOO_PIECES = re.compile(r"^(?:\[Gloo\] Rank |\d+| is connected to | peer ranks\. "
                          r"Expected number of connected peer ranks is : |\s)*$")


def is_gloo_noise(line: str) -> bool:
    """gloo（CPU の集団通信）の接続ログ、その断片、空行なら True。学習の話には関係しない雑音です。"""
    return "[Gloo]" in line or "peer ranks" in line or bool(_GLOO_PIECES.match(line))


def condense(lines: list[str]) -> list[str]:
    """1 プロセスの出力から、毎回変わる部分や雑音を除いた行。

    gloo の接続ログ、RESULT 行、Python のトレースバック、C++ のスタックトレースを除き、
    JAX（C++）のログは「JAX ログ (F): メッセージ」の形に縮めます（時刻やスレッド番号を落とす）。
    """
    out, in_tb, in_log = [], False, False
    for line in lines:
        if line.startswith("Traceback (most recent call last)"):
            in_tb = True
            continue
        if in_tb:
            if line.startswith(" "):
                continue
            in_tb = False
            continue   # トレースバックの最後の行（例外の要約）も除く
        if line.startswith("RESULT ") or is_gloo_noise(line):
            continue
        m = GLOG.match(line)
        if m:
            msg = ". ".join(PROTO.sub("", m.group(2)).strip().split(". ")[:2])   # 最初の 2 文まで
            out.append(f"JAX ログ ({m.group(1)}): {msg}")
            in_log = in_log or m.group(1) in "EF"
            continue
        if in_log:
            continue   # エラーログの続きの行や C++ のスタックトレース（このあとプロセスは終わる）
        out.append(line)
    return out
