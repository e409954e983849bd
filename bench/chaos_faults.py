"""The fault injector: kill -9 workers, ticks, the enqueuer and SQLite writers mid-transaction,
cut connections with ``pg_terminate_backend``, restart the suite's own Postgres cluster or
stop it for longer than the lease, deploy (SIGTERM) a worker whose long jobs outlast its
grace, and on SQLite step processes' wall clocks forward and back by more than a lease."""

from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from chaos_app import CLOCK_FILES
from chaos_fleet import Cluster, Fleet

PG_FAULTS = ("kill_worker", "kill_enqueuer", "kill_tick", "terminate", "restart_db",
             "outage_db", "deploy_worker")  # fmt: skip
SQLITE_FAULTS = (
    "kill_enqueuer",
    "kill_tick",
    "kill_writer",
    "kill_worker",
    "deploy_worker",
    "step_clock",
)
OUTAGE_LEASES = 1.5
"""``outage_db`` keeps the database stopped this many leases: every lease held meanwhile runs
out, and no finished job may run again for it (nobody crashed)."""
WAL_WRITE_LOCK = 120
"""The byte of ``<db>-shm`` a SQLite WAL writer locks for its whole write transaction."""


@dataclass
class Fault:
    kind: str
    at: float
    until: float
    victim: int | None = None
    role: str = ""
    affected: list[int] = field(default_factory=list)
    """Worker pids expected to run jobs again once the fault is over."""
    half: str = ""
    """For a killed enqueuer: its batch in flight if stored only in part."""


