"""The chaos suite: N jobs, 3 workers and concurrent ticks, while faults keep coming.

    python bench/chaos.py                       # Postgres (a cluster of its own), 5,000 jobs
    python bench/chaos.py --backend sqlite      # SQLite: writers killed mid-transaction
    python bench/chaos.py --jobs 500 --seconds 20 --json out.json

On Postgres it creates a throwaway cluster (``pg_createcluster`` on a free port; never
the shared server), and while an enqueuer stores the jobs at an even pace over
``--seconds`` it ``kill -9``s workers, ticks and the enqueuer, cuts every tickq
connection (``pg_terminate_backend``), restarts the cluster, stops it for 1.5 leases (an
outage longer than the lease) and deploys a worker (SIGTERM: its long jobs outlast the
grace), one fault every ``--fault-every`` seconds; killed processes are restarted at
once, as a supervisor would. On SQLite it kills whichever process holds the write lock
(mid-transaction) instead of the Postgres faults, steps the wall clocks of half the
workers and ticks forward and back by more than a lease (``chaos_app``'s clock files), and
checks ``PRAGMA integrity_check``
at the end. Then it lets the jobs drain, stops the workers, audits (``chaos_audit``) and
prints the figures. Exit 1 if a promise is broken. The cluster and every process are
cleaned up whatever happens."""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path[:0] = [
    str(Path(__file__).resolve().parent),
    str(Path(__file__).resolve().parents[1] / "src"),
]

from chaos_audit import Evidence, audit, read_enqueue_log, read_runs  # noqa: E402
from chaos_faults import PG_FAULTS, SQLITE_FAULTS, Injector  # noqa: E402
from chaos_fleet import Cluster, Fleet  # noqa: E402

from tickq import Queue  # noqa: E402


class Settings(argparse.Namespace):
    backend: str = "postgres"
    jobs: int = 5000
    seconds: float = 60.0
    fault_every: float = 3.0
    workers: int = 3
    lease: float = 10.0
    tick_every: float = 1.0
    drain_timeout: float = 120.0
    seed: int = 1
    json: str | None = None
    keep: bool = False


def run(settings: Settings) -> dict[str, Any]:
    """One chaos run; returns the audit's figures (``broken`` lists broken promises)."""
    folder = Path(tempfile.mkdtemp(prefix="tickq-chaos-"))
    cluster = Cluster() if settings.backend == "postgres" else None
    fleet: Fleet | None = None
    try:
        if cluster is not None:
            cluster.create()
        url = cluster.url if cluster is not None else f"sqlite:///{folder / 'chaos.db'}"
        Queue(url).migrate()
        fleet = Fleet(folder, url, settings.lease, settings.workers, settings.jobs,
                      settings.seconds)  # fmt: skip
        evidence = _chaos(settings, fleet, cluster, folder, url)
        return audit(evidence) | {"backend": settings.backend, "folder": str(folder)}
    finally:
        if fleet is not None:
            fleet.kill_all()
        if cluster is not None:
            cluster.drop()
        if not settings.keep:
            shutil.rmtree(folder, ignore_errors=True)


def _chaos(settings: Settings, fleet: Fleet, cluster: Cluster | None, folder: Path,
           url: str) -> Evidence:  # fmt: skip
    kinds = PG_FAULTS if cluster is not None else SQLITE_FAULTS
    injector = Injector(fleet, kinds, settings.fault_every, settings.seed, cluster,
                        None if cluster else folder / "chaos.db")  # fmt: skip
    watcher = Overdue(url, settings.lease, injector.faults, lambda: injector.in_progress)
    fleet.start_enqueuer()
    fleet.pump(settings.tick_every)
    injector.thread.start()
    watcher.thread.start()
    started = time.monotonic()
    try:
        limit = settings.seconds * 3 + 60
        # Faults go on until the last job is enqueued and each kind was injected once.
        while (not fleet.enqueued or injector.missing()) and time.monotonic() - started < limit:
            fleet.pump(settings.tick_every)
            time.sleep(0.05)
        injector.stop.set()
        injector.thread.join(60)
        _drain(settings, fleet, url)
        _wind_down(fleet)  # gracefully; on an error or a signal run() kills everything
    finally:
        injector.stop.set()
        watcher.stop.set()
        watcher.thread.join(10)
    if injector.errors:
        print("fault injector errors:", *injector.errors[:10], sep="\n  ", file=sys.stderr)
    return _evidence(settings, fleet, injector, watcher, folder, url)


def _drain(settings: Settings, fleet: Fleet, url: str) -> None:
    """Keep workers and ticks going, no more faults, until every job is done (or timeout)."""
    q = Queue(url)
    deadline = time.monotonic() + settings.drain_timeout
    try:
        while time.monotonic() < deadline:
            fleet.pump(settings.tick_every)
            try:
                if q.stats()["by_status"].get("done", 0) >= settings.jobs:
                    return
            except Exception:  # the database may still be coming back
                pass
            time.sleep(0.5)
    finally:
        q.close()


