"""採点の設定と結果のデータ。状態（Status）と印の表は ch6._core の 1 つだけを使います。"""
from __future__ import annotations

import dataclasses
from typing import Any

from .._core import Status
from ..env import DEFAULT_DEVICES


@dataclasses.dataclass
class Config:
    timeout: float = 120.0        # ノートブック 1 冊の学習者セル全体の制限時間（秒）
    check_timeout: float = 60.0   # チェック 1 つの制限時間（秒）
    setup_timeout: float = 120.0  # 採点の準備（表示の関数の確保、ch6 の読み込み直し）の制限時間（秒）
    grace: float = 10.0           # 中断のあとカーネルが応答するまで待つ秒数
    devices: int = DEFAULT_DEVICES
    jobs: int = 2


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
        return f"{self.mark} [{self.id}] {self.message}"


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
