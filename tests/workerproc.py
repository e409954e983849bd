"""Real ``tickq worker`` processes for tests: start, read their log, signal, wait."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import ROOT, tickq_env

APP = "apps.worker_app:q"


class WorkerProcess:
    """``python -m tickq worker APP ARGS`` with its stderr collected line by line."""

    def __init__(self, *args: str, app: str = APP, **env: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tickq", "worker", app, *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=tickq_env(**env), cwd=str(ROOT),
        )  # fmt: skip
        self.pid = self.proc.pid
        self.lines: list[str] = []
        self._eof = False
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._eof = True
            self._changed.notify_all()

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for_line(self, text: str, timeout: float = 30) -> str:
        """The first log line containing ``text``, waiting for it (a hang fails)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = next((ln for ln in self.lines if text in ln), None)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    raise AssertionError(f"no log line with {text!r}; log:\n{self.output}")
                self._changed.wait(min(left, 0.2))

    def json_lines(self) -> list[dict[str, Any]]:
        return [json.loads(ln) for ln in self.lines]

    def send(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 30) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(5)
        return code

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def eventually(check: Callable[[], Any], timeout: float = 30, what: str = "") -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or check}")
        time.sleep(0.02)


def runs(folder: Path) -> list[dict[str, Any]]:
    """Every start/end note the app's jobs wrote, from every process."""
    notes = []
    for path in sorted(folder.glob("*.jsonl")):
        notes.extend(json.loads(ln) for ln in path.read_text().splitlines() if ln)
    return notes
