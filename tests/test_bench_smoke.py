"""The benchmark script works: a quick SQLite-only run exits 0 and prints its table.

A smoke check only: speed is measured by bench/run.py, never asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, tickq_env

BENCH = ROOT / "bench" / "run.py"


def run_bench(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=tickq_env(),
        cwd=str(ROOT),
    )


@pytest.mark.timeout(300)
def test_quick_sqlite_run_prints_the_table_and_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = run_bench("--quick", "--sqlite-only", "--json", str(out), timeout=280)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "| Figure | Backend | tickq: median (min-max) |" in done.stdout
    data = json.loads(out.read_text())
    figures = {f["key"]: f for f in data["figures"]}
    for key in ("enqueue_one", "enqueue_many", "process_default", "process_best", "tick_empty"):
        assert figures[key]["status"] == "ok", figures[key]
        assert len(figures[key]["tickq"]["runs"]) >= 3
        assert len(figures[key]["floor"]["runs"]) >= 3
    assert {f["backend"] for f in data["figures"]} == {"sqlite"}
    assert not [f for f in data["figures"] if f["status"] == "failed"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--runs", "2"], "--runs must be at least 3"),
        (["--only", "enqueue,speed"], "unknown section(s) ['speed']"),
        (["--grid", "2y4", "--sqlite-only", "--only", "processing"], "'2y4' must look like"),
    ],
)
def test_bad_arguments_get_a_one_line_error(args: list[str], message: str) -> None:
    done = run_bench(*args, timeout=60)

    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.timeout(90)
def test_the_horizon_bench_runs_on_postgres_with_a_short_holder() -> None:
    from conftest import PG_URL, require_postgres

    require_postgres()
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "horizon.py"), "--holder", "4", "--rate", "40",
         "--no-scans", "--postgres-url", PG_URL],
        capture_output=True, text=True, timeout=80, env=tickq_env(), cwd=str(ROOT),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = {line.split(":", 1)[0].strip(): line for line in done.stdout.splitlines()}
    assert "jobs/s" in lines["baseline"] and "empty tick p50" in lines["baseline"]
    assert "recovery" in lines["holder"] and "warnings" in lines["holder"]


SCALE_SECTIONS = {
    "sqlite": {"hot", "reads", "due", "drain", "latency", "bloat"},
    "postgres": {"hot", "reads", "due", "drain", "latency", "wal", "bloat"},
}


@pytest.mark.timeout(120)
def test_the_scale_bench_prints_every_section_on_both_backends() -> None:
    from conftest import PG_URL, require_postgres

    require_postgres()
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "scale.py"), "--quick", "--postgres-url", PG_URL],
        capture_output=True, text=True, timeout=100, env=tickq_env(), cwd=str(ROOT),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    figures: dict[str, set[str]] = {"sqlite": set(), "postgres": set()}
    conditions = {line.split(":")[0] for line in done.stdout.splitlines() if line.startswith("## ")}
    for line in done.stdout.splitlines():
        if line.startswith("| "):
            section, backend, _, value, unit = (c.strip() for c in line.strip("| ").split("|"))
            assert float(value.replace(",", "")) > 0, line
            assert unit, line
            figures[backend].add(section)
    assert figures == SCALE_SECTIONS, done.stdout
    assert conditions == {f"## {s} on {b}" for b, ss in SCALE_SECTIONS.items() for s in ss}
    assert "load average" in done.stdout and "autovacuum=" in done.stdout
    assert "counts every due row: " in done.stdout