def _wind_down(fleet: Fleet) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with fleet.lock:
            ticks = [p for p, _ in fleet.ticks if p.poll() is None]
        if not ticks:
            break
        time.sleep(0.1)
    fleet.stop_workers(timeout=15)
    fleet.kill_all()


class Overdue:
    """Samples, once a second, jobs still ``running`` a full lease after it ran out. After
    the database (re)starts nobody rescues for a lease (the holders reconnect and renew
    first), so a lease that ran out before runs out a lease after the start."""

    def __init__(self, url: str, lease: float, faults: list[Any] | None = None,
                 in_progress: Callable[[], str | None] = lambda: None) -> None:  # fmt: skip
        self.url, self.lease, self.faults = url, lease, faults if faults is not None else []
        self.in_progress = in_progress
        self.ids: set[int] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="chaos-overdue", daemon=True)

    def _loop(self) -> None:
        q = Queue(self.url)
        try:
            while not self.stop.wait(1.0):
                if self._just_restarted():
                    continue  # leases run out a lease after the start: look a lease later
                try:
                    self.ids |= self._overdue(q)
                except Exception:  # the database is restarting: look again next time
                    continue
        finally:
            q.close()

    def _just_restarted(self) -> bool:
        if self.in_progress() in ("restart_db", "outage_db"):
            return True  # back, but its fault not recorded yet: a lease's grace starts now
        cutoff = datetime.now(UTC) - timedelta(seconds=2 * self.lease)
        started = [f.until for f in list(self.faults)
                   if f.kind in ("restart_db", "outage_db")]  # fmt: skip
        return bool(started) and datetime.fromtimestamp(max(started), UTC) > cutoff

    def _overdue(self, q: Queue) -> set[int]:
        if self.url.startswith("sqlite:"):
            return overdue_on_sqlite(self.url, self.lease)
        running = q.list_jobs(status="running", limit=10_000)
        cutoff = datetime.now(UTC) - timedelta(seconds=self.lease)
        return {j.id for j in running if _before(j.lease_expires_at, cutoff)}


def overdue_on_sqlite(url: str, lease: float) -> set[int]:
    """Running jobs a full lease past its end on the host's monotonic clock (SQLite's
    leases run out on it; the wall-clock expiry a process with a stepped clock wrote says
    little), or by the wall clock where a lease has no monotonic deadline."""
    import sqlite3

    cutoff = datetime.now(UTC) - timedelta(seconds=lease)
    with sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30) as conn:
        rows = conn.execute(
            "SELECT id FROM tickq_jobs WHERE status = 'running' AND CASE WHEN lease_mono "
            "IS NULL THEN lease_expires_at < ? ELSE lease_mono < ? END",
            (cutoff.isoformat(timespec="microseconds"), time.monotonic() - lease),
        ).fetchall()
    return {int(r[0]) for r in rows}


def _before(moment: datetime | None, cutoff: datetime) -> bool:
    return moment is not None and moment < cutoff


def _evidence(settings: Settings, fleet: Fleet, injector: Injector, watcher: Overdue,
              folder: Path, url: str) -> Evidence:  # fmt: skip
    q = Queue(url)
    try:
        jobs, before = {}, None
        while page := q.list_jobs(type="chaos", limit=1000, before_id=before):
            jobs.update({j.payload["n"]: j for j in page})
            before = page[-1].id
        runs = read_runs(folder)
        ran = Counter(r.job_id for r in runs)
        # Every job that ran more than once, or spent more than one attempt: its history
        # explains each extra run (lease_expired, or refunded: then attempts stays 1).
        attempts = {j.id: q.attempts(j.id) for j in jobs.values()
                    if j.attempts > 1 or ran[j.id] > 1}  # fmt: skip
        integrity = None
        if settings.backend == "sqlite":
            import sqlite3

            with sqlite3.connect(folder / "chaos.db") as conn:
                integrity = "; ".join(r[0] for r in conn.execute("PRAGMA integrity_check"))
    finally:
        q.close()
    return Evidence(
        total=settings.jobs, runs=runs, jobs=jobs, attempts=attempts,
        faults=injector.faults, killed=dict(fleet.killed), roles=dict(fleet.roles),
        deployed=dict(fleet.deployed),
        overdue=watcher.ids, enqueue_log=read_enqueue_log(folder), integrity=integrity,
        tick_exits=dict(fleet.tick_exits),
    )  # fmt: skip