class Injector:
    """Injects one fault every ``every`` seconds (jittered), rotating through ``kinds``."""

    def __init__(self, fleet: Fleet, kinds: tuple[str, ...], every: float, seed: int,
                 cluster: Cluster | None = None, db_file: Path | None = None) -> None:  # fmt: skip
        self.fleet, self.kinds, self.every = fleet, kinds, every
        self.cluster, self.db_file = cluster, db_file
        self.random = random.Random(seed)
        self.faults: list[Fault] = []
        self.errors: list[str] = []
        self.in_progress: str | None = None
        """The kind of the fault being injected, until it is in ``faults`` (a database
        stopped or restarting is back a moment before its fault is recorded)."""
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="chaos-injector", daemon=True)

    def _loop(self) -> None:
        i = 0
        while not self.stop.wait(self.every * self.random.uniform(0.6, 1.4)):
            kind = self.kinds[i % len(self.kinds)]
            self.in_progress = kind
            try:
                fault = getattr(self, kind)()
            except Exception as exc:  # recorded and reported; the run goes on
                self.errors.append(f"{kind}: {type(exc).__name__}: {exc}")
                fault = None
            if fault is not None:
                self.faults.append(fault)
            self.in_progress = None
            # On to the next kind even when no victim was ready for this one: it comes round
            # again (a kind stuck without victims, e.g. ticks too short-lived once the jobs
            # are done, must not keep the others from being injected).
            i += 1

    def missing(self) -> set[str]:
        """Fault kinds not injected yet (the enqueuer's, once it is done, is not due)."""
        done = {f.kind for f in self.faults}
        if self.fleet.enqueued:
            done.add("kill_enqueuer")
        return set(self.kinds) - done

    def _alive_workers(self) -> list[int]:
        with self.fleet.lock:
            return [p.pid for p in self.fleet.workers if p.poll() is None]

    def kill_worker(self) -> Fault | None:
        with self.fleet.lock:
            alive = [p for p in self.fleet.workers if p.poll() is None]
            if not alive:
                return None
            victim = self.random.choice(alive)
            at = self.fleet.kill(victim)
            self.fleet.pump(tick_every=0)  # a supervisor restarts it at once
            new = self.fleet.workers[-1]
            return Fault("kill_worker", at, time.time(), victim.pid, "worker", [new.pid])

    def kill_tick(self) -> Fault | None:
        # Young enough to catch a tick with little to do (workers claiming ahead leave ticks
        # few jobs: one may live under 0.2 s); a kill while it starts up is a kill all the same.
        min_age = self.random.uniform(0.05, 0.4)
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline and not self.stop.is_set():
            if time.monotonic() > deadline - 2:
                min_age = 0.0  # none lived that long: any tick alive will do
            proc = self.fleet.pick_tick(min_age)
            if proc is not None:
                at = self.fleet.kill(proc)
                return Fault("kill_tick", at, at, proc.pid, "tick")
            time.sleep(0.05)
        return None

    def kill_enqueuer(self) -> Fault | None:
        with self.fleet.lock:
            proc = self.fleet.enqueuer
            if proc is None or proc.poll() is not None:
                return None
            at = self.fleet.kill(proc)
            half = self.fleet.half_batch()
            self.fleet.pump(tick_every=0)
            return Fault("kill_enqueuer", at, time.time(), proc.pid, "enqueuer", half=half)

    def terminate(self) -> Fault:
        import psycopg

        assert self.cluster is not None
        at = time.time()
        with psycopg.connect(self.cluster.url, autocommit=True,
                             application_name="tickq-chaos") as conn:  # fmt: skip
            row = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = 'tickq' AND pid <> pg_backend_pid()"
            ).fetchone()
        fault = Fault("terminate", at, time.time(), affected=self._alive_workers())
        fault.role = f"{row[0] if row else 0} connections"
        return fault

    def outage_db(self) -> Fault:
        """Stop the cluster for longer than the lease, then start it again; at a moment
        when a job runs (up to 5 s of waiting for one), so that an outcome has to wait."""
        assert self.cluster is not None
        deadline = time.monotonic() + 5
        while not in_flight(self.fleet.folder / "runs.log") and time.monotonic() < deadline:
            time.sleep(0.002)
        at = time.time()
        self.cluster.stop_now()
        self.stop.wait(float(self.fleet.env["TICKQ_CHAOS_LEASE"]) * OUTAGE_LEASES)
        self.cluster.start()
        return Fault("outage_db", at, time.time(), affected=self._alive_workers())

    def deploy_worker(self) -> Fault | None:
        """SIGTERM a worker that is running a long job (one in 200 outlasts the 5 s grace,
        so its run is cut short and released, with a ``released`` history row)."""
        with self.fleet.lock:
            alive = [p for p in self.fleet.workers if p.poll() is None]
            if not alive:
                return None
            victim = self.random.choice(alive)
            at = self.fleet.deploy(victim)
            return Fault("deploy_worker", at, at, victim.pid, "worker")

    def restart_db(self) -> Fault:
        assert self.cluster is not None
        at = time.time()
        self.cluster.restart()
        return Fault("restart_db", at, time.time(), affected=self._alive_workers())

    def kill_writer(self) -> Fault | None:
        """``kill -9`` whichever of our processes holds SQLite's write lock right now."""
        assert self.db_file is not None
        shm = Path(f"{self.db_file}-shm")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not self.stop.is_set():
            with self.fleet.lock:
                holder = writer_pid(shm) if shm.exists() else None
                proc = next((p for p in self.fleet.everyone
                             if p.pid == holder and p.poll() is None), None)  # fmt: skip
                if proc is not None:
                    role = self.fleet.roles[proc.pid]
                    at = self.fleet.kill(proc)
                    half = self.fleet.half_batch() if role == "enqueuer" else ""
                    self.fleet.pump(tick_every=0)
                    affected = [self.fleet.workers[-1].pid] if role == "worker" else []
                    return Fault("kill_writer", at, time.time(), proc.pid, role, affected, half)
            time.sleep(0.002)
        return None

    def step_clock(self) -> Fault | None:
        """Step one of the two clocks the processes read (half of them each) by 1.5 to 3
        leases, back when it stands ahead, else forward: the two groups' clocks stand up
        to 6 leases apart, and jump while jobs run. No process crashes: every rerun it
        caused would be one the audit can't explain."""
        folder = self.fleet.env.get("TICKQ_CHAOS_CLOCKS")
        if folder is None:
            return None
        from tickq.testing import SharedClock

        name = self.random.choice(CLOCK_FILES)
        clock = SharedClock(Path(folder) / name)
        size = self.random.uniform(1.5, 3.0) * self.fleet.lease
        step = -size if clock.offset().total_seconds() > 0 else size
        at = time.time()
        clock.advance(seconds=step)
        return Fault("step_clock", at, at, role=f"{name} {step:+.1f}s")


def in_flight(runs_log: Path) -> bool:
    """Whether the last lines of the run log show a run started and not yet ended."""
    try:
        with runs_log.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            lines = f.read().decode(errors="replace").splitlines()[1:]
    except OSError:
        return False
    open_runs: set[tuple[str, ...]] = set()
    for line in lines:
        parts = tuple(line.split())
        if len(parts) == 6:
            key = parts[1:5]
            if parts[0] == "S":
                open_runs.add(key)
            else:
                open_runs.discard(key)
    return bool(open_runs)


def writer_pid(shm: Path) -> int | None:
    """The pid holding SQLite's WAL write lock on ``shm``, from ``/proc/locks``."""
    inode = os.stat(shm).st_ino
    with open("/proc/locks") as locks:
        for line in locks:
            parts = line.split()
            # 1: POSIX  ADVISORY  WRITE 1234 08:01:5678 120 120
            if (len(parts) >= 8 and parts[1] == "POSIX" and parts[3] == "WRITE"
                    and parts[5].rsplit(":", 1)[-1] == str(inode)
                    and parts[6] == str(WAL_WRITE_LOCK)):  # fmt: skip
                return int(parts[4])
    return None
