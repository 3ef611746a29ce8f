"""Headless Chromium driven over the DevTools protocol on a pipe (no extra packages): open a page,
collect its console errors and uncaught exceptions, run JavaScript, click and type for real."""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

TIMEOUT = 60.0


def chromium_path() -> str:
    """Debian's `chromium`; skips without it, but fails in CI (`.ci/run` installs it)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: CI must run the browser tests")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


def _high(fds: tuple[int, int]) -> tuple[int, int]:
    """A pipe's ends moved above 9, so that placing them at 3 and 4 cannot clobber either."""
    moved = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in fds)
    for fd in fds:
        os.close(fd)
    return moved[0], moved[1]


class Browser:
    """One headless Chromium with one page; `problems` gathers console errors and exceptions."""

    def __init__(self) -> None:
        # First the skip: nothing (profile, pipes) is made for a browser that is not there, so a
        # machine without Chromium leaves no finalizer to warn in some later test.
        executable = chromium_path()
        # Chromium's helper processes may still write to the profile as it is removed.
        self._profile = tempfile.TemporaryDirectory(
            prefix="memstore-chromium-", ignore_cleanup_errors=True
        )
        to_browser, self._send_fd = _high(os.pipe())
        self._read_fd, from_browser = _high(os.pipe())
        command = [
            executable,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--remote-debugging-pipe",
            f"--user-data-dir={self._profile.name}",
            "--window-size=1280,900",
            "about:blank",
        ]
        # The protocol's pipe is the browser's fd 3 (commands in) and fd 4 (replies out).
        place_pipe = f'exec 3<&{to_browser} 4>&{from_browser}; exec "$@"'
        try:
            self._process = subprocess.Popen(
                ["bash", "-c", place_pipe, "bash", *command],
                pass_fds=(to_browser, from_browser),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except BaseException:
            for fd in (self._send_fd, self._read_fd):
                os.close(fd)
            self._profile.cleanup()
            raise
        finally:
            os.close(to_browser)
            os.close(from_browser)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        try:
            self._session = self._attach()
        except BaseException:
            self.close()
            raise

    def _attach(self) -> str:
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})
        session: str = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self._call(f"{domain}.enable", None, session)
        return session

    def __enter__(self) -> Browser:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._process.kill()
        self._process.wait()
        os.close(self._send_fd)
        os.close(self._read_fd)
        self._profile.cleanup()

    # --- the protocol ---------------------------------------------------------------------------

    def _message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._read_fd], [], [], left)[0]:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._read_fd, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its pipe")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def _call(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        self._next_id += 1
        request: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            request["sessionId"] = session
        os.write(self._send_fd, json.dumps(request).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT
        while True:
            message = self._message(deadline)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message["result"]
                return result
            self.events.append(message)

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A protocol command on the page."""
        return self._call(method, params, self._session)

    def wait_for(self, method: str) -> dict[str, Any]:
        """The next event `method` (one already received counts), removed from `events`."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            for event in self.events:
                if event.get("method") == method:
                    self.events.remove(event)
                    return event
            self.events.append(self._message(deadline))

    # --- what tests use -------------------------------------------------------------------------

    def open(self, path: Path) -> float:
        """Load a file and wait for its load event; the seconds it took."""
        started = time.perf_counter()
        self.call("Page.navigate", {"url": path.resolve().as_uri()})
        self.wait_for("Page.loadEventFired")
        return time.perf_counter() - started

    def js(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        reply = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click at the middle of the first element `selector` matches."""
        box = self.js(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        x, y = box
        for kind in ("mousePressed", "mouseReleased"):
            self.call(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
            )

    def type(self, selector: str, words: str) -> None:
        """Focus an input and type `words` into it."""
        self.js(f"document.querySelector({json.dumps(selector)}).focus()")
        self.call("Input.insertText", {"text": words})

    def press_enter(self, shift: bool = False) -> None:
        modifiers = 8 if shift else 0
        for kind in ("rawKeyDown", "keyUp"):
            self.call(
                "Input.dispatchKeyEvent",
                {
                    "type": kind,
                    "key": "Enter",
                    "code": "Enter",
                    "windowsVirtualKeyCode": 13,
                    "modifiers": modifiers,
                },
            )

    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions and logged errors seen so far."""
        self.js("0")  # let pending events arrive
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(f"exception: {params['exceptionDetails']}")
            elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "warning"):
                found.append(f"console.{params['type']}: {params['args']}")
            elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
                found.append(f"log: {params['entry']}")
        return found
