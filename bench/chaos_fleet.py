"""The chaos suite's moving parts: a Postgres cluster of its own, and the processes it kills.

``Cluster`` is ``pg_createcluster`` on a free port (never the shared server on 5432),
restarted by ``pg_ctlcluster`` and always dropped by ``pg_dropcluster --stop``. ``Fleet``
runs the worker, tick and enqueuer processes, restarts what the fault injector kills (as
a supervisor would) and remembers every pid it killed and when.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PG_VERSION = os.environ.get("TICKQ_CHAOS_PG_VERSION", "15")
SHARED_PORT = 5432
BATCH = 50
"""Jobs per ``enqueue_many`` call of the enqueuer."""
CONCURRENCY = 4
"""Jobs each worker runs at a time."""


def resume_point(log: Path) -> int:
    """The first job the enqueuer has not yet stored, from its own log."""
    done = 0
    if log.exists():
        for line in log.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == "ok":
                done = max(done, int(parts[2]))
    return done


def stored(url: str, keys: list[str]) -> int:
    """How many of these unique keys are in the jobs table (the auditor's own query)."""
    if url.startswith("sqlite:///"):
        import sqlite3

        with sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30) as conn:
            marks = ",".join("?" * len(keys))
            sql = f"SELECT count(*) FROM tickq_jobs WHERE unique_key IN ({marks})"
            return int(conn.execute(sql, keys).fetchone()[0])
    import psycopg

    with psycopg.connect(url, autocommit=True, application_name="tickq-chaos") as conn:
        row = conn.execute(
            "SELECT count(*) FROM tickq_jobs WHERE unique_key = ANY(%s)", (keys,)
        ).fetchone()
        return int(row[0]) if row else 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(*args: str, timeout: float = 120) -> None:
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: {tail[0]}")


class Cluster:
    """A throwaway Postgres cluster: ``chaos_<random>`` on a free port, trust auth."""

    def __init__(self) -> None:
        self.name = f"chaos_{secrets.token_hex(4)}"
        self.port = free_port()
        if self.port == SHARED_PORT:
            raise RuntimeError("refusing to use port 5432: that is the shared server")
        self.created = False

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def create(self) -> None:
        atexit.register(self.drop)
        self.created = True  # a half-made cluster is dropped too
        _run("pg_createcluster", PG_VERSION, self.name, "-p", str(self.port), "--start",
             "--", "--auth=trust")  # fmt: skip

    def restart(self) -> None:
        _run("pg_ctlcluster", PG_VERSION, self.name, "restart", "-m", "fast", timeout=60)

    def stop_now(self) -> None:
        """Stop at once: SIGINT to the postmaster (what ``pg_ctl stop -m fast`` sends, less
        the wrapper's start-up time), then wait until it is gone."""
        pidfile = Path(f"/var/lib/postgresql/{PG_VERSION}/{self.name}/postmaster.pid")
        pid = int(pidfile.read_text().split()[0])
        os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.01)
        raise RuntimeError(f"postmaster {pid} of cluster {self.name} did not stop in 60 s")

    def start(self) -> None:
        _run("pg_ctlcluster", PG_VERSION, self.name, "start", timeout=60)

    def drop(self) -> None:
        if self.created:
            self.created = False
            _run("pg_dropcluster", "--stop", PG_VERSION, self.name, timeout=60)


def child_env(folder: Path, url: str, lease: float) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT / "src"), str(BENCH), env.get("PYTHONPATH")) if p
    )
    env.update(TICKQ_CHAOS_URL=url, TICKQ_CHAOS_DIR=str(folder), TICKQ_CHAOS_LEASE=str(lease))
    if url.startswith("sqlite:"):  # Postgres's own clock decides there: nothing to step
        (folder / "clocks").mkdir(exist_ok=True)
        env["TICKQ_CHAOS_CLOCKS"] = str(folder / "clocks")
    for name in ("TICKQ_DATABASE_URL", "TICKQ_APP", "TICKQ_ALERT_WEBHOOK_URL",
                 "TICKQ_ALERT_EMAIL_TO", "TICKQ_HEARTBEAT_URL"):  # fmt: skip
        env.pop(name, None)
    return env


