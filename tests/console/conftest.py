"""Fixtures of the console tests: a real ``rmq standalone`` and a real ``rmq console`` (both
subprocesses on free ports), headless Chromium through Playwright, and a loop thread for the
SDK clients a test runs beside the browser (Playwright's sync API needs a thread without a
running event loop, so the browser tests are plain functions)."""

from __future__ import annotations

import asyncio
import os
import pathlib
import shutil
import subprocess
import sys
import threading
from collections.abc import Coroutine, Iterator
from typing import Any

import pytest

from rmq._testing import StandaloneProcess, free_port, terminate, wait_for_port, wait_until_sync
from tests.console.console_support import PASSWORD, USER, log_in

CHROMIUM = "/usr/bin/chromium"
REPO = pathlib.Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "build" / "screenshots"


class ConsoleProcess:
    """``python -m rmq console`` on a free port, its output in a log file; the account
    USER / PASSWORD (the password from the environment, as an operator's would be)."""

    def __init__(
        self, namesrv_addr: str, log_dir: pathlib.Path, sample_interval: float = 1.0, extra_args: tuple[str, ...] = ()
    ) -> None:
        self.namesrv_addr = namesrv_addr
        self.extra_args = extra_args
        self.log_path = log_dir / f"console-{os.getpid()}-{id(self):x}.log"
        self.sample_interval = sample_interval
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def start(self) -> ConsoleProcess:
        for _ in range(3):
            self.port = free_port()
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "rmq",
                        "console",
                        "--namesrv",
                        self.namesrv_addr,
                        "--port",
                        str(self.port),
                        "--sample-interval",
                        str(self.sample_interval),
                        "--admin-user",
                        USER,
                        *self.extra_args,
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env={**os.environ, "RMQ_CONSOLE_PASSWORD": PASSWORD},
                )
            proc = self.proc

            def listening_or_exited(proc: subprocess.Popen[bytes] = proc) -> bool:
                return proc.poll() is not None or (
                    "rmq console listening" in self.log_text() and wait_for_port("127.0.0.1", self.port, 1.0)
                )

            try:
                wait_until_sync(listening_or_exited, 30, interval=0.05, what="rmq console listening")
            except AssertionError:
                self.stop()
                raise RuntimeError(f"rmq console did not listen within 30 s:\n{self.log_text()[-2000:]}") from None
            if proc.poll() is None:
                return self
            if self.proc.returncode != 3:  # 3: the port was taken meanwhile: try another
                break
        raise RuntimeError(
            f"rmq console exited with {self.proc.returncode if self.proc else None}:\n{self.log_text()[-2000:]}"
        )

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        return terminate(self.proc)


class LoopThread:
    """An asyncio loop in a thread: ``run(coro)`` runs a coroutine there and returns its
    result (the SDK's producers and consumers live there while the browser runs here)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="console-test-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 60.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    """A real name server and broker (``rmq standalone``), its own console off, writing the
    trace topic (``traceTopicEnable``: the trace page reads it)."""
    d = tmp_path_factory.mktemp("console-cluster")
    with StandaloneProcess(d / "store", extra_args=["--traceTopicEnable=true"]) as proc:
        yield proc


@pytest.fixture(scope="module")
def console(cluster: StandaloneProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleProcess]:
    """A real ``rmq console`` for the cluster, sampling TPS every second."""
    c = ConsoleProcess(cluster.namesrv_addr, tmp_path_factory.mktemp("console-log")).start()
    try:
        yield c
    finally:
        status = c.stop()
        log = c.log_text()
        assert status == 0, f"rmq console exited with {status}:\n{log[-2000:]}"
        assert "Traceback" not in log, log[-4000:]


@pytest.fixture(scope="module")
def loop_thread() -> Iterator[LoopThread]:
    lt = LoopThread()
    try:
        yield lt
    finally:
        lt.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Debian chromium through Playwright (the test extra installs Playwright; the
    browser is a system package)."""
    from playwright.sync_api import sync_playwright

    if not (os.path.exists(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(
            f"the console's browser tests need Chromium at {CHROMIUM}: `make test` installs the "
            "Debian package (apt-get install chromium) as root or through sudo; install it by hand "
            "otherwise (pip cannot, and Playwright's own download needs a CDN)"
        )
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def anonymous_page(browser: Any, console: ConsoleProcess) -> Iterator[Any]:
    """A fresh page (1280x860), not logged in, whose script errors fail the test; dialogs are
    accepted."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 860}, base_url=console.url)
    pg = ctx.new_page()
    pg.set_default_timeout(30_000)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("dialog", lambda d: d.accept())
    try:
        yield pg
    finally:
        ctx.close()
    assert not errors, f"script errors in the page: {errors}"


@pytest.fixture
def page(anonymous_page: Any) -> Any:
    """:func:`anonymous_page` logged in through the login form (its session cookie then
    serves every ``goto`` of the test)."""
    from playwright.sync_api import expect

    anonymous_page.goto("/")
    log_in(anonymous_page)
    expect(anonymous_page.locator("main[data-page='home']")).to_be_visible(timeout=60_000)
    return anonymous_page


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``shots(page, name)``: a full-page PNG under a tmp dir, copied to build/screenshots/."""
    d = tmp_path_factory.mktemp("screenshots")

    def take(pg: Any, name: str) -> pathlib.Path:
        path = d / f"{name}.png"
        pg.evaluate("window.scrollTo(0, 0)")  # (the sticky header would land mid-page otherwise)
        pg.screenshot(path=str(path), full_page=True)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, SCREENSHOTS / path.name)
        return path

    return take
