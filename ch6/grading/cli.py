"""クラス全員の演習ノートブックを採点する / Grade a whole class of exercise notebooks.

使い方 / usage::

    python -m ch6.grade 提出フォルダ/                   # 学習者 × 演習 の表
    python -m ch6.grade 提出フォルダ/ --csv 成績.csv --json 成績.json
    python -m ch6.grade 提出フォルダ/ --gradebook 成績簿.csv  # 成績簿用: 1 人 1 行の点 + メッセージ + 演習ごとのまとめ
    python -m ch6.grade exercises/6_1_vmap.ipynb        # 1 冊だけなら、学習者の自己チェック
    ch6-grade 提出フォルダ/ --jobs 4 --timeout 300      # 同じもの（コンソールスクリプト）

しくみ:

- 提出物は 1 冊ずつ新しいカーネルで上から実行します（``--jobs`` 冊を並列に）。
  学習者のセルでエラーが起きても止めずに最後まで実行し、ノートブック全体には制限時間
  （``--timeout``）があります。時間切れのセルは中断し、それまでに定義された関数で採点します。
- 採点中のカーネルでは、学習者のセルにある ``ch6.check(...)`` は何もしません（環境変数
  ``CH6_GRADING=1``）。無限ループする関数が 1 つあっても、学習者セルの制限時間を使い切らず、
  ほかの演習は採点されます（その演習だけがチェックの制限時間で ❌ になります）。
- そのあと同じカーネルで採点の準備をします（制限時間はチェックとは別に長め）: ``ch6`` をインストール先から
  読み込み直し（``sys.modules`` から消して再 import。読み込むのはチェックの登録表だけです）、演習ごとに
  ``run_check`` を呼びます。学習者が ``ch6.check`` の呼び出しを消したり書き換えたり、``ch6`` を差し替えたり
  しても、採点は講座のチェック（隠し入力）で行われます。学習者の関数は、チェックの登録名
  （``@exercise(id, "関数名")``）で探します。
- 採点結果の表示に使う関数と、提出物ごとの乱数（nonce）は、学習者のセルより先に実行する準備の
  コードで閉じ込めます。学習者のコードが ``IPython.display.display`` などを差し替えても、
  その表示は結果として使いません。ただし学習者のコードは採点と同じカーネルで動くので、
  これは改ざんの防止ではなく検出です（tamper-evident, not tamper-proof）。
  ``IPython.display``・``sys.meta_path``・``builtins``・``importlib``・``input_transformers``・
  ``events.register`` などに触れるコードは備考に書くので、そういう提出物は結果とコードを確かめてください。
- どの演習がどのノートブックのものかは、パッケージに同梱した演習ノートブックの情報
  （``ch6/grading/exercises.json``）から決めます。``--reference フォルダ`` なら、そのフォルダの演習ノートブックの
  ``ch6.check("6.N-k", …)`` 呼び出しから決めます。
- 演習ノートブックとセルを突き合わせ、セルの削除・並べ替え、チェック呼び出しの変更を
  備考に書きます（採点はそのまま行います）。
- カーネルが落ちたセル（``os._exit`` やメモリ不足）は、新しいカーネルでそのセルを飛ばして
  やり直します。中断しても応答しないセルは、新しいカーネルでその手前までを実行し直します
  （カーネルは 1 冊につき最大 3 回）。
- 提出物は隔離して実行します（``ch6.grading.isolate``: bubblewrap、Linux の名前空間）。書けるのはその提出物の
  作業フォルダ（一時フォルダ）だけで、ほかの提出物・成績簿・講座のチェックアウトは見えず、採点のしくみは読み取り専用です。
  隔離できないときはクラスの採点を始めません（1 冊だけの自己チェックは隔離なしで動きます）。``--unisolated`` を付けたときだけ
  隔離なしで、1 冊ずつ採点のしくみ（インストールした ``ch6``）と提出物・成績簿（``--protect`` で足せます）を前後で比べ、
  書き換えた提出物を ⚠️ tampered（0 点）にして元に戻します。

印: ✅ 正解、❌ 不正解・学習者のコードのエラー・チェック中の時間切れ、⏳ 未解答
（NotImplementedError のまま）、⚠️ 採点できない（関数が見つからない、ファイルが読めない など）。
状態の語（CSV の status）ごとの意味は ``ch6.grading.model.STATUS_WORDS`` にあります。
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from .. import _core
from . import exercises, gradebook, isolate, report
from .batch import FEEDBACK_ONLY, collect, grade_all, nbgrader_paths, only_feedback
from .identify import find
from .model import Config


def load_checks() -> dict[str, str]:
    """すべてのチェックを読み込む。読み込めないモジュールがあっても残りは使う
    （``_core.registry`` が 1 つずつ読み込む）。返り値は {モジュール名: 理由}（読み込めなかったもの）。"""
    return _core.load_errors()


def registry_titles() -> dict[str, str]:
    return {k: e.title for k, e in _core.registry().items()}


def load_assignments(reference: Path | None) -> dict[str, exercises.Assignment]:
    """--reference のフォルダ、なければ同梱の exercises.json。どちらもなければ登録済みのチェックを節ごとに。"""
    found = exercises.from_folder(reference) if reference is not None else exercises.packaged()
    return found or exercises.from_registry(registry_titles())


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="ch6-grade", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", help="提出されたノートブック、またはそれを入れたフォルダ")
    ap.add_argument("--csv", type=Path, help="結果を CSV に書き出す")
    ap.add_argument("--json", type=Path, help="結果を JSON に書き出す")
    ap.add_argument("--gradebook", type=Path, metavar="OUT.csv",
                    help="成績簿に取り込む CSV を 3 つ書く。OUT.csv は 1 人 1 行で、ノートブックごとの点と合計。"
                         "OUT_messages.csv はメッセージ、OUT_summary.csv は演習ごとのまとめ")
    ap.add_argument("--timeout", type=float, default=Config.timeout,
                    help="1 冊の学習者セル全体の制限時間（秒、既定 %(default)g。JAX の読み込みは採点の準備に含め、ここには数えない）")
    ap.add_argument("--check-timeout", type=float, default=Config.check_timeout,
                    help="チェック 1 つの制限時間（秒、既定 %(default)g）")
    ap.add_argument("--jobs", type=int, default=Config.jobs, help="同時に動かすカーネルの数（既定 %(default)d）")
    ap.add_argument("--devices", type=int, default=Config.devices,
                    help="カーネルの模擬 CPU デバイス数（既定 %(default)d）")
    ap.add_argument("--reference", type=Path, default=None,
                    help="配った演習ノートブックのフォルダ（既定: パッケージに同梱した exercises/ の情報）")
    ap.add_argument("--notebook", help="すべての提出物をこの演習ノートブック（例 6_1_vmap）として採点する")
    ap.add_argument("--details", action="store_true", help="表のあとに、正解でなかった演習のメッセージを並べる")
    ap.add_argument("--quiet", action="store_true", help="進み具合を表示しない")
    ap.add_argument("--unisolated", action="store_true",
                    help="隔離できないマシンで、隔離なしで採点する（1 冊ごとに採点のしくみと提出物・成績簿を確かめる）")
    ap.add_argument("--protect", type=Path, action="append", default=[], metavar="PATH",
                    help="提出物から隠し、1 冊ごとに確かめるファイル・フォルダを足す（ほかのコースの成績簿など。何度でも）")
    return ap


def _refuse(message: str) -> int:
    print(message, file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    missing = [p for p in args.paths if not Path(p).exists()]
    if missing:
        return _refuse(f"見つかりません / not found: {', '.join(missing)}")
    for option, out in (("--csv", args.csv), ("--json", args.json), ("--gradebook", args.gradebook)):  # 長い採点のあとで書けないと困る
        if out is not None and not out.resolve().parent.is_dir():
            return _refuse(f"{option} {out}: 書き出し先のフォルダがありません / output folder does not exist: "
                           f"{out.parent}")
    if args.reference is not None and not args.reference.is_dir():
        return _refuse(f"--reference {args.reference}: フォルダがありません / not a folder")
    given, said = nbgrader_paths(args.paths)
    for line in said:
        print(line, file=sys.stderr)
    paths = collect(given)
    if not paths:
        if only_feedback(given):
            return _refuse(FEEDBACK_ONLY)
        return _refuse("採点するノートブックが見つかりません / no notebooks found")
    for mod, why in load_checks().items():
        print(f"警告: ch6/checks/{mod}.py を読み込めません（{why}）。この節の演習は採点できません。", file=sys.stderr)
    assignments = load_assignments(args.reference)
    if args.notebook and find(assignments, args.notebook) is None:
        return _refuse(f"--notebook {args.notebook}: 知らない演習ノートブックです（あるのは "
                       f"{', '.join(sorted(assignments, key=exercises.natural_key))}）")

    how = isolate.UNISOLATED if args.unisolated else isolate.mode()
    if how is None and len(paths) > 1:
        return _refuse(isolate.REFUSE)
    how = how or isolate.UNISOLATED  # 1 冊だけ（自分のノートブックの確かめ）: 隔離できなければ、なしで（確かめつき）
    protect = tuple(str(p) for p in [*given, *args.protect, *(o for o in (args.csv, args.json, args.gradebook) if o)])
    cfg = Config(timeout=args.timeout, check_timeout=args.check_timeout, devices=args.devices,
                 jobs=1 if how == isolate.UNISOLATED else args.jobs, isolation=how, protect=protect)
    if len(paths) > 1:
        print(isolate.describe(how), file=sys.stderr)
    progress = None if args.quiet or len(paths) == 1 else (lambda s: print(s, file=sys.stderr, flush=True))
    start = time.monotonic()
    try:
        rows = asyncio.run(grade_all(paths, assignments, cfg, args.notebook, progress))
    except KeyboardInterrupt:  # カーネルは各タスクの finally で止めてある
        print("中断しました / interrupted", file=sys.stderr)
        return 130
    if len(paths) == 1 and rows[0].notebook is not None:
        report.render_self_check(rows[0])
    else:
        report.render(rows, assignments, details=args.details)
    if not args.quiet and len(paths) > 1:
        print(f"{len(rows)} 件を {time.monotonic() - start:.1f} 秒で採点しました（--jobs {cfg.jobs}）",
              file=sys.stderr)
    if args.csv:
        report.write_csv(rows, args.csv)
    if args.json:
        report.write_json(rows, args.json)
    if args.gradebook:
        written = gradebook.write(rows, args.gradebook)
        if not args.quiet:
            print("成績簿 / gradebook: " + ", ".join(map(str, written)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
