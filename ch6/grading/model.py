"""採点の設定と結果のデータ。状態（Status）と印の表は ch6._core の 1 つだけを使います。"""
from __future__ import annotations

import dataclasses
from typing import Any

from .._core import CHECK_SECONDS, Status
from ..env import DEFAULT_DEVICES

# 状態の語（CSV・JSON・成績簿の status 列）と印の意味。ここ 1 か所が正本です（README の「先生方へ」はこれを写したもの）。
# 上の 10 個は演習 1 つの結果（ch6._core.Status、印も同じ表）、下の 2 つは成績簿のメッセージのファイルだけの語です。
NOT_SUBMITTED = "not_submitted"
NOTE = "note"
STATUS_WORDS: dict[str, tuple[str, str, str]] = {  # 語: (印, 意味, meaning)
    "pass": ("✅", "正解", "correct"),
    "fail": ("❌", "不正解（チェックが違いを見つけた）", "wrong answer (the check found a difference)"),
    "error": ("❌", "学習者のコードの中で例外が起きた", "the learner's code raised an exception"),
    "timeout": ("❌", "チェックが制限時間（--check-timeout）内に終わらなかった", "the check ran past --check-timeout"),
    "crash": ("❌", "チェックの最中にカーネルが停止した", "the kernel died during the check"),
    "not_done": ("⏳", "未解答（NotImplementedError のまま）", "not attempted (still NotImplementedError)"),
    "missing": ("⚠️", "関数が定義されていない（セルのエラー、時間切れ、削除）",
                "function not defined (cell error, time limit, deleted)"),
    "not_graded": ("⚠️", "採点できない（ファイルが読めない・壊れている、カーネルが何度も停止した など）",
                   "could not be graded (unreadable or corrupted file, kernel kept dying, ...)"),
    "internal": ("⚠️", "採点ツールやチェックの側の問題（学習者のせいではない）",
                 "a problem in the grader or the check, not the learner's"),
    "tampered": ("⚠️", "採点のしくみへの干渉が見つかった（全演習 0 点。備考に何が見つかったか）",
                 "interference with the grading was found (0 points for every exercise; the note says what)"),
    NOT_SUBMITTED: ("⚠️", "この演習ノートブックの提出がない（成績簿の点は 0）",
                    "no submission for this notebook (0 points in the gradebook)"),
    NOTE: ("", "備考（カーネルの停止、セルの削除、チェック呼び出しの変更、改ざんの手がかり など）",
           "a note (kernel died, cells deleted, check calls changed, signs of tampering, ...)"),
}


@dataclasses.dataclass
class Config:
    timeout: float = 120.0        # ノートブック 1 冊の学習者セル全体の制限時間（秒）
    check_timeout: float = CHECK_SECONDS  # チェック 1 つの制限時間（秒）: ノートブックの ch6.check と同じ
    setup_timeout: float = 120.0  # 採点の準備（表示の関数の確保、ch6 の読み込み直し）の制限時間（秒）
    grace: float = 10.0           # 中断のあとカーネルが応答するまで待つ秒数
    devices: int = DEFAULT_DEVICES
    jobs: int = 2
    isolation: str | None = None  # ch6.grading.isolate の BUBBLEWRAP・UNISOLATED（None: isolate.mode() で決める）
    protect: tuple[str, ...] = ()  # 提出物ごとに確かめ、カーネルから隠す場所（提出物のフォルダ、成績簿）
    keep_outputs: bool = False    # 学習者のセルの出力を残す（nbgrader の採点後のノートブックとフィードバックに）


@dataclasses.dataclass
class ExerciseResult:
    id: str
    title: str
    status: Status
    message: str

    def __post_init__(self):
        self.status = Status(self.status)

    @property
    def mark(self) -> str:
        return self.status.mark

    def line(self) -> str:
        return f"{self.status.label} [{self.id}] {self.message}"


def one_reason(results: list[ExerciseResult]) -> bool:
    """読めないファイルなど、全部が同じ理由で採点できなかった（理由は 1 回だけ書く。表示と成績簿で共用）。"""
    return bool(results) and all(x.status is Status.NOT_GRADED and x.message == results[0].message for x in results)


@dataclasses.dataclass
class Row:
    """提出物 1 つの採点結果（表の 1 行）。"""
    learner: str
    file: str
    notebook: str | None
    exercises: dict[str, ExerciseResult] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    @property
    def score(self) -> int:
        return sum(r.status is Status.PASS for r in self.exercises.values())

    @property
    def max_score(self) -> int:
        return len(self.exercises)

    def to_dict(self) -> dict[str, Any]:
        return {
            "learner": self.learner, "file": self.file, "notebook": self.notebook,
            "score": self.score, "max_score": self.max_score,
            "exercises": {k: {"title": r.title, "status": r.status.value, "mark": r.mark, "message": r.message}
                          for k, r in self.exercises.items()},
            "notes": list(self.notes), "seconds": round(self.seconds, 1),
        }
