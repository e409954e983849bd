"""The chaos suite's audit: the runs each job logged, against what tickq recorded.

Promises checked (each broken one is listed with the jobs that break it):
- no job lost: every job the enqueuer stored ends ``done`` with a finished run;
- never twice, except after a kill: every run but a job's last is an attempt whose process
  the injector killed, and that tickq recorded as ``lease_expired`` or ``refunded`` (a
  claimed job whose start was not yet confirmed: the same attempt number runs again, once
  per job at most, and the history holds a ``refunded`` row for it), or a run cut short by
  a deploy (SIGTERM, grace run out) recorded as ``released``; no rerun after an outage,
  however long, since nobody crashed;
- every run on record: each run the log shows has its row in the job's history;
- no job left ``running`` long past its lease;
- no attempt burned on a job that never started: every ``lease_expired`` attempt ran;
- an enqueuer killed mid-``enqueue_many`` stored the whole batch or none of it;
- on SQLite, ``PRAGMA integrity_check`` says ok.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from statistics import median
from typing import Any

from chaos_faults import Fault
from chaos_fleet import CONCURRENCY

OWNER = re.compile(r"claimed by [^ ]*?:(\d+):[0-9a-f]+ ")


@dataclass
class Run:
    n: int
    job_id: int
    attempt: int
    pid: int
    start: float
    end: float | None = None


@dataclass
class Evidence:
    """What the suite gathered: run logs, the database's view, the faults and kills."""

    total: int
    runs: list[Run]
    jobs: dict[int, Any]  # n -> tickq Job
    attempts: dict[int, list[Any]]  # job id -> tickq Attempts
    faults: list[Fault]
    killed: dict[int, float]
    roles: dict[int, str]
    deployed: dict[int, float] = field(default_factory=dict)
    """pid -> when the injector sent it SIGTERM (a deploy, not a crash)"""
    overdue: set[int] = field(default_factory=set)
    enqueue_log: list[tuple[str, float, float, str]] = field(default_factory=list)
    """(ok|err, call start, call end, text) per enqueue batch"""
    integrity: str | None = None
    tick_exits: dict[int, tuple[int, float, float]] = field(default_factory=dict)


def read_runs(folder: Path) -> list[Run]:
    """Pair each ``S`` line with its ``E`` line (same job, attempt and pid)."""
    runs: dict[tuple[int, int, int], list[Run]] = defaultdict(list)
    path = folder / "runs.log"
    for line in path.read_text().splitlines() if path.exists() else []:
        parts = line.split()
        if len(parts) != 6:
            continue  # a process killed mid-write leaves at most a torn last line
        kind, n, job_id, attempt, pid = parts[0], *map(int, parts[1:5])
        key = (job_id, attempt, pid)
        if kind == "S":
            runs[key].append(Run(n, job_id, attempt, pid, float(parts[5])))
        elif kind == "E" and runs[key]:
            runs[key][-1].end = float(parts[5])
    return sorted((r for rs in runs.values() for r in rs), key=lambda r: r.start)


def read_enqueue_log(folder: Path) -> list[tuple[str, float, float, str]]:
    path = folder / "enqueue.log"
    lines = []
    for line in path.read_text().splitlines() if path.exists() else []:
        parts = line.split(" ", 3)
        if len(parts) == 3 and parts[0] == "ok":
            lines.append(("ok", float(parts[1]), float(parts[1]), parts[2]))
        elif len(parts) == 4 and parts[0] == "err":
            lines.append(("err", float(parts[1]), float(parts[2]), parts[3]))
    return lines


