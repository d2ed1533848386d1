"""サイトのテストの道具：127.0.0.1 の HTTP サーバと、DevTools プロトコルで動かすヘッドレス Chromium。

Chromium は Debian のパッケージ（``apt-get install chromium``）を使い、実行中に何もダウンロードしません。
外へのアクセスは ``--host-resolver-rules`` で止め、127.0.0.1 以外への要求はすべて記録します。
"""
from __future__ import annotations

import base64
import contextlib
import functools
import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import websocket


def find_chromium() -> str | None:
    """CH6_CHROMIUM、または PATH の chromium / chromium-browser / google-chrome。"""
    if os.environ.get("CH6_CHROMIUM"):
        return os.environ["CH6_CHROMIUM"]
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@contextlib.contextmanager
def serve(folder: Path):
    """folder を http://127.0.0.1:PORT/ で配る。住所（末尾 /）を返す。"""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class Page:
    """1 つのタブ。send() で命令を送り、届いたイベントを events にためる。"""

    def __init__(self, ws_url: str, timeout: float = 30.0):
        self.ws = websocket.create_connection(ws_url, timeout=timeout, suppress_origin=True)
        self.timeout = timeout
        self.next_id = 0
        self.events: list[dict] = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ws.close()

    def _receive(self, deadline: float) -> dict:
        self.ws.settimeout(max(0.05, deadline - time.monotonic()))
        return json.loads(self.ws.recv())

    def send(self, method: str, **params) -> dict:
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout
        while True:
            msg = self._receive(deadline)
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, method: str, timeout: float | None = None) -> dict:
        deadline = time.monotonic() + (timeout or self.timeout)
        for ev in self.events:
            if ev["method"] == method:
                return ev
        while True:
            msg = self._receive(deadline)
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] == method:
                    return msg

    def navigate(self, url: str) -> None:
        self.events.clear()
        self.send("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"JavaScript: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20.0):
        """式が真になるまで待つ（その値を返す）。"""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"待ちきれませんでした: {expression}")
            time.sleep(0.05)

    def settle(self, seconds: float = 0.3) -> None:
        """少し待って、その間に届いたイベントも events に入れる。"""
        deadline = time.monotonic() + seconds
        with contextlib.suppress(websocket.WebSocketTimeoutException):
            while time.monotonic() < deadline:
                msg = self._receive(deadline)
                if "method" in msg:
                    self.events.append(msg)

    def errors(self) -> list[str]:
        """コンソールのエラー、JavaScript の例外、読み込めなかった資源。"""
        found = []
        for ev in self.events:
            p = ev.get("params", {})
            if ev["method"] == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                found.append(f"例外: {d.get('exception', {}).get('description') or d.get('text')}")
            elif ev["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                found.append("console." + p["type"] + ": " + " ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
            elif ev["method"] == "Log.entryAdded" and p["entry"]["level"] == "error":
                found.append(f"ログ: {p['entry']['text']} {p['entry'].get('url', '')}".strip())
            elif ev["method"] == "Network.loadingFailed" and not p.get("canceled"):
                found.append(f"読み込めない: {p.get('errorText')} (requestId {p.get('requestId')})")
        return found

    def requested_urls(self) -> list[str]:
        return [ev["params"]["request"]["url"] for ev in self.events if ev["method"] == "Network.requestWillBeSent"]

    def set_viewport(self, width: int, height: int, mobile: bool = False) -> None:
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=mobile)

    def screenshot(self, path: Path) -> None:
        data = self.send("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))


class Chromium:
    """ヘッドレス Chromium を 1 つ起動する（with で使う）。"""

    def __init__(self, binary: str, width: int = 1280, height: int = 900):
        self.binary = binary
        self.width, self.height = width, height

    def __enter__(self) -> Chromium:
        self.profile = tempfile.mkdtemp(prefix="ch6-chromium-")
        args = [
            self.binary,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-features=Translate,MediaRouter,OptimizationHints",
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            f"--user-data-dir={self.profile}",
            f"--window-size={self.width},{self.height}",
            "--lang=ja",
            "about:blank",
        ]
        self.log = open(Path(self.profile) / "chromium.log", "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__(None, None, None)
                log = (Path(self.profile) / "chromium.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"Chromium が起動しませんでした: {log}")
            time.sleep(0.1)
        self.port = int(port_file.read_text().splitlines()[0])
        return self

    def new_page(self) -> Page:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?about:blank", method="PUT")
        with urllib.request.urlopen(req, timeout=30) as resp:
            info = json.loads(resp.read())
        page = Page(info["webSocketDebuggerUrl"])
        page.set_viewport(self.width, self.height)
        return page

    def __exit__(self, *exc) -> None:
        if getattr(self, "proc", None) is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        with contextlib.suppress(Exception):
            self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)