class Fleet:
    """Workers, ticks and the enqueuer as real processes; killed ones are restarted."""

    def __init__(self, folder: Path, url: str, lease: float, workers: int, total: int,
                 seconds: float) -> None:  # fmt: skip
        self.folder, self.url, self.env = folder, url, child_env(folder, url, lease)
        self.lease = lease
        self.wanted_workers, self.total, self.seconds = workers, total, seconds
        self.lock = threading.RLock()
        self.workers: list[subprocess.Popen[bytes]] = []
        self.ticks: list[tuple[subprocess.Popen[bytes], float]] = []
        self.enqueuer: subprocess.Popen[bytes] | None = None
        self.enqueued = False
        self.everyone: list[subprocess.Popen[bytes]] = []
        self.roles: dict[int, str] = {}
        self.killed: dict[int, float] = {}
        self.deployed: dict[int, float] = {}  # pid -> when it got SIGTERM (a deploy)
        self.tick_exits: dict[int, tuple[int, float, float]] = {}
        """pid -> (exit code, started, seen ended) of every tick that exited"""
        self.spawns = {"worker": 0, "tick": 0, "enqueuer": 0}
        atexit.register(self.kill_all)

    def _spawn(self, role: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = (self.folder / f"{role}s.log").open("ab")
        proc = subprocess.Popen([sys.executable, *args], cwd=BENCH, env=self.env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log)  # fmt: skip
        log.close()
        self.everyone.append(proc)
        self.roles[proc.pid] = role
        self.spawns[role] += 1
        return proc

    def start_worker(self) -> subprocess.Popen[bytes]:
        with self.lock:
            args = ["-m", "tickq", "worker", "chaos_app:q", "--grace", "5"]
            proc = self._spawn("worker", [*args, "--concurrency", str(CONCURRENCY)])
            self.workers.append(proc)
            return proc

    def start_tick(self) -> None:
        with self.lock:
            proc = self._spawn("tick", ["-m", "tickq", "tick", "chaos_app:q", "--limit", "40",
                                        "--time-budget", "3"])  # fmt: skip
            self.ticks.append((proc, time.time()))

    def start_enqueuer(self) -> None:
        with self.lock:
            self.enqueuer = self._spawn(
                "enqueuer", ["chaos_app.py", "enqueue", str(self.total), str(self.seconds)]
            )

    def half_batch(self) -> str:
        """After the enqueuer died: '' if its batch in flight is stored whole or not at all."""
        first = resume_point(self.folder / "enqueue.log")
        keys = [f"chaos-{i}" for i in range(first, min(first + BATCH, self.total))]
        count = stored(self.url, keys) if keys else 0
        return "" if count in (0, len(keys)) else f"n={first}..: {count} of {len(keys)} stored"

    def deploy(self, proc: subprocess.Popen[bytes]) -> float:
        """SIGTERM, as a deploy does: the worker drains for its grace (5 s), puts back what
        still runs (a ``released`` row each) and exits; ``pump`` then starts a new one."""
        with self.lock:
            at = time.time()
            proc.send_signal(signal.SIGTERM)
            self.deployed[proc.pid] = at
            self.workers.remove(proc)  # draining: its replacement starts at once
            self.start_worker()
            return at

    def kill(self, proc: subprocess.Popen[bytes]) -> float:
        """``kill -9`` one of ours; returns when it happened."""
        with self.lock:
            at = time.time()
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                self.killed[proc.pid] = at
            proc.wait(10)
            return at

    def pump(self, tick_every: float, max_ticks: int = 2) -> None:
        """Reap and restart: workers back to strength, the enqueuer until done, ticks paced."""
        with self.lock:
            for proc in [p for p in self.workers if p.poll() is not None]:
                self.workers.remove(proc)
            while len(self.workers) < self.wanted_workers:
                self.start_worker()
            for proc, started in list(self.ticks):
                if proc.poll() is not None:
                    self.tick_exits[proc.pid] = (proc.returncode, started, time.time())
                    self.ticks.remove((proc, started))
            last = max((s for _, s in self.ticks), default=0.0)
            if tick_every and len(self.ticks) < max_ticks and time.time() - last >= tick_every:
                self.start_tick()
            if self.enqueuer is not None and self.enqueuer.poll() is not None:
                if self.enqueuer.returncode == 0:
                    self.enqueued, self.enqueuer = True, None
                else:
                    self.start_enqueuer()

    def pick_tick(self, min_age: float) -> subprocess.Popen[bytes] | None:
        with self.lock:
            now = time.time()
            ready = [p for p, s in self.ticks if p.poll() is None and now - s >= min_age]
            return ready[0] if ready else None

    def stop_workers(self, timeout: float) -> None:
        """SIGTERM the workers (a graceful drain) and wait; kill what doesn't stop."""
        with self.lock:
            for proc in self.workers:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + timeout
            for proc in self.workers:
                try:
                    proc.wait(max(deadline - time.monotonic(), 0.1))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)

    def kill_all(self) -> None:
        for proc in self.everyone:
            if proc.poll() is None:
                proc.kill()
        for proc in self.everyone:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
