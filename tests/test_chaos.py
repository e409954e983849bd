"""The chaos suite, CI-sized: the same code as ``python bench/chaos.py``, fewer jobs.

Real worker, tick and enqueuer processes are ``kill -9``ed; on Postgres their connections
are cut and a cluster of the test's own (never the shared server) is restarted; on SQLite
writers are killed while they hold the write lock. The promises: no job lost, no job run
twice except after a recorded lease_expired (or refunded) attempt of a killed process, none
left running past its lease, no attempt burned on a job that never started, an intact
SQLite file.
"""

from __future__ import annotations

import os
import sys

import pytest

from conftest import ROOT
from pgcluster import _missing as cluster_tools_missing

sys.path.insert(0, str(ROOT / "bench"))

import chaos
from chaos_faults import PG_FAULTS, SQLITE_FAULTS


def run_chaos(*args: str) -> dict[str, object]:
    settings = chaos.parse(["--jobs", "300", "--seconds", "12", "--fault-every", "1.2", *args])
    figures = chaos.run(settings)
    text = chaos.report(figures, settings, 0)
    assert figures["broken"] == [], text
    # Every claim stays unconfirmed until a later round trip records its start: a kill
    # between the claim's commit and the job's start refunds the attempt (recorded).
    assert figures["attempts_burned_never_started"] == 0, text
    assert figures["jobs_lost"] == 0, text
    assert int(str(figures["runs"])) >= 300, text
    figures["report"] = text  # for the messages below
    return figures


def injected(figures: dict[str, object]) -> set[str]:
    return {kind.split("(")[0] for kind in figures["faults"]}  # type: ignore[attr-defined]


@pytest.mark.timeout(240)
def test_postgres_keeps_its_promises_under_kills_cuts_and_restarts() -> None:
    message = cluster_tools_missing()
    if message:
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI=true: a missing tool is a failure, not a skip)")
        pytest.skip(message)

    figures = run_chaos("--backend", "postgres", "--lease", "10")

    assert injected(figures) == set(PG_FAULTS), figures["report"]


@pytest.mark.timeout(240)
def test_sqlite_keeps_its_promises_when_writers_die_mid_transaction() -> None:
    figures = run_chaos("--backend", "sqlite", "--lease", "5")

    assert figures["integrity_check"] == "ok"
    assert injected(figures) == set(SQLITE_FAULTS), figures["report"]
