"""Child processes: this checkout's tickq on the path, and nothing left running afterwards."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PYTHON = sys.executable

_children: list[subprocess.Popen[str]] = []
_scratch: list[Path] = []


def scratch(prefix: str) -> Path:
    """A new empty folder for this benchmark run's files; ``cleanup`` removes them all."""
    if not _scratch:
        _scratch.append(Path(tempfile.mkdtemp(prefix="tickq-bench-")))
    return Path(tempfile.mkdtemp(prefix=prefix, dir=_scratch[0]))


def env(**extra: str) -> dict[str, str]:
    """The environment for a child: this checkout's src and bench/ first on the path."""
    result = dict(os.environ)
    result["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT / "src"), str(BENCH), result.get("PYTHONPATH")) if p
    )
    result.update(extra)
    return result


def spawn(args: list[str], output: Path | None = None, **extra: str) -> subprocess.Popen[str]:
    """Start ``python ARGS`` from bench/; remembered for ``cleanup``.

    Output goes to pipes, or to the file ``output`` for long-lived chatty processes such
    as workers (a pipe nobody reads fills up and blocks the writer).
    """
    sink = output.open("w") if output else None
    proc = subprocess.Popen(
        [PYTHON, *args],
        cwd=BENCH,
        env=env(**extra),
        text=True,
        stdin=subprocess.DEVNULL if sink else subprocess.PIPE,
        stdout=sink or subprocess.PIPE,
        stderr=subprocess.STDOUT if sink else subprocess.PIPE,
    )
    if sink:
        sink.close()  # the child holds its own copy
    _children.append(proc)
    return proc


def last_line(path: Path) -> str:
    lines = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
    return lines[-1] if lines else "no output"


def result(proc: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    """Wait for a child and parse the JSON line it printed last."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(proc)
        raise RuntimeError(f"{proc.args[1:]} did not finish within {timeout:g}s") from None
    if proc.returncode != 0:
        tail = (err or out).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{proc.args[1:]} exited {proc.returncode}: {tail[0]}")
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def stop(proc: subprocess.Popen[str], grace: float = 10.0) -> int:
    """SIGTERM, then SIGKILL after ``grace`` seconds; returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream:
            stream.close()
    return proc.returncode


def cleanup() -> None:
    """Kill the children still running and remove the scratch folder."""
    while _children:
        proc = _children.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    while _scratch:
        shutil.rmtree(_scratch.pop(), ignore_errors=True)


def wait_for(
    condition: Callable[[], bool], timeout: float, what: str, every: float = 0.005
) -> None:
    """Poll ``condition`` until true; raise naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(every)


def wall_time(args: list[str], **extra: str) -> float:
    """Seconds a fresh ``python ARGS`` process takes, start to exit (must exit 0)."""
    started = time.perf_counter()
    done = subprocess.run(
        [PYTHON, *args], cwd=BENCH, env=env(**extra), capture_output=True, text=True, timeout=60
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{args} exited {done.returncode}: {tail[0]}")
    return elapsed


def help_text(*args: str) -> str:
    """``python -m tickq ARGS --help`` output, or "" when this build has no such command."""
    done = subprocess.run(
        [PYTHON, "-m", "tickq", *args, "--help"],
        cwd=BENCH,
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout if done.returncode == 0 else ""