def audit(ev: Evidence) -> dict[str, Any]:
    """Every figure the suite prints, and ``broken``: the promises that did not hold."""
    by_job: dict[int, list[Run]] = defaultdict(list)
    for run in ev.runs:
        by_job[run.n].append(run)
    lost = sorted(n for n in range(ev.total) if not _finished(ev, n, by_job.get(n, [])))
    extra, unexplained, repeated_finished = _extra_runs(ev, by_job)
    burned = _burned(ev)
    running = sorted(j.id for j in ev.jobs.values() if str(j.status.value) == "running")
    figures: dict[str, Any] = {
        "jobs": ev.total,
        "runs": len(ev.runs),
        "jobs_lost": len(lost),
        "jobs_run_twice": sum(1 for runs in by_job.values() if len(runs) > 1),
        "extra_runs": len(extra),
        "extra_runs_unexplained": len(unexplained),
        "refunds_recorded": sum(
            1 for history in ev.attempts.values() for a in history if a.outcome == "refunded"
        ),
        "extra_runs_after_finishing": len(repeated_finished),
        "releases_recorded": sum(
            1 for history in ev.attempts.values() for a in history if a.outcome == "released"
        ),
        "runs_unrecorded": len(unrecorded := _unrecorded(ev, by_job)),
        **_held_through_outages(ev, by_job),
        "left_running_past_lease": len(ev.overdue | set(running)),
        "attempts_burned_never_started": len(burned),
        "attempts_burned_in_claim_window": sum(1 for _, in_window in burned if in_window),
        "faults": _fault_counts(ev.faults),
        "resume_seconds": _resume(ev),
        "rerun_after_kill_seconds": _rerun(ev, by_job),
        "enqueue_errors": sum(1 for line in ev.enqueue_log if line[0] == "err"),
        "integrity_check": ev.integrity,
        "enqueuer_kills_checked": sum(1 for f in ev.faults if f.role == "enqueuer"),
        "half_stored_batches": len(halves := [f.half for f in ev.faults if f.half]),
        "ticks_failed": sum(1 for pid, t in ev.tick_exits.items() if t[0] and pid not in ev.killed),
        "calls_failed_outside_faults": len(outside := _failed_outside_faults(ev)),
        "fault_log": _fault_log(ev.faults),
        "examples": {
            "lost": lost[:10],
            "unexplained": unexplained[:10],
            "unrecorded": unrecorded[:10],
            "burned": [text for text, _ in burned[:10]],
            "failed_outside_faults": outside[:10],
            "half_stored": halves[:10],
            "left_running": sorted(ev.overdue | set(running))[:10],
        },
    }
    figures["broken"] = _broken(figures)
    return figures


def _fault_log(faults: list[Fault]) -> list[dict[str, Any]]:
    return [{"kind": f.kind, "at": round(f.at, 3), "until": round(f.until, 3),
             "victim": f.victim, "role": f.role} for f in faults]  # fmt: skip


def _finished(ev: Evidence, n: int, runs: list[Run]) -> bool:
    job = ev.jobs.get(n)
    return job is not None and job.status.value == "done" and any(r.end for r in runs)


def _extra_runs(
    ev: Evidence, by_job: dict[int, list[Run]]
) -> tuple[list[Run], list[str], list[Run]]:
    """Runs other than each job's last; the unexplained ones with the reason why."""
    extra, unexplained, finished = [], [], []
    for n, runs in by_job.items():
        runs = sorted(runs, key=lambda r: (r.attempt, r.start))
        history = ev.attempts.get(runs[0].job_id, [])
        expired = {a.attempt for a in history if a.outcome == "lease_expired"}
        refunds = {a.attempt for a in history if a.outcome == "refunded"}
        releases = {a.attempt for a in history if a.outcome == "released"}
        released = sum(1 for a in history if a.outcome == "released")
        repeats = len(runs) - len({r.attempt for r in runs})
        if repeats > 1 + released:
            unexplained.append(f"job n={n} id={runs[0].job_id}: {repeats} runs repeated an "
                               "attempt (a refund happens once per job at most; "
                               f"{released} released at a deploy)")  # fmt: skip
        for run, following in pairwise(runs):
            extra.append(run)
            if run.end is not None:
                finished.append(run)
            # The same attempt again: refunded (its start not yet confirmed), recorded as
            # such, unless that attempt's one lease_expired row can only be this run's.
            same = following.attempt == run.attempt
            if same and run.attempt in releases and run.pid in ev.deployed and run.end is None:
                why = ""  # cut short by a deploy, recorded as released
            elif same and run.attempt in expired and following is runs[-1]:
                why = "the same attempt ran twice"
            elif same and run.attempt not in refunds:
                why = "the same attempt ran again with no refund recorded"
            else:
                why = _why_unexplained(ev, run, expired, same)
            if why:
                unexplained.append(f"job n={n} id={run.job_id} attempt {run.attempt} "
                                   f"(pid {run.pid}): {why}; {_context(ev, run)}")  # fmt: skip
    return extra, unexplained, finished


def _held_through_outages(ev: Evidence, by_job: dict[int, list[Run]]) -> dict[str, int]:
    """Runs that finished while the database was stopped for longer than the lease (their
    outcome had to wait for it), and how many of those jobs ran again (must be none)."""
    windows = [(f.at, f.until) for f in ev.faults if f.kind == "outage_db"]
    held = [r for r in ev.runs
            if r.end is not None and any(a <= r.end <= b for a, b in windows)]  # fmt: skip
    again = [r for r in held if any(x.start > r.start for x in by_job[r.n])]
    return {"finished_during_outage": len(held), "finished_during_outage_run_again": len(again)}