def report(figures: dict[str, Any], settings: Settings, seconds: float) -> str:
    lines = [
        f"tickq chaos run: {figures['backend']}, {figures['jobs']} jobs, {settings.workers} "
        f"workers + ticks every {settings.tick_every:g}s, lease {settings.lease:g}s, one fault "
        f"every ~{settings.fault_every:g}s, {seconds:.0f}s in all",
        f"faults injected: {_counts(figures['faults'])}",
        f"runs logged: {figures['runs']}",
        "",
        f"jobs lost:                         {figures['jobs_lost']}  (must be 0)",
        f"jobs run twice:                    {figures['jobs_run_twice']}  "
        f"({figures['extra_runs']} extra runs, {figures['refunds_recorded']} of them refunded; "
        f"{figures['extra_runs_unexplained']} not explained by a recorded lease_expired or "
        f"refunded attempt of a killed process, must be 0; "
        f"{figures['extra_runs_after_finishing']} had finished before the kill)",
        f"finished during a long outage:     {figures['finished_during_outage']}  (their "
        f"outcomes waited for the database; {figures['finished_during_outage_run_again']} of "
        "them ran again, must be 0)",
        f"runs missing from the history:     {figures['runs_unrecorded']}  (must be 0; "
        f"{figures['releases_recorded']} runs cut short by a deploy recorded as released)",
        f"jobs left running past lease:      {figures['left_running_past_lease']}  (must be 0)",
        f"attempts burned, never started:    {figures['attempts_burned_never_started']}  "
        f"(must be 0; {figures['attempts_burned_in_claim_window']} of them killed within "
        "1 s of the claim)",
        f"enqueue calls that failed:         {figures['enqueue_errors']}  (retried; "
        "unique keys keep them single)",
        f"ticks that exited with an error:   {figures['ticks_failed']}  (not killed)",
        f"calls failed with no fault during: {figures['calls_failed_outside_faults']}  "
        "(enqueues and ticks; must be 0)",
    ]
    lines.append(
        f"batches stored in part:            {figures['half_stored_batches']}  (of "
        f"{figures['enqueuer_kills_checked']} enqueuer kills; must be 0)"
    )
    if figures["integrity_check"] is not None:
        lines.append(f"PRAGMA integrity_check:            {figures['integrity_check']}")
    lines += [
        "",
        "time to resume after each fault, from its end (seconds, p50 / max over faults);",
        "'outage' is how long each restart of the database took:",
    ]
    for who, table in figures["resume_seconds"].items():
        for kind, s in table.items():
            lines.append(f"  {who:8} after {kind:14} {_stat(s)}")
    for kind, s in figures["rerun_after_kill_seconds"].items():
        lines.append(f"  jobs cut by {kind:14} ran again after {_stat(s)}")
    for name, examples in figures["examples"].items():
        if examples:
            lines.append(f"examples, {name}: " + "; ".join(map(str, examples[:5])))
    verdict = "; ".join(figures["broken"]) if figures["broken"] else "every promise held"
    lines += ["", f"RESULT: {'BROKEN: ' if figures['broken'] else ''}{verdict}"]
    return "\n".join(lines)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())) or "none"


def _stat(s: dict[str, Any]) -> str:
    return f"{s['p50']:.2f} / {s['max']:.2f}  (n={s['count']})" if s["count"] else "n/a"


def parse(argv: list[str] | None = None) -> Settings:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", choices=("postgres", "sqlite"), default="postgres")
    p.add_argument("--jobs", type=int, default=5000, help="jobs to run (5000)")
    p.add_argument("--seconds", type=float, default=60.0, help="enqueue over this long (60)")
    p.add_argument("--fault-every", type=float, default=3.0, help="seconds between faults (3)")
    p.add_argument("--workers", type=int, default=3, help="worker processes (3)")
    p.add_argument("--lease", type=float, default=10.0, help="lease_seconds (10)")
    p.add_argument("--tick-every", type=float, default=1.0, help="start a tick this often (1)")
    p.add_argument("--drain-timeout", type=float, default=120.0, help="seconds (120)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", help="also write the figures to this file")
    p.add_argument("--keep", action="store_true", help="keep the run's logs folder")
    settings = p.parse_args(argv, namespace=Settings())
    if settings.jobs < 1 or settings.workers < 1:
        p.error(f"--jobs and --workers must be >= 1, got {settings.jobs}, {settings.workers}")
    if settings.lease < 3:
        p.error(f"--lease must be >= 3 seconds, got {settings.lease}")
    return settings


def main(argv: list[str] | None = None) -> int:
    settings = parse(argv)
    # SIGTERM unwinds like Ctrl-C, so the cluster is dropped and the children are killed.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    started = time.monotonic()
    figures = run(settings)
    print(report(figures, settings, time.monotonic() - started))
    if settings.json:
        Path(settings.json).write_text(json.dumps(figures, indent=2, default=str))
    return 1 if figures["broken"] else 0


if __name__ == "__main__":
    sys.exit(main())
