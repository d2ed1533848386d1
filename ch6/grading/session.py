"""カーネル 1 つ: 起動と停止、制限時間つきのセルの実行。

セルの結果は :class:`CellState`（終わった・エラー・時間切れで中断できた）。カーネルが落ちた、または中断しても
応答しないときは :class:`KernelLost` を送出し、その種類は :class:`Lost` で表します。
"""
from __future__ import annotations

import asyncio
import enum
import math
import subprocess

from . import guard, isolate
from .model import Config

TIMEOUT_ENAME = "CH6GradeTimeout"  # 時間切れで中断したセルに付けるエラー名


class CellState(enum.Enum):
    OK = "ok"
    ERROR = "error"      # セルの中で例外（errors に名前とメッセージ）
    TIMEOUT = "timeout"  # 制限時間を超え、中断できた（カーネルは使える）


class Lost(enum.Enum):
    DEAD = "dead"  # カーネルが停止した（os._exit、メモリ不足など）
    HUNG = "hung"  # 中断しても応答しない


class KernelLost(Exception):
    def __init__(self, kind: Lost):
        super().__init__(kind.value)
        self.kind = kind


def _client_class():
    from nbclient import NotebookClient

    class GradeClient(NotebookClient):
        """学習者セルの出力は捨てる（エラーの名前だけ残す。keep なら残す: nbgrader の採点後のノートブック）。
        採点セルの出力は残す。"""

        n_learner = 0
        keep = False

        def output(self, outs, msg, display_id, cell_index):
            if cell_index < self.n_learner and not self.keep:
                if msg["msg_type"] != "error":
                    return None  # 学習者セルの出力は採点に使わない（大量の print でも膨らまない）
                msg["content"]["traceback"] = []
            return super().output(outs, msg, display_id, cell_index)

    return GradeClient


class KernelSession:
    """ノートブック nb（学習者のセル n_learner 個 + 採点セル）を 1 つのカーネルで実行する。"""

    def __init__(self, nb, n_learner: int, cwd: str, cfg: Config, env: dict[str, str]):
        self.cfg, self.cwd, self.env = cfg, cwd, env
        self.errors: dict[int, dict] = {}  # セルの番号 -> {"ename", "evalue"}
        self.client = _client_class()(
            nb, timeout=int(cfg.timeout), kernel_name="python3", allow_errors=True,
            interrupt_on_timeout=True, record_timing=False, startup_timeout=120,
            error_on_timeout={"ename": TIMEOUT_ENAME, "evalue": "", "traceback": []},
            resources={"metadata": {"path": cwd}}, on_cell_error=self._on_error,
            kernel_manager_class=isolate.kernel_manager_class(),  # 隔離して起動する（isolate.mode()）
        )
        self.client.n_learner, self.client.keep = n_learner, cfg.keep_outputs
        self.channel = guard.Channel()  # 監視の UNIX ソケット（ホスト側）

    def _on_error(self, cell, cell_index, execute_reply):
        content = execute_reply.get("content", {})
        self.errors[cell_index] = {"ename": content.get("ename", "Error"), "evalue": content.get("evalue", "")}

    async def start(self) -> None:
        c = self.client
        c.km = c.create_kernel_manager()
        c.km.ch6_mode = self.cfg.isolation or isolate.mode()
        c.km.ch6_readable, c.km.ch6_hide = [self.channel.dir], list(self.cfg.protect)
        # カーネル自身の警告（TCP の暗号化など）は表に関係ないので捨てる
        await c.async_start_new_kernel(env=self.env, cwd=self.cwd,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        await c.async_start_new_kernel_client()

    async def run_prelude(self, root: str, timeout: float) -> bool:
        """監視（ch6.grading.guard）を学習者のセルより先に入れる。ソケットの接続を受けながら実行し、
        監視が「ready」を送ってきたら True。"""
        accept = asyncio.ensure_future(self.channel.accept())
        try:
            ok = await self.run_hidden(guard.kernel_source(self.channel.path, root), timeout)
        finally:
            if not accept.done():
                accept.cancel()
        if not ok or accept.cancelled() or accept.exception() is not None:
            return False
        return any(m.get("k") == "ready" for m in self.channel.drain())

    async def stop(self) -> None:
        self.channel.close()
        c = self.client
        try:
            if c.kc is not None:
                c.kc.stop_channels()
            if c.km is not None:
                if await c.km.is_alive():
                    await c.km.shutdown_kernel(now=True)
                res = c.km.cleanup_resources()
                if asyncio.iscoroutine(res):
                    await res
        except Exception:
            pass
        c.kc = c.km = None

    def _limit(self, seconds: float) -> None:
        self.client.timeout = max(1, math.ceil(seconds))

    async def cell(self, index: int, timeout: float) -> CellState:
        """ノートブックのセルを 1 つ実行する。落ちた・固まったら KernelLost。"""
        from nbclient.exceptions import DeadKernelError

        c = self.client
        self._limit(timeout)
        self.errors.pop(index, None)
        try:
            await c.async_execute_cell(c.nb.cells[index], index, store_history=index < c.n_learner)
        except DeadKernelError:
            raise KernelLost(Lost.DEAD) from None
        err = self.errors.get(index)
        if err and err["ename"] == TIMEOUT_ENAME:
            if not await self._responsive():
                raise KernelLost(Lost.HUNG)
            return CellState.TIMEOUT
        return CellState.ERROR if err else CellState.OK

    async def run_hidden(self, code: str, timeout: float) -> bool:
        """ノートブックのセルにせず（セルの番号を変えずに）コードを実行する。時間内に正常に終われば True。"""
        reply = await self._execute_hidden(code, timeout)
        return reply is not None and reply["content"].get("status") == "ok"

    async def _execute_hidden(self, code: str, timeout: float) -> dict | None:
        from nbclient.exceptions import DeadKernelError

        self._limit(timeout)
        self.client.shell_timeout_interval = 1
        try:
            msg_id = self.client.kc.execute(code, silent=True, store_history=False)
            return await self.client.async_wait_for_reply(msg_id)
        except DeadKernelError:
            raise KernelLost(Lost.DEAD) from None

    async def _responsive(self) -> bool:
        """中断のあと、短いコードに応答するか（応答の中身は問わない: 中断の直後は aborted もありうる）。"""
        try:
            return await self._execute_hidden("pass", self.cfg.grace) is not None
        except KernelLost:
            return False