def _unrecorded(ev: Evidence, by_job: dict[int, list[Run]]) -> list[str]:
    """Runs with no row in their job's history: per attempt number, more runs in the log
    than history rows of that number (``released``, ``refunded``, ``lease_expired``, an
    error, or the job row itself for the last one)."""
    missing = []
    for n, runs in by_job.items():
        job = ev.jobs.get(n)
        history = ev.attempts.get(job.id) if job is not None else None
        if history is None:
            continue  # ran once, one attempt: the job row is its record
        rows: dict[int, int] = defaultdict(int)
        for a in history:
            rows[a.attempt] += 1
        ran: dict[int, int] = defaultdict(int)
        for r in runs:
            ran[r.attempt] += 1
        for attempt, count in sorted(ran.items()):
            if count > rows[attempt]:
                missing.append(f"job n={n} id={runs[0].job_id} attempt {attempt}: ran "
                               f"{count} time(s), {rows[attempt]} history row(s)")  # fmt: skip
    return missing


def _why_unexplained(ev: Evidence, run: Run, expired: set[int], refunded: bool) -> str:
    if run.attempt not in expired and not refunded:
        return "no lease_expired attempt recorded for it"
    killed = ev.killed.get(run.pid)
    if killed is None:
        role = ev.roles.get(run.pid, "?")
        return f"its {role} was never killed, yet the lease expired and it ran again"
    return ""


def _context(ev: Evidence, run: Run) -> str:
    """When the run happened, how it ended, and the faults around it (for a bug report)."""
    ended = f"finished at {run.end:.3f}" if run.end is not None else "never finished"
    near = [f"{f.kind} at {f.at:.3f}" for f in ev.faults if run.start - 5 <= f.at <= run.start + 15]
    return f"started at {run.start:.3f}, {ended}; faults near: {', '.join(near) or 'none'}"


CLAIM_WINDOW = 1.0
"""A burned attempt whose process was killed this soon after claiming it fell in the claim's
own round trip (claimed, killed before the job could start): a known, documented window."""


def _burned(ev: Evidence) -> list[tuple[str, bool]]:
    """``lease_expired`` attempts with no run logged for them; True: in the claim window."""
    started = {(r.job_id, r.attempt) for r in ev.runs}
    burned = []
    for job_id, attempts in ev.attempts.items():
        for a in attempts:
            if a.outcome == "lease_expired" and (job_id, a.attempt) not in started:
                match = OWNER.search(a.error or "")
                owner = int(match[1]) if match else 0
                killed, claimed = ev.killed.get(owner), a.started_at
                after = killed - claimed.timestamp() if killed and claimed else None
                when = f", killed {after:.3f}s after claiming it" if after is not None else ""
                burned.append((f"job id={job_id} attempt {a.attempt} claimed by "
                               f"{ev.roles.get(owner, '?')} pid {owner}{when}",
                               after is not None and 0 <= after <= CLAIM_WINDOW))  # fmt: skip
    return sorted(burned)


SLACK = {"terminate": 0.5, "restart_db": 0.2, "outage_db": 0.2}
"""After pg_terminate_backend returns, the backends take a moment to go."""


def _failed_outside_faults(ev: Evidence) -> list[str]:
    """Enqueue calls and ticks that failed although no fault happened while they ran (the
    first call after a restart must succeed)."""
    calls = [(start, end, f"enqueue at {start:.3f}: {text}")
             for kind, start, end, text in ev.enqueue_log if kind == "err"]  # fmt: skip
    calls += [(start, end, f"tick pid {pid} exited {rc}")
              for pid, (rc, start, end) in ev.tick_exits.items()
              if rc and pid not in ev.killed]  # fmt: skip
    windows = [(f.at, f.until + SLACK.get(f.kind, 0.0)) for f in ev.faults]
    return sorted(what for start, end, what in calls
                  if not any(start <= b and a <= end for a, b in windows))  # fmt: skip


