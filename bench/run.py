"""tickq's benchmark: every figure beside the raw-SQL floor measured in the same run.

    python bench/run.py                  # SQLite and Postgres, default size (< 5 minutes)
    python bench/run.py --quick          # smaller sizes (< 60 s)
    python bench/run.py --sqlite-only --json results.json

Postgres: --postgres-url, else $TICKQ_BENCH_POSTGRES_URL, else the local test database.
Each run gets its own schema, dropped at the end. Every figure is the median of at least
three runs with min-max; a run that loses or duplicates a job is reported as FAILED
(and the exit code is 1), never as a number. See docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))  # measure this checkout's tickq, not an installed one

import bench_app  # noqa: E402
import procs  # noqa: E402
from alerting import alert_figures, idle_figures  # noqa: E402
from controls import LimitedDrainer, controls_figures  # noqa: E402
from databases import DEFAULT_POSTGRES_URL, Database, PostgresDatabase, SQLiteDatabase  # noqa: E402
from enqueue import enqueue_figures  # noqa: E402
from figures import Figure  # noqa: E402
from latency import latency_figures  # noqa: E402
from processing import Config, Drainer, parse_grid, processing_figures  # noqa: E402
from quiet import quiet_figures  # noqa: E402
from report import table, write_json  # noqa: E402
from wakeup import has_tick, wakeup_figures  # noqa: E402
from workflows import workflow_figures  # noqa: E402

import tickq  # noqa: E402

SECTIONS = ("enqueue", "processing", "latency", "tick", "idle", "alerts", "controls", "workflows")


@dataclass(frozen=True)
class Sizes:
    enqueue_one: int = 2_000
    enqueue_many: int = 20_000
    jobs: int = 10_000
    one_at_a_time: int = 2_000
    grid: str = "1x1,1x8,2x1,2x8,4x8"
    latency_jobs: int = 200
    latency_gap: float = 0.020
    tick_samples: int = 20
    cold_runs: int = 5
    workflow_runs: int = 50


QUICK = Sizes(
    enqueue_one=300,
    enqueue_many=2_000,
    jobs=2_000,
    one_at_a_time=300,
    grid="1x1,2x8",
    latency_jobs=50,
    tick_samples=10,
    cold_runs=3,
    workflow_runs=10,
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/run.py", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes: under a minute")
    p.add_argument("--sqlite-only", action="store_true", help="skip Postgres")
    p.add_argument(
        "--postgres-url",
        default=os.environ.get("TICKQ_BENCH_POSTGRES_URL", DEFAULT_POSTGRES_URL),
        help="server to create the scratch schema in (default: $TICKQ_BENCH_POSTGRES_URL "
        f"or {DEFAULT_POSTGRES_URL})",
    )
    p.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON")
    p.add_argument("--runs", type=int, default=3, help="runs per figure (at least 3; default 3)")
    p.add_argument("--jobs", type=int, help="jobs per processing run (default 10,000; quick 2,000)")
    p.add_argument(
        "--grid",
        help="worker configurations to try for the best one, PROCESSESxCONCURRENCY,… "
        f"(default {Sizes.grid}; quick {QUICK.grid})",
    )
    p.add_argument(
        "--only", default=",".join(SECTIONS), help=f"sections to run, of {','.join(SECTIONS)}"
    )
    args = p.parse_args(argv)
    if args.runs < 3:
        p.error(
            f"--runs must be at least 3 (each figure is a median of >= 3 runs), got {args.runs}"
        )
    unknown = set(args.only.split(",")) - set(SECTIONS)
    if unknown:
        p.error(
            f"--only got unknown section(s) {sorted(unknown)}; choose from {','.join(SECTIONS)}"
        )
    if args.jobs is not None and args.jobs < 1:
        p.error(f"--jobs must be a positive number of jobs, got {args.jobs}")
    args.sizes = sizes_for(args)
    try:
        args.configs = parse_grid(args.sizes.grid)
    except ValueError as exc:
        p.error(str(exc))
    return args


def sizes_for(args: argparse.Namespace) -> Sizes:
    base = QUICK if args.quick else Sizes()
    return Sizes(
        **{
            **asdict(base),
            **({"jobs": args.jobs} if args.jobs else {}),
            **({"grid": args.grid} if args.grid else {}),
        }
    )


def open_databases(args: argparse.Namespace) -> list[Database]:
    dbs: list[Database] = [SQLiteDatabase()]
    if not args.sqlite_only:
        try:
            dbs.append(PostgresDatabase(args.postgres_url))
        except Exception as exc:
            dbs[0].drop()
            where = args.postgres_url.split("@")[-1]
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise SystemExit(
                f"run.py: PostgreSQL at {where} is not usable ({first}); "
                "pass --postgres-url URL, or --sqlite-only"
            ) from None
    return dbs


def features() -> dict[str, object]:
    worker_help = procs.help_text("worker")
    return {
        "worker": bool(worker_help),
        "worker_concurrency": "--concurrency" in worker_help,
        "tick": has_tick(),
        "tick_cli": bool(procs.help_text("tick")),
    }


def measure(
    db: Database, sizes: Sizes, args: argparse.Namespace, have: dict[str, object]
) -> list[Figure]:
    q = bench_app.make_queue(db.url)
    q.migrate()
    sections = args.only.split(",")
    figures: list[Figure] = []
    try:
        if "enqueue" in sections:
            progress(db, "enqueue")
            figures += enqueue_figures(db, q, sizes.enqueue_one, sizes.enqueue_many, args.runs)
        if "processing" in sections:
            progress(db, "processing")
            grid = args.configs
            if not have["worker_concurrency"]:
                grid = [Config(c.processes) for c in grid]
            drainer = Drainer(db, q, sizes.jobs, worker=bool(have["worker"]))
            figures += processing_figures(drainer, grid, sizes.one_at_a_time, args.runs)
        if "latency" in sections:
            progress(db, "latency")
            figures += latency_figures(
                db, q, sizes.latency_jobs, sizes.latency_gap, args.runs, worker=bool(have["worker"])
            )
        if "tick" in sections:
            progress(db, "tick")
            figures += wakeup_figures(
                db,
                q,
                sizes.tick_samples,
                args.runs,
                sizes.cold_runs,
                tick_cli=bool(have["tick_cli"]),
            )
        if "idle" in sections and have["worker"]:
            progress(db, "idle")
            figures += idle_figures(db, args.runs)
            figures += quiet_figures(db, window=10.0 if args.quick else 60.0)
        if "alerts" in sections and have["worker"]:
            progress(db, "alerts")
            figures += alert_figures(db, args.runs)
        if "controls" in sections and have["worker"]:
            progress(db, "controls")
            drainer = LimitedDrainer(db, q, sizes.jobs, worker=True)
            figures += controls_figures(drainer, sizes.one_at_a_time, args.runs)
        if "workflows" in sections and hasattr(tickq, "WorkflowContext"):
            progress(db, "workflows")
            figures += workflow_figures(db, sizes.workflow_runs, args.runs)
    finally:
        q.close()
    return figures


def progress(db: Database, section: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {db.name}: {section}", file=sys.stderr, flush=True)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def metadata(
    dbs: list[Database],
    args: argparse.Namespace,
    sizes: Sizes,
    have: dict[str, object],
    seconds: float,
) -> dict[str, object]:
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "python": platform.python_version(),
        "tickq": tickq.__version__,
        "commit": git_commit(),
        "databases": [db.version() for db in dbs],
        "features": have,
        "sizes": asdict(sizes),
        "runs": args.runs,
        "load_average": os.getloadavg(),
        "seconds": round(seconds, 1),
        "command": " ".join(["python bench/run.py", *sys.argv[1:]]),
    }


def print_header(meta: dict[str, object]) -> None:
    print(
        f"tickq {meta['tickq']} ({meta['commit']}), Python {meta['python']}, "
        f"{', '.join(meta['databases'])}"
    )  # type: ignore[arg-type]
    print(
        f"{meta['date']} on {meta['machine']}; load average at the end "
        f"{', '.join(f'{x:.2f}' for x in meta['load_average'])}; took {meta['seconds']} s"
    )  # type: ignore[attr-defined]
    print(f"`{meta['command']}`; each figure: median of {meta['runs']} runs (min-max)\n")


def compile_bytecode() -> None:
    """Compile this checkout's tickq (and the benchmark app) as ``pip install`` compiles a
    package: with ``PYTHONDONTWRITEBYTECODE`` set, as in many containers, every cold process
    would compile them again and the import and cold-start figures would time the compiler."""
    import compileall

    for folder in (ROOT / "src", ROOT / "bench"):
        compileall.compile_dir(str(folder), quiet=1)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    compile_bytecode()
    sizes = args.sizes
    started = time.monotonic()
    have = features()
    dbs = open_databases(args)
    figures: list[Figure] = []
    try:
        for db in dbs:
            figures += measure(db, sizes, args, have)
        meta = metadata(dbs, args, sizes, have, time.monotonic() - started)
    finally:
        procs.cleanup()
        for db in dbs:
            db.drop()
    print_header(meta)
    print(table(figures))
    if args.json:
        write_json(args.json, meta, figures)
    failed = [f"{f.backend} {f.key}" for f in figures if f.failed]
    if failed:
        print(f"\nFAILED: {', '.join(failed)} (see the table)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