def _fault_counts(faults: list[Fault]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for f in faults:
        counts[f.kind + (f"({f.role})" if f.kind == "kill_writer" else "")] += 1
    return dict(counts)


def _stats(samples: list[float]) -> dict[str, Any]:
    if not samples:
        return {"count": 0}
    return {"count": len(samples), "p50": round(median(samples), 3),
            "max": round(max(samples), 3)}  # fmt: skip


def _free_slot(ev: Evidence, pid: int, moment: float) -> bool:
    """Whether worker ``pid`` had a free slot at ``moment`` (busy ones can't resume)."""
    dies = ev.killed.get(pid, float("inf"))
    busy = sum(1 for r in ev.runs if r.pid == pid and r.start <= moment
               and (r.end if r.end is not None else dies) > moment)  # fmt: skip
    return busy < CONCURRENCY


def _resume(ev: Evidence) -> dict[str, Any]:
    """Per fault kind: from the fault's end until every affected worker with a free slot
    started a job again (the slowest one), and until the enqueuer stored a batch again."""
    starts: dict[int, list[float]] = defaultdict(list)
    for run in ev.runs:
        starts[run.pid].append(run.start)
    ok_times = [line[1] for line in ev.enqueue_log if line[0] == "ok"]
    workers: dict[str, list[float]] = defaultdict(list)
    enqueue: dict[str, list[float]] = defaultdict(list)
    for f in ev.faults:
        ready = [pid for pid in f.affected if _free_slot(ev, pid, f.until)]
        waits = [min(t for t in starts[pid] if t >= f.until) - f.until
                 for pid in ready if any(t >= f.until for t in starts[pid])]  # fmt: skip
        if waits:
            workers[f.kind].append(max(waits))
        after = [t for t in ok_times if t >= f.until]
        if after and f.kind in ("restart_db", "outage_db", "terminate", "kill_enqueuer",
                                "kill_writer"):  # fmt: skip
            enqueue[f.kind].append(after[0] - f.until)
    outage: dict[str, list[float]] = defaultdict(list)
    for f in ev.faults:
        if f.kind in ("restart_db", "outage_db"):
            outage[f.kind].append(f.until - f.at)
    return {
        "outage": {k: _stats(v) for k, v in sorted(outage.items())},
        "workers": {k: _stats(v) for k, v in sorted(workers.items())},
        "enqueue": {k: _stats(v) for k, v in sorted(enqueue.items())},
    }


def _rerun(ev: Evidence, by_job: dict[int, list[Run]]) -> dict[str, Any]:
    """Per kill: until every job the victim had started and not finished ran again."""
    waits: dict[str, list[float]] = defaultdict(list)
    for f in ev.faults:
        if f.victim is None or f.role not in ("worker", "tick"):
            continue
        cut = [r for r in ev.runs if r.pid == f.victim and r.end is None]
        later = []
        for r in cut:
            again = [x.start for x in by_job[r.n] if x.start > f.at]
            if again:  # a job never run again is counted as lost
                later.append(min(again) - f.at)
        if later:
            waits[f"{f.kind}({f.role})" if f.kind == "kill_writer" else f.kind].append(max(later))
    return {k: _stats(v) for k, v in sorted(waits.items())}


def _broken(figures: dict[str, Any]) -> list[str]:
    broken = []
    if figures["jobs_lost"]:
        broken.append(f"{figures['jobs_lost']} job(s) lost")
    if figures["extra_runs_unexplained"]:
        broken.append(f"{figures['extra_runs_unexplained']} extra run(s) not explained by a "
                      "recorded lease_expired or refunded attempt of a killed process")  # fmt: skip
    if figures["finished_during_outage_run_again"]:
        broken.append(f"{figures['finished_during_outage_run_again']} job(s) that finished "
                      "during an outage ran again")  # fmt: skip
    if figures["runs_unrecorded"]:
        broken.append(f"{figures['runs_unrecorded']} run(s) missing from their job's history")
    if figures["left_running_past_lease"]:
        broken.append(f"{figures['left_running_past_lease']} job(s) left running past their "
                      "lease")  # fmt: skip
    if figures["attempts_burned_never_started"]:
        broken.append(f"{figures['attempts_burned_never_started']} attempt(s) burned on jobs "
                      "that never started")  # fmt: skip
    if figures["calls_failed_outside_faults"]:
        broken.append(f"{figures['calls_failed_outside_faults']} enqueue call(s) or tick(s) "
                      "failed with no fault while they ran")  # fmt: skip
    if figures["half_stored_batches"]:
        broken.append(f"{figures['half_stored_batches']} enqueue_many batch(es) stored in part")
    if figures["integrity_check"] not in (None, "ok"):
        broken.append(f"SQLite integrity_check: {figures['integrity_check']}")
    return broken
